/* Private to core/net: the nghttp2 plumbing the client engine (engine.c)
 * and the server engine (server.c) share, the same for both roles: a
 * session whose allocations go through a pc_Alloc, with the nghttp2
 * callbacks both roles need the same way (the header list size counted
 * per block, what nghttp2 said about an error, the data source of a body)
 * calling the role's hooks; its output buffer; header pairs in and out;
 * and each stream's two directions: the inbox (received bytes, the gRPC
 * length-prefixed message scanner, gunzip, the flow-control window given
 * back as messages are read) and the outbox (framed messages a data source
 * hands to nghttp2). */
#ifndef PC_NET_SESSION_INTERNAL_H
#define PC_NET_SESSION_INTERNAL_H

#include "net/grpc.h"

#include <nghttp2/nghttp2.h>

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* -- memory -------------------------------------------------------------- */

/* The allocator a connection and each of its streams keep (a stream can
 * outlive its connection, detached). */
typedef struct {
  pc_Alloc *alloc;
  void *ud;
} pc_GrpcMem;

/* m->alloc(m->ud, p, osize, nsize): pc_Alloc's contract. */
void *pc_GrpcMem_Alloc(const pc_GrpcMem *m, void *p, size_t osize, size_t nsize);

/* 'n' zeroed bytes from 'm', or NULL when the allocator fails. */
void *pc_GrpcMem_Zalloc(const pc_GrpcMem *m, size_t n);

/* -- the session --------------------------------------------------------- */

/* One header of a HEADERS block on a stream that has user data ('stream'),
 * counted against the header list size the session advertised: 'over'
 * once the block exceeds it (each header counts its name, its value and
 * 32 bytes, as RFC 9113 6.5.2 counts). 'user' is the engine. Returns 0 or
 * an nghttp2 error (NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE resets the
 * stream). */
typedef int pc_GrpcHeaderFn(void *user, void *stream, const nghttp2_frame *frame,
                            const uint8_t *name, size_t namelen, const uint8_t *value,
                            size_t valuelen, int over);

/* nghttp2 reads the body of a stream that has user data ('stream') into
 * 'buf' ('length' bytes at most): the data source's read callback, with
 * 'user' the engine (pc_GrpcOutbox_Pull does the usual part). */
typedef ssize_t pc_GrpcBodyFn(void *user, void *stream, uint8_t *buf, size_t length,
                              uint32_t *data_flags);

/* nghttp2 callbacks a role has passed through as they are (user data: the
 * engine); a NULL one is not set. */
typedef struct {
  nghttp2_on_begin_frame_callback begin_frame;
  nghttp2_on_data_chunk_recv_callback data_chunk;
  nghttp2_on_frame_recv_callback frame_recv;
  nghttp2_on_frame_send_callback frame_send;
  nghttp2_on_frame_not_send_callback frame_not_sent;
  nghttp2_on_stream_close_callback stream_close;
  nghttp2_on_invalid_frame_recv_callback invalid_frame;
} pc_GrpcSessionCallbacks;

/* What a client and a server session do differently: which session, the
 * hooks the session's own callbacks call (user data: the engine) and the
 * other callbacks. */
typedef struct {
  int server; /* a server session (else a client one) */
  /* A header block begins (after the header count is reset); may be NULL. */
  nghttp2_on_begin_headers_callback begin_headers;
  pc_GrpcHeaderFn *header;
  pc_GrpcBodyFn *body; /* the data source of pc_GrpcSession_Body */
  pc_GrpcSessionCallbacks nghttp2;
} pc_GrpcSessionRole;

/* The SETTINGS a session starts with. */
typedef struct {
  uint32_t max_streams;       /* a server's SETTINGS_MAX_CONCURRENT_STREAMS */
  uint32_t stream_window;     /* SETTINGS_INITIAL_WINDOW_SIZE in bytes (cut to 2^31-1);
                               * 0: PC_GRPC_DEFAULT_STREAM_WINDOW */
  uint32_t connection_window; /* the connection's receive window in bytes (cut to
                               * 2^31-1); 0: PC_GRPC_DEFAULT_CONNECTION_WINDOW */
  size_t max_header_list;     /* SETTINGS_MAX_HEADER_LIST_SIZE in bytes (advertised cut
                               * to 2^32-1), enforced per header block */
} pc_GrpcSessionSettings;

/* Blocks nghttp2 freed that a session keeps for its next allocations
 * (pc_GrpcSession's 'spare'), and the largest such block, bytes: nghttp2
 * makes some 4 blocks a call (its stream, the queued HEADERS and DATA,
 * the copied header list), so 32 serve 8 calls in flight. */
#define PC_GRPC_SPARE_BLOCKS 32
#define PC_GRPC_SPARE_MAX    1024

/* One connection's nghttp2 session and the output gathered from it; the
 * first member of its engine, which is nghttp2's user data. */
typedef struct {
  pc_GrpcMem m;
  nghttp2_session *session; /* NULL until pc_GrpcSession_Start succeeds */
  nghttp2_mem mem;          /* nghttp2 allocates through 'm' */
  const pc_GrpcSessionRole *role;
  size_t max_header_list; /* of pc_GrpcSessionSettings */
  size_t block_bytes;     /* of the header block being received (blocks never interleave) */
  char *said;             /* what nghttp2 said about the last error (NULL before one,
                           * or when memory ran out; at most PC_ERROR_MAX - 1 bytes) */
  int dead;               /* the connection carries nothing more (set by the engine too) */
  pc_GrpcBuf out;         /* output, handed out from 'out_pos' */
  size_t out_pos;
  /* nghttp2's frame buffer: the 16 KiB chunk it serializes every outgoing
   * frame into, allocated with the session and kept as long (nghttp2 has
   * no setting for it). */
  unsigned char *frames;
  size_t frames_size;
  /* The start block: one allocation holding what nghttp2 allocates while
   * the session is made (its session struct, HPACK rings, stream map and
   * frame buffer; the sizes learnt from a session made and deleted first),
   * laid out so that what is dead or zero at rest (the frame buffer, the
   * stream map's table) spans whole pages between the live parts, which
   * fill the partial pages at both ends. NULL when the sizes did not
   * match (each allocation is a block of its own then). Under
   * AddressSanitizer a poisoned gap follows each piece, and what nghttp2
   * does not hold is poisoned, so an overflow from one piece into the next
   * is reported. */
  unsigned char *block;
  size_t block_size;
  unsigned block_live; /* its pieces nghttp2 has not freed */
  /* Whole pages that go back at rest (pc_GrpcSession_Rest): of the start
   * block's dead span, else of the frame buffer; NULL, NULL: none. */
  unsigned char *rest_lo, *rest_hi;
  /* Parts of the rest pages that must read zero for a page to go back
   * (nghttp2's stream map while no stream is open): offsets in 'block',
   * 'zero_len' 0 once nghttp2 freed it. */
  size_t zero_off[2], zero_len[2];
  struct pc_GrpcStartPlan *plan; /* while starting: the layout being made */
  int frames_dirty;              /* written into the rest pages since they last went back */
  int frames_new;    /* ...and they never went back: the allocator's pages as they came */
  double rest_at;    /* monotonic seconds the session was first found resting with
                      * written pages, 0: it has sent since */
  double rest_delay; /* seconds it rests before they go back: PC_GRPC_REST_DELAY */
  int quiet;         /* the last nghttp2_session_mem_send had nothing to send */
  int starting;      /* inside nghttp2_session_*_new3 (its allocations) */
  /* Small blocks nghttp2 freed (a stream, a frame queued, a header list
   * copied: some 4 of each a call), kept for its next allocations of the
   * same size class; they go back with the rest pages, or at the end. */
  void *spare[PC_GRPC_SPARE_BLOCKS];
  unsigned spares;
} pc_GrpcSession;

/* A zeroed block of 'size' bytes (an engine of 'role', which outlives it)
 * that starts with its session, whose allocator is 'alloc' (NULL:
 * pc_DefaultAlloc) with 'ud'. NULL with 'err' set ("cannot start an HTTP/2
 * session: out of memory", "... server session ...") when the allocator
 * fails. */
void *pc_GrpcSession_New(const pc_GrpcSessionRole *role, pc_Alloc *alloc, void *ud, size_t size,
                         pc_Error *err);

/* Starts 's' (from pc_GrpcSession_New) with 'settings': nghttp2 calls back
 * with the engine 's' starts as user data. Automatic WINDOW_UPDATE is off
 * (the engines give bytes back as messages are read); a client takes no
 * pushes (SETTINGS_ENABLE_PUSH 0, no reserved streams); a server leaves
 * reset streams to the engine's token bucket (nghttp2's own limit far
 * above it) and takes at most 16 CONTINUATION frames a block. Queues the
 * first SETTINGS and the connection window. Returns 0 with 'err' set as
 * pc_GrpcSession_New does when memory runs out ('s->session' may be set
 * then: pc_GrpcSession_Free frees it). */
int pc_GrpcSession_Start(pc_GrpcSession *s, const pc_GrpcSessionSettings *settings, pc_Error *err);

/* Sets 'err' as pc_GrpcSession_New does when it fails (for the engine's
 * own allocations while it starts). */
void pc_GrpcSession_OutOfMemory(const pc_GrpcSession *s, pc_Error *err);

/* Feeds the 'len' bytes at 'data' to nghttp2 (nghttp2_session_mem_recv).
 * Returns 1, or 0 when they broke the session, with what nghttp2 said
 * about it (else the name of its error) in 'why' ('size' bytes). */
int pc_GrpcSession_Recv(pc_GrpcSession *s, const void *data, size_t len, char *why, size_t size);

/* Frees the nghttp2 session (if any), the output buffer and the block of
 * 'size' bytes 's' starts (pc_GrpcSession_New). */
void pc_GrpcSession_Free(pc_GrpcSession *s, size_t size);

/* A data provider for nghttp2_submit_request / _response: the body is
 * read through the role's 'body' with the stream's user data (a stream
 * without one fails with NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE). */
nghttp2_data_provider pc_GrpcSession_Body(void);

/* Once the last output is all written and unless the session is dead:
 * gathers what nghttp2 has to send (nghttp2_session_mem_send), at most
 * about 64 KB. Returns 0 when the session failed or memory ran out: it is
 * dead then, with the reason in 'why' ('size' bytes, NUL-terminated); 1
 * otherwise (also when there is nothing). */
int pc_GrpcSession_Fill(pc_GrpcSession *s, char *why, size_t size);

/* As pc_GrpcSession_Fill, also while output is left unwritten: what
 * nghttp2 has to send is appended to it (up to about 64 KB in all), so one
 * write carries the frames of every call started since the last. A
 * pointer pc_GrpcSession_Output gave before no longer holds (the buffer
 * may move). */
int pc_GrpcSession_FillMore(pc_GrpcSession *s, char *why, size_t size);

/* How long a session rests, in seconds, before the pages frames were
 * written into go back (pc_GrpcSession_Rest): a connection that carries
 * one large call after another pays no system call and no page faults per
 * call. */
#define PC_GRPC_REST_DELAY 1.0

/* An engine calls it (from its Output, which the drivers call every
 * round) while its streams are all closed. Frees the output buffer when
 * all of it was written, and gives the rest pages ('rest_lo' to
 * 'rest_hi': the start block's dead span, the frame buffer and the stream
 * map's table between nghttp2's live parts, else the frame buffer's whole
 * pages) back to the system (madvise MADV_DONTNEED) when the last Fill
 * found nothing more to send (nghttp2 rewrites the frame buffer before it
 * reads it again, so nothing in it is live then; a page holding a byte of
 * the map's table that is not zero stays) and frames were written into
 * them since they last went back: at once the first time (the pages the
 * allocator handed out may have been used before), else once the session
 * has rested 'rest_delay' seconds without sending. An idle connection so
 * keeps about 6 KB of what nghttp2 allocated when the session was made
 * (nghttp2 1.52; about 13 KB as blocks of their own with the frame
 * buffer's pages given back, 25 KB without). The allocator still counts
 * the whole block. Memory from the allocator is taken to read back as
 * zeros once given back (private anonymous memory, as malloc's) or as it
 * was (shared memory). */
void pc_GrpcSession_Rest(pc_GrpcSession *s);

/* How many of the pages that go back at rest ('rest_lo' to 'rest_hi')
 * are resident (mincore), or (size_t)-1 when the system cannot tell. For
 * tests. */
size_t pc_GrpcSession_RestResident(const pc_GrpcSession *s);

/* The output not yet written: '*data' and the count of bytes. */
size_t pc_GrpcSession_Output(const pc_GrpcSession *s, const char **data);

/* 'n' bytes of the output were written (at most what is left counts). */
void pc_GrpcSession_Wrote(pc_GrpcSession *s, size_t n);

/* Bytes of output not yet written. */
size_t pc_GrpcSession_Unsent(const pc_GrpcSession *s);

/* -- headers ------------------------------------------------------------- */

/* Metadata pairs whose bytes live in an arena. */
typedef struct {
  pc_GrpcPair *items;
  size_t count, cap;
} pc_GrpcPairs;

/* Appends key 'k' ('kn' bytes) and value 'v' ('vn' bytes) to 'ps', both
 * copied into 'a' and NUL-terminated (the array doubles from 8 pairs).
 * With 'decode_bin' the value of a "-bin" key is base64-decoded (kept as
 * it came when it is not base64). Returns 0 when the arena fails. */
int pc_GrpcPairs_Add(pc_GrpcPairs *ps, pc_Arena *a, const char *k, size_t kn, const char *v,
                     size_t vn, int decode_bin);

/* nghttp2's name-value pair for 'k' ('kn' bytes) and 'v' ('vn' bytes),
 * no flags: nghttp2 copies both when the headers are submitted. */
nghttp2_nv pc_Grpc_Nv(const char *k, size_t kn, const char *v, size_t vn);

/* A pair of a literal name and a NUL-terminated value. */
#define PC_GRPC_NV(k, v) pc_Grpc_Nv((k), sizeof(k) - 1, (v), strlen(v))

/* Appends the 'count' pairs at 'items' to the header array 'h' at '*n'
 * (advanced), the value of a "-bin" key in unpadded base64 written into
 * 'a'. Returns 0 when the arena fails. */
int pc_Grpc_PushPairs(const pc_GrpcPair *items, size_t count, pc_Arena *a, nghttp2_nv *h,
                      size_t *n);

/* The most a session sends as one header block, as nghttp2 estimates the
 * encoded size (pc_Grpc_NvBound): nghttp2's default, set explicitly
 * (nghttp2_option_set_max_send_header_block_length); a larger block is
 * never sent (NGHTTP2_ERR_FRAME_SIZE_ERROR). */
#define PC_GRPC_MAX_SEND_HEADER_BLOCK ((size_t)64 * 1024)

/* The size of the 'n' header fields at 'h' as SETTINGS_MAX_HEADER_LIST_SIZE
 * counts it (RFC 9113 6.5.2: each field's name, value and 32 bytes). */
size_t pc_Grpc_NvListSize(const nghttp2_nv *h, size_t n);

/* The encoded size nghttp2 reserves for a HEADERS frame of the 'n' fields
 * at 'h' before it sends one (nghttp2_hd_deflate_bound, plus the 5 bytes
 * of a priority field), which PC_GRPC_MAX_SEND_HEADER_BLOCK bounds. */
size_t pc_Grpc_NvBound(const nghttp2_nv *h, size_t n);

/* -- received messages --------------------------------------------------- */

/* A stream's received body: bytes below 'rpos' were read, whole messages
 * (their prefixes checked) lie below 'scan'. */
typedef struct {
  pc_GrpcBuf buf;
  size_t rpos, scan;
  size_t unconsumed; /* bytes received, not yet given back to flow control */
  char *dbuf;        /* the last decompressed message, of 'dcap' bytes */
  size_t dcap;
} pc_GrpcInbox;

/* What reading a message found wrong. */
typedef enum {
  kPc_GrpcRead_Ok = 0,
  kPc_GrpcRead_BadFlags,   /* a flags byte other than 0 and 1 */
  kPc_GrpcRead_Compressed, /* the compressed flag where gzip is not in use */
  kPc_GrpcRead_TooLarge,   /* a length over the limit */
  kPc_GrpcRead_NotGzip,    /* a compressed body that is not one gzip stream */
  kPc_GrpcRead_Inflated,   /* ...that decompresses to more than the limit */
  kPc_GrpcRead_NoMemory    /* memory ran out decompressing */
} pc_GrpcRead;

/* Appends the 'len' received bytes at 'data' (counted as unconsumed
 * first; an all-read buffer is emptied). Returns 0 when memory runs out
 * (nothing appended). */
int pc_GrpcInbox_Append(pc_GrpcInbox *b, const pc_GrpcMem *m, const uint8_t *data, size_t len);

/* Checks each length prefix after 'scan' and its flags as soon as its 5
 * bytes are here, before the body, and moves 'scan' past each message
 * whose body is here too; '*whole' counts them. A message may be
 * compressed (flag 1) only when 'gzip' and is at most 'max' bytes long.
 * Returns kPc_GrpcRead_Ok once it waits for more bytes, else what stopped
 * it (BadFlags, Compressed or TooLarge) at the prefix at 'scan'. */
pc_GrpcRead pc_GrpcInbox_Scan(pc_GrpcInbox *b, size_t max, int gzip, int *whole);

/* Whether a whole message is waiting (rpos < scan). */
int pc_GrpcInbox_Ready(const pc_GrpcInbox *b);

/* Takes the next whole message (there must be one): its bytes in
 * '*data' and '*len', gunzipped into 'dbuf' (at most 'max' bytes) when
 * its compressed flag is set ('*compressed'); valid until the next call
 * or pc_GrpcInbox_Drop. Returns kPc_GrpcRead_Ok, or NotGzip, Inflated or
 * NoMemory (the message is passed over all the same). */
pc_GrpcRead pc_GrpcInbox_Take(pc_GrpcInbox *b, const pc_GrpcMem *m, size_t max, const char **data,
                              size_t *len, int *compressed);

/* Forgets the bytes read (below 'rpos'), moving the rest to the front. */
void pc_GrpcInbox_Drop(pc_GrpcInbox *b);

/* Empties the body (a failed stream reads nothing more). */
void pc_GrpcInbox_Clear(pc_GrpcInbox *b);

/* Bytes after the last whole message (a message still arriving). */
size_t pc_GrpcInbox_Partial(const pc_GrpcInbox *b);

/* The status and the message ('text' of 'size' bytes) of the failure 'r'
 * (not Ok nor Compressed, whose words depend on the role) that Scan
 * stopped at (BadFlags, TooLarge: the prefix at 'scan' is read, so call
 * before pc_GrpcInbox_Clear) or Take returned: 'what' names the messages
 * ("response", "request"), 'limit' the limit ("the receive limit") of
 * 'max' bytes: "request message of 10 bytes exceeds the limit of 4 bytes". */
pc_Code pc_GrpcInbox_Failure(const pc_GrpcInbox *b, pc_GrpcRead r, size_t max, const char *what,
                             const char *limit, char *text, size_t size);

/* Gives back to the stream's flow control (nghttp2_session_consume) what
 * is not held in whole unread messages: the part of a message still
 * arriving is always given (the reader needs all of it), whole messages
 * as they are read; with 'keep' 0 (a stream nobody reads) everything.
 * 'session' NULL: the stream is closed or detached (nothing to give). */
void pc_GrpcInbox_Release(pc_GrpcInbox *b, nghttp2_session *session, int32_t id, int keep);

/* The length of the message still arriving, its 5-byte prefix included,
 * once that prefix is here (0 before). */
size_t pc_GrpcInbox_Expected(const pc_GrpcInbox *b);

/* The stream closed: what it still held counts no more against the
 * connection's window (nghttp2_session_consume_connection). */
void pc_GrpcInbox_Closed(pc_GrpcInbox *b, nghttp2_session *session);

/* A stream freed before nghttp2 closed it: gives its held bytes back to
 * the connection as pc_GrpcInbox_Closed does and clears its stream user
 * data, so callbacks of stream 'id' find no stream. */
void pc_GrpcInbox_Detach(pc_GrpcInbox *b, nghttp2_session *session, int32_t id);

/* Frees the decompression buffer (the message taken last goes with it). */
void pc_GrpcInbox_FreeMessage(pc_GrpcInbox *b, const pc_GrpcMem *m);

/* Frees the body and the decompression buffer. */
void pc_GrpcInbox_Free(pc_GrpcInbox *b, const pc_GrpcMem *m);

/* -- messages to send ---------------------------------------------------- */

/* A stream's framed messages to send, handed to nghttp2 from 'pos'. */
typedef struct {
  pc_GrpcBuf buf;
  size_t pos;
  int deferred; /* the data source waits for messages (NGHTTP2_ERR_DEFERRED) */
} pc_GrpcOutbox;

/* Appends 'msg' ('len' bytes) as one length-prefixed message, gzipped
 * when 'gzip' (pc_Grpc_FrameMessage; an all-sent buffer is emptied
 * first). Returns 0 when memory runs out or it is too large. */
int pc_GrpcOutbox_Frame(pc_GrpcOutbox *o, const pc_GrpcMem *m, const void *msg, size_t len,
                        int gzip);

/* Bytes framed and not yet handed to nghttp2. */
size_t pc_GrpcOutbox_Unsent(const pc_GrpcOutbox *o);

/* A data source's read (see pc_GrpcBodyFn): copies up to 'length' unsent
 * bytes into 'buf' and returns the count (the buffer is emptied once all
 * is handed out). With none left: 0 with NGHTTP2_DATA_FLAG_EOF added to
 * '*data_flags' when 'last' (no more messages come), else
 * NGHTTP2_ERR_DEFERRED until pc_GrpcOutbox_Resume. */
ssize_t pc_GrpcOutbox_Pull(pc_GrpcOutbox *o, uint8_t *buf, size_t length, int last,
                           uint32_t *data_flags);

/* Wakes a waiting data source of stream 'id' (nghttp2_session_resume_data)
 * once there is more to send or its end; 'session' NULL: the stream is
 * closed or detached. */
void pc_GrpcOutbox_Resume(pc_GrpcOutbox *o, nghttp2_session *session, int32_t id);

/* Drops what was not handed out (a failed call sends no more messages). */
void pc_GrpcOutbox_Clear(pc_GrpcOutbox *o);

/* Frees the buffer. */
void pc_GrpcOutbox_Free(pc_GrpcOutbox *o, const pc_GrpcMem *m);

/* -- text ---------------------------------------------------------------- */

/* Marks a printf-like function: argument 'f' is the format, the arguments
 * to format start at 'a'. */
#if defined(__GNUC__)
#define PC_GRPC_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define PC_GRPC_PRINTF(f, a)
#endif

/* vsnprintf into 'text' ('size' > 0 bytes): returns the length written,
 * cut to fit (an encoding error writes nothing). */
size_t pc_Grpc_VFormat(char *text, size_t size, const char *fmt, va_list ap);

#endif
