/* The nghttp2 plumbing of both engines (see session_internal.h). */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* madvise, MADV_DONTNEED, mincore */

#include "net/session_internal.h"

#include "base/clock.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Output gathered from nghttp2 per pc_GrpcSession_Fill, at most. */
#define OUTPUT_CHUNK ((size_t)64 * 1024)
/* An output buffer larger than this is given back when a fill finds
 * nothing to send, so a connection idle after a burst does not keep it. */
#define OUTPUT_KEEP  ((size_t)4096)

/* -- memory -------------------------------------------------------------- */

void *pc_GrpcMem_Alloc(const pc_GrpcMem *m, void *p, size_t osize, size_t nsize) {
  return m->alloc(m->ud, p, osize, nsize);
}

void *pc_GrpcMem_Zalloc(const pc_GrpcMem *m, size_t n) {
  void *p = m->alloc(m->ud, NULL, 0, n);
  if (p) memset(p, 0, n);
  return p;
}

/* The smallest block nghttp2's frame buffer is: a frame header, the pad
 * length byte and the largest payload before SETTINGS_MAX_FRAME_SIZE
 * grows (nghttp2 allocates 9 + 1 + 16384 bytes). */
#define FRAMES_MIN ((size_t)16384)

_Static_assert(offsetof(pc_GrpcSession, m) == 0,
               "nghttp2's user data is the session's first member");

/* -- the start block ------------------------------------------------------ */

/* What nghttp2 allocates while a session is made stays as long as the
 * session: nghttp2 1.52 makes six blocks (its session struct, 2.9 KB; two
 * HPACK rings, 1 KB each; the stream map's table, 4 KB, calloc'd; the
 * frame buffer's chain, 48 B, and the frame buffer, 16 KB). Blocks of their
 * own, each spanning pages partly, keep about 13 KB resident at rest
 * however the frame buffer's whole pages go back: the map's table is
 * touched whole, and each large block's partial pages at both ends hold
 * about a page. Laid out in one block instead, the dead parts (the frame
 * buffer, and the map's table when it reads zero, as it does while no
 * stream is open) span whole pages between the live parts, placed before
 * and after them so that they fill the partial pages: what stays is the
 * live parts and less than the largest gap between their sums, modulo a
 * page (about 6 KB). The sizes are learnt from a first session made in a
 * scratch block and dropped with it (nghttp2's allocations depend on its
 * version and the options; the scratch then becomes the start block); a
 * second session that allocates otherwise gets blocks of its own from
 * where it differs. */

/* Allocations of a session being made that are laid out, at most (else
 * no start block). */
#define PLAN_MAX   16
/* Live parts whose placements are tried: 2^PLAN_LIVE subsets, at most. */
#define PLAN_LIVE  8
#define PLAN_ALIGN ((size_t)16)
/* Bytes the first session takes its memory from (more in blocks of their
 * own); grown or shrunk to the start block once laid out, so the pages the
 * first session touched are the second's. */
#define SCRATCH    ((size_t)32 * 1024)

/* Under AddressSanitizer each piece of the scratch and of the start block
 * is followed by a poisoned gap, and what is not handed out to nghttp2
 * (gaps, slack, pieces not yet taken or freed) stays poisoned: an
 * overflow from one piece into the next is reported as between blocks of
 * their own, not hidden inside one allocation. Release builds lay the
 * pieces out with no gap. */
#if defined(__SANITIZE_ADDRESS__)
#define PC_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PC_ASAN 1
#endif
#endif
#ifdef PC_ASAN
#include <sanitizer/asan_interface.h>
#define PLAN_GAP ((size_t)32)
#else /* nothing evaluated: the same code as with no poisoning at all */
#define PLAN_GAP                          ((size_t)0)
#define ASAN_POISON_MEMORY_REGION(p, n)   ((void)sizeof(p), (void)sizeof(n))
#define ASAN_UNPOISON_MEMORY_REGION(p, n) ((void)sizeof(p), (void)sizeof(n))
#endif

enum { kPiece_Live, kPiece_Zero, kPiece_Frames };

struct pc_GrpcStartPlan {
  int recording;          /* the first session: sizes noted, its memory from 'scratch' */
  unsigned char *scratch; /* SCRATCH bytes the first session takes from, then the block */
  size_t used;            /* ...of them */
  int overflow;           /* more than PLAN_MAX of them */
  int spilled;            /* the first session took memory past the scratch */
  size_t n;               /* allocations noted */
  size_t size[PLAN_MAX];
  unsigned char kind[PLAN_MAX]; /* kPiece_ */
  size_t off[PLAN_MAX];         /* in the block */
  size_t next;                  /* the second session's next (past n: it differed) */
  size_t lo, hi;                /* the block's whole dead pages, offsets */
};

static size_t page_size(void) {
  long ps = sysconf(_SC_PAGESIZE);
  return ps > 0 ? (size_t)ps : 4096;
}

static size_t align_up(size_t n, size_t a) {
  return (n + a - 1) / a * a;
}

/* The bytes a piece of 'size' takes in the scratch or the start block,
 * its gap included. */
static size_t slot(size_t size) {
  return align_up(size, PLAN_ALIGN) + PLAN_GAP;
}

/* The bytes of the piece at 'p' that nghttp2 may use, at most 'n' (under
 * AddressSanitizer: up to its gap; nghttp2 does not say how large a block
 * it frees or reallocates is). */
static size_t piece_len(unsigned char *p, size_t n) {
#ifdef PC_ASAN
  const unsigned char *q = __asan_region_is_poisoned(p, n);
  return q ? (size_t)(q - p) : n;
#else
  (void)p;
  return n;
#endif
}

static int lay_out(pc_GrpcSession *s, struct pc_GrpcStartPlan *pl, size_t page,
                   unsigned char *scratch);

/* Makes the start block (of the scratch) for the sizes 'pl' noted and
 * lays them out. Leaves 's->block' NULL when there is nothing to gain or
 * no memory. The scratch is the block or freed. */
static void plan_block(pc_GrpcSession *s, struct pc_GrpcStartPlan *pl, size_t page) {
  unsigned char *scratch = pl->scratch;
  pl->scratch = NULL;
  ASAN_UNPOISON_MEMORY_REGION(scratch, SCRATCH); /* the allocator's again */
  if (pl->overflow || !lay_out(s, pl, page, scratch)) pc_GrpcMem_Alloc(&s->m, scratch, SCRATCH, 0);
}

/* plan_block's work: 1 when 'scratch' became the start block. */
static int lay_out(pc_GrpcSession *s, struct pc_GrpcStartPlan *pl, size_t page,
                   unsigned char *scratch) {
  size_t live[PLAN_LIVE], nl = 0, dead = 0, lsum = 0, zeros = 0;
  int frames = 0;
  for (size_t i = 0; i < pl->n; i++) {
    size_t here = slot(pl->size[i]);
    if (pl->kind[i] == kPiece_Frames && !frames) {
      frames = 1;
    } else if (pl->kind[i] == kPiece_Zero && zeros < 2) {
      zeros++;
    } else {
      pl->kind[i] = kPiece_Live;
      if (nl == PLAN_LIVE) return 0;
      live[nl++] = i;
      lsum += here;
      continue;
    }
    dead += here;
  }
  if (dead < 2 * page) return 0; /* not worth it */
  /* The dead span (the dead parts, then slack) is 'd' modulo a page, the
   * largest gap between the live parts' subset sums modulo a page: then
   * wherever the block starts, some of the live parts placed before the
   * span end its first partial page within 'd' bytes of its end, so the
   * span's two partial pages hold 'd' bytes together. */
  size_t sums[1u << PLAN_LIVE], mods[1u << PLAN_LIVE], ns = (size_t)1 << nl;
  sums[0] = mods[0] = 0;
  for (size_t m = 1; m < ns; m++) { /* the sum of 'm' less its lowest part, plus that part */
    size_t j = 0;
    while (!(m >> j & 1)) j++;
    sums[m] = sums[m & (m - 1)] + slot(pl->size[live[j]]);
    size_t r = sums[m] % page, k = m; /* insertion-sorted into mods */
    for (; k > 0 && mods[k - 1] > r; k--) mods[k] = mods[k - 1];
    mods[k] = r;
  }
  size_t d = mods[0] + page - mods[ns - 1];
  for (size_t m = 1; m < ns; m++)
    if (mods[m] - mods[m - 1] > d) d = mods[m] - mods[m - 1];
  size_t span = dead + (d % page + page - dead % page) % page;
  size_t size = lsum + span;
  unsigned char *b = pc_GrpcMem_Alloc(&s->m, scratch, SCRATCH, size);
  if (b == NULL) return 0;
  /* The live parts before the span: the subset leaving the fewest bytes
   * outside whole pages of the span. */
  uintptr_t base = (uintptr_t)b, mask = ~(uintptr_t)(page - 1);
  size_t best = 0, best_whole = 0;
  for (size_t m = 0; m < ns; m++) {
    size_t f = sums[m];
    uintptr_t lo = (base + f + page - 1) & mask, hi = (base + f + span) & mask;
    size_t whole = hi > lo ? (size_t)(hi - lo) : 0;
    if (whole > best_whole) {
      best_whole = whole;
      best = m;
    }
  }
  size_t at = 0;
  for (size_t j = 0; j < nl; j++)
    if (best >> j & 1) {
      pl->off[live[j]] = at;
      at += slot(pl->size[live[j]]);
    }
  size_t lo = (size_t)(((base + at + page - 1) & mask) - base);
  size_t hi = (size_t)(((base + at + span) & mask) - base);
  for (size_t i = 0; i < pl->n; i++)
    if (pl->kind[i] != kPiece_Live) {
      pl->off[i] = at;
      at += slot(pl->size[i]);
    }
  at = size; /* the live parts after the span end the block */
  for (size_t j = nl; j-- > 0;)
    if (!(best >> j & 1)) {
      at -= slot(pl->size[live[j]]);
      pl->off[live[j]] = at;
    }
  pl->lo = lo;
  pl->hi = hi > lo ? hi : lo;
  ASAN_POISON_MEMORY_REGION(b, size); /* each piece unpoisoned as it is handed out */
  s->block = b;
  s->block_size = size;
  s->block_live = 0;
  return 1;
}

static int in_block(const pc_GrpcSession *s, const void *p) {
  const unsigned char *q = p;
  return s->block && q >= s->block && q < s->block + s->block_size;
}

/* Notes the frame buffer of a session without a start block: the one
 * large block nghttp2 allocates while the session is made. */
static void note_frames(pc_GrpcSession *s, unsigned char *p, size_t size) {
  if (!s->starting || p == NULL || size < FRAMES_MIN || s->frames) return;
  s->frames = p;
  s->frames_size = size;
}

/* Takes a piece of nghttp2 memory out of the start block: the frame
 * buffer's pages go back no more, the map's table needs no zero check. */
static void block_free(pc_GrpcSession *s, void *ptr) {
  size_t off = (size_t)((unsigned char *)ptr - s->block);
  if (ptr == s->frames) s->frames = NULL;
  for (int z = 0; z < 2; z++)
    if (s->zero_len[z] && s->zero_off[z] == off) s->zero_len[z] = 0;
  ASAN_POISON_MEMORY_REGION(ptr, piece_len(ptr, s->block_size - off));
  if (s->block_live > 0 && --s->block_live > 0) return;
  ASAN_UNPOISON_MEMORY_REGION(s->block, s->block_size);
  pc_GrpcMem_Alloc(&s->m, s->block, s->block_size, 0);
  s->block = NULL;
  s->rest_lo = s->rest_hi = NULL;
}

/* nghttp2 allocates through the connection's allocator, in blocks that
 * keep their size (pc_Grpc_BlockRealloc), or while the session is made
 * from the start block; malloc(0) gives a block, as libc's does. The user
 * data is the session ('m' is its first member). */
/* The size class of a small block: 'n' rounded up to 64 bytes, so blocks
 * nghttp2 frees serve its next allocations of about the same size. */
static size_t spare_class(size_t n) {
  return (n + 63) & ~(size_t)63;
}

static void *ng_alloc(pc_GrpcSession *s, size_t size, int zero) {
  struct pc_GrpcStartPlan *pl = s->starting ? s->plan : NULL;
  if (pl && pl->recording) {
    size_t here = slot(size);
    unsigned char *p = NULL;
    if (pl->used <= SCRATCH && here <= SCRATCH - pl->used) {
      p = pl->scratch + pl->used;
      pl->used += here;
      ASAN_UNPOISON_MEMORY_REGION(p, size);
      if (zero) memset(p, 0, size);
    }
    if (pl->n == PLAN_MAX) {
      pl->overflow = 1;
    } else {
      pl->size[pl->n] = size;
      pl->kind[pl->n] = size >= FRAMES_MIN            ? kPiece_Frames
                        : zero && size >= page_size() ? kPiece_Zero
                                                      : kPiece_Live;
      pl->n++;
    }
    if (p) return p;
    pl->spilled = 1;
  } else if (pl && s->block) {
    if (pl->next < pl->n && pl->size[pl->next] == size) {
      unsigned char *p = s->block + pl->off[pl->next];
      if (pl->kind[pl->next] == kPiece_Frames) {
        s->frames = p;
        s->frames_size = size;
      }
      pl->next++;
      s->block_live++;
      ASAN_UNPOISON_MEMORY_REGION(p, size);
      if (zero) memset(p, 0, size);
      return p;
    }
    pl->next = PLAN_MAX + 1; /* it differs from here on */
  }
  void *p = NULL;
  size_t want = size ? size : 1;
  if (want <= PC_GRPC_SPARE_MAX) {
    want = spare_class(want);
    for (unsigned i = s->spares; i-- > 0;) {
      if (pc_Grpc_BlockSize(s->spare[i]) == want) {
        p = s->spare[i];
        s->spare[i] = s->spare[--s->spares];
        break;
      }
    }
  }
  if (p == NULL) p = pc_Grpc_BlockRealloc(s->m.alloc, s->m.ud, NULL, want);
  if (p && zero) memset(p, 0, size);
  note_frames(s, p, size);
  return p;
}

/* Frees the spare blocks (ng_free keeps some). */
static void drop_spares(pc_GrpcSession *s) {
  while (s->spares > 0) pc_Grpc_BlockRealloc(s->m.alloc, s->m.ud, s->spare[--s->spares], 0);
}

static void *ng_malloc(size_t size, void *ud) {
  return ng_alloc(ud, size, 0);
}

/* 'p' is of the first session's scratch (freed with it). */
static int in_scratch(const pc_GrpcSession *s, const void *p) {
  const unsigned char *q = p, *b = s->plan ? s->plan->scratch : NULL;
  return b && q >= b && q < b + SCRATCH;
}

static void ng_free(void *ptr, void *ud) {
  pc_GrpcSession *s = ud;
  if (ptr == NULL || in_scratch(s, ptr)) return;
  if (in_block(s, ptr)) {
    block_free(s, ptr);
    return;
  }
  if (ptr == s->frames) {
    s->frames = NULL;
    s->rest_lo = s->rest_hi = NULL;
  }
  size_t n = pc_Grpc_BlockSize(ptr);
  if (n <= PC_GRPC_SPARE_MAX && n == spare_class(n) && s->spares < PC_GRPC_SPARE_BLOCKS) {
    s->spare[s->spares++] = ptr; /* for ng_alloc */
    return;
  }
  pc_Grpc_BlockRealloc(s->m.alloc, s->m.ud, ptr, 0);
}

static void *ng_calloc(size_t n, size_t size, void *ud) {
  if (size != 0 && n > SIZE_MAX / size) return NULL;
  return ng_alloc(ud, n * size, 1);
}

static void *ng_realloc(void *ptr, size_t size, void *ud) {
  pc_GrpcSession *s = ud;
  if (ptr == NULL) return ng_malloc(size, ud);
  if (in_scratch(s, ptr)) { /* nghttp2 never does */
    unsigned char *p = pc_Grpc_BlockRealloc(s->m.alloc, s->m.ud, NULL, size ? size : 1);
    size_t left = (size_t)(s->plan->scratch + SCRATCH - (unsigned char *)ptr);
    if (p) memcpy(p, ptr, piece_len(ptr, size < left ? size : left));
    return p;
  }
  if (in_block(s, ptr)) { /* nghttp2 never does: out to a block of its own */
    unsigned char *p = pc_Grpc_BlockRealloc(s->m.alloc, s->m.ud, NULL, size ? size : 1);
    if (p == NULL) return NULL;
    size_t left = (size_t)(s->block + s->block_size - (unsigned char *)ptr);
    memcpy(p, ptr, piece_len(ptr, size < left ? size : left));
    block_free(s, ptr);
    return p;
  }
  void *p = pc_Grpc_BlockRealloc(s->m.alloc, s->m.ud, ptr, size);
  if (p && ptr == s->frames) { /* nghttp2 never does: not followed */
    s->frames = NULL;
    s->rest_lo = s->rest_hi = NULL;
  }
  return p;
}

/* -- the session --------------------------------------------------------- */

/* The callbacks below get the engine as user data; its block starts with
 * its session. */

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *ud) {
  pc_GrpcSession *s = ud;
  s->block_bytes = 0;
  return s->role->begin_headers ? s->role->begin_headers(session, frame, ud) : 0;
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *ud) {
  pc_GrpcSession *s = ud;
  (void)flags;
  void *stream = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
  if (stream == NULL || frame->hd.type != NGHTTP2_HEADERS) return 0;
  s->block_bytes += namelen + valuelen + 32;
  return s->role->header(ud, stream, frame, name, namelen, value, valuelen,
                         s->block_bytes > s->max_header_list);
}

static int on_error(nghttp2_session *session, int lib_error_code, const char *msg, size_t len,
                    void *ud) {
  pc_GrpcSession *s = ud;
  (void)session;
  (void)lib_error_code;
  /* Kept in a block of its own: few connections ever fail. */
  if (s->said) pc_GrpcMem_Alloc(&s->m, s->said, strlen(s->said) + 1, 0);
  if (len >= PC_ERROR_MAX) len = PC_ERROR_MAX - 1;
  s->said = pc_GrpcMem_Alloc(&s->m, NULL, 0, len + 1);
  if (s->said) {
    memcpy(s->said, msg, len);
    s->said[len] = '\0';
  }
  return 0;
}

static ssize_t read_body(nghttp2_session *session, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *data_flags, nghttp2_data_source *source, void *ud) {
  const pc_GrpcSession *s = ud;
  (void)source;
  void *stream = nghttp2_session_get_stream_user_data(session, id);
  if (stream == NULL) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  return s->role->body(ud, stream, buf, length, data_flags);
}

static nghttp2_session_callbacks *new_callbacks(const pc_GrpcSessionCallbacks *c) {
  nghttp2_session_callbacks *cb;
  if (nghttp2_session_callbacks_new(&cb) != 0) return NULL;
  nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
  nghttp2_session_callbacks_set_error_callback2(cb, on_error);
  if (c->begin_frame) nghttp2_session_callbacks_set_on_begin_frame_callback(cb, c->begin_frame);
  if (c->data_chunk) nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, c->data_chunk);
  if (c->frame_recv) nghttp2_session_callbacks_set_on_frame_recv_callback(cb, c->frame_recv);
  if (c->frame_send) nghttp2_session_callbacks_set_on_frame_send_callback(cb, c->frame_send);
  if (c->frame_not_sent)
    nghttp2_session_callbacks_set_on_frame_not_send_callback(cb, c->frame_not_sent);
  if (c->stream_close) nghttp2_session_callbacks_set_on_stream_close_callback(cb, c->stream_close);
  if (c->invalid_frame)
    nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(cb, c->invalid_frame);
  return cb;
}

static void out_of_memory(const pc_GrpcSessionRole *role, pc_Error *err) {
  pc_Error_Set(err, "cannot start an HTTP/2 %ssession: out of memory",
               role->server ? "server " : "");
}

void *pc_GrpcSession_New(const pc_GrpcSessionRole *role, pc_Alloc *alloc, void *ud, size_t size,
                         pc_Error *err) {
  pc_GrpcMem m = {alloc ? alloc : pc_DefaultAlloc, ud};
  pc_GrpcSession *s = pc_GrpcMem_Zalloc(&m, size);
  if (s == NULL) {
    out_of_memory(role, err);
    return NULL;
  }
  s->m = m;
  s->role = role;
  s->rest_delay = PC_GRPC_REST_DELAY;
  return s;
}

void pc_GrpcSession_OutOfMemory(const pc_GrpcSession *s, pc_Error *err) {
  out_of_memory(s->role, err);
}

/* Makes the role's session into '*out' (nghttp2's result). */
static int new_session(pc_GrpcSession *s, const nghttp2_session_callbacks *cb,
                       const nghttp2_option *opt, nghttp2_session **out) {
  s->starting = 1;
  int r = s->role->server ? nghttp2_session_server_new3(out, cb, s, opt, &s->mem)
                          : nghttp2_session_client_new3(out, cb, s, opt, &s->mem);
  s->starting = 0;
  return r;
}

/* The pages that go back at rest: the start block's dead span when the
 * session was made as planned, else the frame buffer's whole pages. */
static void rest_pages(pc_GrpcSession *s, const struct pc_GrpcStartPlan *pl) {
  s->rest_lo = s->rest_hi = NULL;
  if (s->block && pl->next == pl->n) {
    int z = 0;
    for (size_t i = 0; i < pl->n; i++)
      if (pl->kind[i] == kPiece_Zero && z < 2) {
        s->zero_off[z] = pl->off[i];
        s->zero_len[z++] = pl->size[i];
      }
    s->rest_lo = s->block + pl->lo;
    s->rest_hi = s->block + pl->hi;
  } else if (s->frames) {
    uintptr_t page = page_size(), a = (uintptr_t)s->frames, mask = ~(page - 1);
    s->rest_lo = s->frames + (((a + page - 1) & mask) - a);
    s->rest_hi = s->frames + (((a + s->frames_size) & mask) - a);
  }
  if (s->rest_hi <= s->rest_lo) s->rest_lo = s->rest_hi = NULL;
  /* the allocator may have handed out pages in use before */
  s->frames_dirty = s->frames_new = s->rest_lo != NULL;
}

/* The body of pc_GrpcSession_Start but for the error. */
static int start(pc_GrpcSession *s, const pc_GrpcSessionSettings *settings) {
  const pc_GrpcSessionRole *role = s->role;
  s->max_header_list = settings->max_header_list;
  s->mem.mem_user_data = s;
  s->mem.malloc = ng_malloc;
  s->mem.free = ng_free;
  s->mem.calloc = ng_calloc;
  s->mem.realloc = ng_realloc;
  nghttp2_session_callbacks *cb = new_callbacks(&role->nghttp2);
  if (cb == NULL) return 0;
  nghttp2_option *opt;
  if (nghttp2_option_new(&opt) != 0) {
    nghttp2_session_callbacks_del(cb);
    return 0;
  }
  nghttp2_option_set_no_auto_window_update(opt, 1);
  nghttp2_option_set_max_send_header_block_length(opt, PC_GRPC_MAX_SEND_HEADER_BLOCK);
#if NGHTTP2_VERSION_NUM >= 0x013200
  /* A field value with a leading or trailing space or tab, which RFC 9113
   * section 8.2.1 forbids but gRPC's metadata (printable ASCII) allows:
   * grpc-core and grpcio take it, so this side does too (nghttp2 >= 1.50;
   * an older one resets the stream PROTOCOL_ERROR). */
  nghttp2_option_set_no_rfc9113_leading_and_trailing_ws_validation(opt, 1);
#endif
  if (role->server) {
    /* The engine's token bucket answers with ENHANCE_YOUR_CALM first. */
    nghttp2_option_set_stream_reset_rate_limit(opt, 1u << 30, 1u << 30);
    nghttp2_option_set_max_continuations(opt, 16);
    /* gRPC sends no PRIORITY: a closed stream is not kept for the
     * priority tree (an nghttp2_stream, 224 bytes, per recently closed
     * call). */
    nghttp2_option_set_no_closed_streams(opt, 1);
  } else {
    nghttp2_option_set_max_reserved_remote_streams(opt, 0);
  }
  /* A first session tells what nghttp2 allocates (then dropped), the
   * second is made in the start block laid out for it. */
  struct pc_GrpcStartPlan plan;
  memset(&plan, 0, sizeof plan);
  plan.scratch = pc_GrpcMem_Alloc(&s->m, NULL, 0, SCRATCH);
  if (plan.scratch) ASAN_POISON_MEMORY_REGION(plan.scratch, SCRATCH);
  int r = 0;
  s->plan = &plan;
  if (plan.scratch) { /* else no start block */
    nghttp2_session *first = NULL;
    plan.recording = 1;
    r = new_session(s, cb, opt, &first);
    plan.recording = 0;
    /* All of it in the scratch, it owns nothing else (no stream yet):
     * the scratch goes, no need to delete it piece by piece. */
    if (r == 0 && plan.spilled) nghttp2_session_del(first);
    plan_block(s, &plan, page_size());
  }
  if (r == 0) r = new_session(s, cb, opt, &s->session);
  s->plan = NULL;
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cb);
  if (s->block && s->block_live == 0) { /* nothing taken from it */
    ASAN_UNPOISON_MEMORY_REGION(s->block, s->block_size);
    pc_GrpcMem_Alloc(&s->m, s->block, s->block_size, 0);
    s->block = NULL;
  }
  if (r != 0) {
    s->session = NULL;
    return 0;
  }
  rest_pages(s, &plan);
  uint32_t sw = settings->stream_window ? settings->stream_window : PC_GRPC_DEFAULT_STREAM_WINDOW;
  uint32_t cw =
      settings->connection_window ? settings->connection_window : PC_GRPC_DEFAULT_CONNECTION_WINDOW;
  if (sw > 0x7fffffff) sw = 0x7fffffff;
  if (cw > 0x7fffffff) cw = 0x7fffffff;
  size_t hl = settings->max_header_list > 0xffffffffu ? 0xffffffffu : settings->max_header_list;
  nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                 {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, sw},
                                 {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, (uint32_t)hl}};
  if (role->server) {
    iv[0].settings_id = NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS;
    iv[0].value = settings->max_streams;
  }
  if (nghttp2_submit_settings(s->session, NGHTTP2_FLAG_NONE, iv, 3) != 0) return 0;
  return nghttp2_session_set_local_window_size(s->session, NGHTTP2_FLAG_NONE, 0, (int32_t)cw) == 0;
}

int pc_GrpcSession_Start(pc_GrpcSession *s, const pc_GrpcSessionSettings *settings, pc_Error *err) {
  if (start(s, settings)) return 1;
  pc_GrpcSession_OutOfMemory(s, err);
  return 0;
}

void pc_GrpcSession_Free(pc_GrpcSession *s, size_t size) {
  pc_GrpcMem m = s->m;
  if (s->session) nghttp2_session_del(s->session);
  drop_spares(s);
  if (s->block) { /* nghttp2 freed its pieces */
    ASAN_UNPOISON_MEMORY_REGION(s->block, s->block_size);
    pc_GrpcMem_Alloc(&m, s->block, s->block_size, 0);
  }
  if (s->said) pc_GrpcMem_Alloc(&m, s->said, strlen(s->said) + 1, 0);
  pc_GrpcBuf_Free(m.alloc, m.ud, &s->out);
  pc_GrpcMem_Alloc(&m, s, size, 0);
}

int pc_GrpcSession_Recv(pc_GrpcSession *s, const void *data, size_t len, char *why, size_t size) {
  ssize_t r = nghttp2_session_mem_recv(s->session, data, len);
  if (r >= 0) return 1;
  snprintf(why, size, "%s", s->said ? s->said : nghttp2_strerror((int)r));
  return 0;
}

nghttp2_data_provider pc_GrpcSession_Body(void) {
  nghttp2_data_provider p;
  p.source.ptr = NULL;
  p.read_callback = read_body;
  return p;
}

int pc_GrpcSession_Fill(pc_GrpcSession *s, char *why, size_t size) {
  if (s->out_pos != s->out.len) return 1;
  return pc_GrpcSession_FillMore(s, why, size);
}

int pc_GrpcSession_FillMore(pc_GrpcSession *s, char *why, size_t size) {
  if (s->dead) return 1;
  if (s->out_pos == s->out.len) s->out.len = s->out_pos = 0;
  while (s->out.len < OUTPUT_CHUNK) {
    const uint8_t *p;
    s->quiet = 0;
    ssize_t n = nghttp2_session_mem_send(s->session, &p);
    if (n > 0) s->rest_at = 0;
    if (n > 0 && (uintptr_t)p < (uintptr_t)s->rest_hi &&
        (uintptr_t)p + (size_t)n > (uintptr_t)s->rest_lo)
      s->frames_dirty = 1;
    if (n < 0) {
      snprintf(why, size, "HTTP/2 session failed: %s", nghttp2_strerror((int)n));
      s->dead = 1;
      return 0;
    }
    if (n == 0) {
      s->quiet = 1;
      break;
    }
    if (!pc_GrpcBuf_Reserve(s->m.alloc, s->m.ud, &s->out, (size_t)n)) {
      snprintf(why, size, "out of memory sending");
      s->dead = 1;
      return 0;
    }
    memcpy(s->out.p + s->out.len, p, (size_t)n);
    s->out.len += (size_t)n;
  }
  if (s->out.len == 0 && s->out.cap > OUTPUT_KEEP) pc_GrpcBuf_Free(s->m.alloc, s->m.ud, &s->out);
  return 1;
}

/* The page at 'q' holds none of the parts that must read zero, or they
 * do. */
static int zero_ok(const pc_GrpcSession *s, const unsigned char *q, size_t page) {
  for (int z = 0; z < 2; z++) {
    if (s->zero_len[z] == 0) continue;
    const unsigned char *a = s->block + s->zero_off[z], *b = a + s->zero_len[z];
    if (a < q) a = q;
    if (b > q + page) b = q + page;
    if (a < b && (*a != 0 || memcmp(a, a + 1, (size_t)(b - a) - 1) != 0)) return 0;
  }
  return 1;
}

void pc_GrpcSession_Rest(pc_GrpcSession *s) {
  if (s->out_pos == s->out.len && s->out.cap > 0) {
    pc_GrpcBuf_Free(s->m.alloc, s->m.ud,
                    &s->out); /* the next Fill makes one as large as it needs */
    s->out_pos = 0;
  }
  if (s->rest_lo == NULL || !s->frames_dirty || !s->quiet) return;
  if (!s->frames_new) {
    double now = pc_Clock_Monotonic();
    if (s->rest_at == 0) s->rest_at = now;
    if (now - s->rest_at < s->rest_delay) return;
  }
  s->frames_new = 0;
  s->rest_at = 0;
  s->frames_dirty = 0;
  drop_spares(s); /* they go back with the pages */
  /* Private memory reads back as zeros, shared memory as what was written
   * (a page of the map's table goes back only when it reads zero): either
   * way nothing nghttp2 will read before writing reads otherwise. A
   * failure (memory locked, say) leaves the pages as they are. */
  size_t page = page_size();
  unsigned char *run = NULL;
  for (unsigned char *q = s->rest_lo; q <= s->rest_hi; q += page) {
    int ok = q < s->rest_hi && zero_ok(s, q, page);
    if (ok && run == NULL) run = q;
    if (!ok && run) {
      (void)madvise(run, (size_t)(q - run), MADV_DONTNEED);
      run = NULL;
    }
  }
}

size_t pc_GrpcSession_RestResident(const pc_GrpcSession *s) {
  size_t page = page_size(), in = 0;
  unsigned char vec[64];
  for (unsigned char *q = s->rest_lo; q < s->rest_hi; q += page * sizeof vec) {
    size_t len = (size_t)(s->rest_hi - q);
    if (len > page * sizeof vec) len = page * sizeof vec;
    if (mincore(q, len, vec) != 0) return (size_t)-1;
    for (size_t k = 0; k < len / page; k++) in += vec[k] & 1;
  }
  return in;
}

size_t pc_GrpcSession_Output(const pc_GrpcSession *s, const char **data) {
  if (s->out.p == NULL) { /* none yet, or freed at rest */
    *data = "";
    return 0;
  }
  *data = s->out.p + s->out_pos;
  return s->out.len - s->out_pos;
}

void pc_GrpcSession_Wrote(pc_GrpcSession *s, size_t n) {
  size_t left = s->out.len - s->out_pos;
  s->out_pos += n < left ? n : left;
}

size_t pc_GrpcSession_Unsent(const pc_GrpcSession *s) {
  return s->out.len - s->out_pos;
}

/* -- headers ------------------------------------------------------------- */

int pc_GrpcPairs_Add(pc_GrpcPairs *ps, pc_Arena *a, const char *k, size_t kn, const char *v,
                     size_t vn, int decode_bin) {
  if (ps->count == ps->cap) {
    size_t cap = ps->cap ? ps->cap * 2 : 8;
    pc_GrpcPair *items = pc_Arena_Malloc(a, cap * sizeof *items);
    if (items == NULL) return 0;
    if (ps->count) memcpy(items, ps->items, ps->count * sizeof *items);
    ps->items = items;
    ps->cap = cap;
  }
  char *key = pc_Arena_StrDup(a, k, kn);
  if (key == NULL) return 0;
  char *value = NULL;
  if (decode_bin && pc_Grpc_IsBinKey(key, kn)) {
    unsigned char *raw = pc_Arena_Malloc(a, vn / 4 * 3 + 4);
    if (raw == NULL) return 0;
    size_t n = pc_Grpc_Base64Decode(v, vn, raw);
    if (n != (size_t)-1) {
      raw[n] = '\0';
      value = (char *)raw;
      vn = n;
    }
  }
  if (value == NULL) value = pc_Arena_StrDup(a, v, vn);
  if (value == NULL) return 0;
  ps->items[ps->count].key = key;
  ps->items[ps->count].key_len = kn;
  ps->items[ps->count].value = value;
  ps->items[ps->count].value_len = vn;
  ps->count++;
  return 1;
}

nghttp2_nv pc_Grpc_Nv(const char *k, size_t kn, const char *v, size_t vn) {
  nghttp2_nv x;
  /* nghttp2 copies the bytes and never writes them (no NO_COPY flag). */
  memcpy(&x.name, &k, sizeof k);
  memcpy(&x.value, &v, sizeof v);
  x.namelen = kn;
  x.valuelen = vn;
  x.flags = NGHTTP2_NV_FLAG_NONE;
  return x;
}

int pc_Grpc_PushPairs(const pc_GrpcPair *items, size_t count, pc_Arena *a, nghttp2_nv *h,
                      size_t *n) {
  for (size_t i = 0; i < count; i++) {
    const pc_GrpcPair *p = &items[i];
    const char *v = p->value;
    size_t vn = p->value_len;
    if (pc_Grpc_IsBinKey(p->key, p->key_len)) {
      char *b = pc_Arena_Malloc(a, p->value_len / 3 * 4 + 8);
      if (b == NULL) return 0;
      vn = pc_Grpc_Base64Encode((const unsigned char *)p->value, p->value_len, b);
      v = b;
    }
    h[(*n)++] = pc_Grpc_Nv(p->key, p->key_len, v, vn);
  }
  return 1;
}

size_t pc_Grpc_NvListSize(const nghttp2_nv *h, size_t n) {
  size_t size = 0;
  for (size_t i = 0; i < n; i++) size += h[i].namelen + h[i].valuelen + 32;
  return size;
}

size_t pc_Grpc_NvBound(const nghttp2_nv *h, size_t n) {
  /* nghttp2_hd_deflate_bound: 12 bytes of table size updates, each field
   * as a literal with a new name (two length prefixes of up to 6 bytes),
   * then NGHTTP2_PRIORITY_SPECLEN. */
  size_t size = 12 + 12 * n + 5;
  for (size_t i = 0; i < n; i++) size += h[i].namelen + h[i].valuelen;
  return size;
}

/* -- received messages --------------------------------------------------- */

/* The length in a message's 5-byte prefix (after the flags byte). */
static uint32_t prefix_length(const unsigned char *h) {
  return (uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 8 | h[4];
}

int pc_GrpcInbox_Append(pc_GrpcInbox *b, const pc_GrpcMem *m, const uint8_t *data, size_t len) {
  b->unconsumed += len;
  if (b->rpos > 0 && b->rpos == b->buf.len) b->buf.len = b->rpos = b->scan = 0;
  if (!pc_GrpcBuf_Reserve(m->alloc, m->ud, &b->buf, len)) return 0;
  memcpy(b->buf.p + b->buf.len, data, len);
  b->buf.len += len;
  return 1;
}

pc_GrpcRead pc_GrpcInbox_Scan(pc_GrpcInbox *b, size_t max, int gzip, int *whole) {
  *whole = 0;
  while (b->buf.len - b->scan >= 5) {
    const unsigned char *h = (const unsigned char *)b->buf.p + b->scan;
    uint32_t len = prefix_length(h);
    if (h[0] > 1) return kPc_GrpcRead_BadFlags;
    if (h[0] == 1 && !gzip) return kPc_GrpcRead_Compressed;
    if (len > max) return kPc_GrpcRead_TooLarge;
    if (b->buf.len - b->scan - 5 < len) break;
    b->scan += 5 + (size_t)len;
    (*whole)++;
  }
  return kPc_GrpcRead_Ok;
}

int pc_GrpcInbox_Ready(const pc_GrpcInbox *b) {
  return b->rpos < b->scan;
}

pc_GrpcRead pc_GrpcInbox_Take(pc_GrpcInbox *b, const pc_GrpcMem *m, size_t max, const char **data,
                              size_t *len, int *compressed) {
  const unsigned char *h = (const unsigned char *)b->buf.p + b->rpos;
  size_t n = prefix_length(h);
  const char *body = b->buf.p + b->rpos + 5;
  b->rpos += 5 + n;
  *compressed = h[0] == 1;
  if (h[0] == 0) {
    *data = body;
    *len = n;
    return kPc_GrpcRead_Ok;
  }
  size_t out = pc_Grpc_Gunzip(m->alloc, m->ud, body, n, max, &b->dbuf, &b->dcap);
  if (out == (size_t)-1) return kPc_GrpcRead_NotGzip;
  if (out == (size_t)-2) return kPc_GrpcRead_Inflated;
  if (out == (size_t)-3) return kPc_GrpcRead_NoMemory;
  *data = b->dbuf;
  *len = out;
  return kPc_GrpcRead_Ok;
}

void pc_GrpcInbox_Drop(pc_GrpcInbox *b) {
  if (b->rpos == 0) return;
  memmove(b->buf.p, b->buf.p + b->rpos, b->buf.len - b->rpos);
  b->buf.len -= b->rpos;
  b->scan -= b->rpos;
  b->rpos = 0;
}

void pc_GrpcInbox_Clear(pc_GrpcInbox *b) {
  b->buf.len = b->rpos = b->scan = 0;
}

size_t pc_GrpcInbox_Partial(const pc_GrpcInbox *b) {
  return b->buf.len - b->scan;
}

pc_Code pc_GrpcInbox_Failure(const pc_GrpcInbox *b, pc_GrpcRead r, size_t max, const char *what,
                             const char *limit, char *text, size_t size) {
  const unsigned char *h;
  switch (r) {
  case kPc_GrpcRead_BadFlags:
    h = (const unsigned char *)b->buf.p + b->scan;
    snprintf(text, size, "%s message has an invalid flags byte 0x%02x", what, h[0]);
    return kPc_Code_Internal;
  case kPc_GrpcRead_TooLarge:
    h = (const unsigned char *)b->buf.p + b->scan;
    snprintf(text, size, "%s message of %lu bytes exceeds %s of %zu bytes", what,
             (unsigned long)prefix_length(h), limit, max);
    return kPc_Code_ResourceExhausted;
  case kPc_GrpcRead_NotGzip:
    snprintf(text, size, "%s message is not valid gzip", what);
    return kPc_Code_Internal;
  case kPc_GrpcRead_Inflated:
    snprintf(text, size, "decompressed %s message exceeds %s of %zu bytes", what, limit, max);
    return kPc_Code_ResourceExhausted;
  case kPc_GrpcRead_NoMemory:
    snprintf(text, size, "out of memory decompressing a %s", what);
    return kPc_Code_ResourceExhausted;
  default: snprintf(text, size, "%s message could not be read", what); return kPc_Code_Internal;
  }
}

void pc_GrpcInbox_Release(pc_GrpcInbox *b, nghttp2_session *session, int32_t id, int keep) {
  size_t held = keep ? b->scan - b->rpos : 0;
  if (b->unconsumed > held && session) {
    nghttp2_session_consume(session, id, b->unconsumed - held);
    b->unconsumed = held;
  }
}

size_t pc_GrpcInbox_Expected(const pc_GrpcInbox *b) {
  if (b->buf.len - b->scan < 5) return 0;
  return 5 + (size_t)prefix_length((const unsigned char *)b->buf.p + b->scan);
}

void pc_GrpcInbox_Closed(pc_GrpcInbox *b, nghttp2_session *session) {
  if (b->unconsumed > 0) nghttp2_session_consume_connection(session, b->unconsumed);
  b->unconsumed = 0;
}

void pc_GrpcInbox_Detach(pc_GrpcInbox *b, nghttp2_session *session, int32_t id) {
  pc_GrpcInbox_Closed(b, session);
  nghttp2_session_set_stream_user_data(session, id, NULL);
}

void pc_GrpcInbox_FreeMessage(pc_GrpcInbox *b, const pc_GrpcMem *m) {
  if (b->dbuf) m->alloc(m->ud, b->dbuf, b->dcap, 0);
  b->dbuf = NULL;
  b->dcap = 0;
}

void pc_GrpcInbox_Free(pc_GrpcInbox *b, const pc_GrpcMem *m) {
  pc_GrpcBuf_Free(m->alloc, m->ud, &b->buf);
  pc_GrpcInbox_FreeMessage(b, m);
}

/* -- messages to send ---------------------------------------------------- */

int pc_GrpcOutbox_Frame(pc_GrpcOutbox *o, const pc_GrpcMem *m, const void *msg, size_t len,
                        int gzip) {
  if (o->pos > 0 && o->pos == o->buf.len) o->buf.len = o->pos = 0;
  return pc_Grpc_FrameMessage(m->alloc, m->ud, &o->buf, msg, len, gzip);
}

size_t pc_GrpcOutbox_Unsent(const pc_GrpcOutbox *o) {
  return o->buf.len - o->pos;
}

ssize_t pc_GrpcOutbox_Pull(pc_GrpcOutbox *o, uint8_t *buf, size_t length, int last,
                           uint32_t *data_flags) {
  size_t left = o->buf.len - o->pos;
  if (left == 0) {
    if (!last) {
      o->deferred = 1;
      return NGHTTP2_ERR_DEFERRED;
    }
    *data_flags |= NGHTTP2_DATA_FLAG_EOF;
    return 0;
  }
  size_t n = left < length ? left : length;
  memcpy(buf, o->buf.p + o->pos, n);
  o->pos += n;
  if (o->pos == o->buf.len) o->buf.len = o->pos = 0;
  return (ssize_t)n;
}

void pc_GrpcOutbox_Resume(pc_GrpcOutbox *o, nghttp2_session *session, int32_t id) {
  if (o->deferred && session) {
    o->deferred = 0;
    nghttp2_session_resume_data(session, id);
  }
}

void pc_GrpcOutbox_Clear(pc_GrpcOutbox *o) {
  o->buf.len = o->pos = 0;
}

void pc_GrpcOutbox_Free(pc_GrpcOutbox *o, const pc_GrpcMem *m) {
  pc_GrpcBuf_Free(m->alloc, m->ud, &o->buf);
}

/* -- text ---------------------------------------------------------------- */

size_t pc_Grpc_VFormat(char *text, size_t size, const char *fmt, va_list ap) {
  int n = vsnprintf(text, size, fmt, ap);
  if (n < 0) n = 0;
  if ((size_t)n >= size) n = (int)size - 1;
  return (size_t)n;
}
