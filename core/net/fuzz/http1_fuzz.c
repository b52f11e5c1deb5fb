/* libFuzzer target for the HTTP/1.1 parser and writers (net/http1.h).
 *
 * The first input byte picks options (bit 1: the responses answer HEAD
 * requests; bit 2: small limits, so they are reached) and seeds the
 * splits; the rest is a byte stream fed to a request parser and to a
 * response parser, each twice: whole, and in random pieces of 1 to 64
 * bytes, the caller's unconsumed bytes handed back in a fresh allocation
 * each time (a pointer kept across calls is a use after free). Both runs
 * must give the same events (a hash of heads, body bytes, trailers, ends,
 * errors and their offsets); consumed counts and every slice must lie in
 * the bytes given; the parser must make progress and, once the input has
 * ended, never ask for more. Each head parsed whole is written again with
 * pc_Http1_WriteHead (its framing fields left out) and parsed back: the
 * same method, target or status, and fields. Anything else aborts, which
 * is what libFuzzer reports. */
#include "net/http1.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SLOTS 16

static void mix(uint64_t *h, const void *p, size_t n) {
  const unsigned char *s = p;
  for (size_t i = 0; i < n; i++) *h = (*h ^ s[i]) * 1099511628211u;
}

static void mix_u64(uint64_t *h, uint64_t v) {
  mix(h, &v, sizeof v);
}

static void inside(const char *p, size_t n, const char *buf, size_t len) {
  if (n > 0 && (p == NULL || p < buf || p + n > buf + len)) abort();
}

static void mix_fields(uint64_t *h, const pc_Http1Header *f, size_t n, const char *buf,
                       size_t len) {
  if (n > SLOTS) abort();
  mix_u64(h, n);
  for (size_t i = 0; i < n; i++) {
    inside(f[i].name, f[i].name_len, buf, len);
    inside(f[i].value, f[i].value_len, buf, len);
    if (f[i].name_len == 0) abort();
    mix(h, f[i].name, f[i].name_len);
    mix_u64(h, f[i].name_len);
    mix(h, f[i].value, f[i].value_len);
    mix_u64(h, f[i].value_len);
  }
}

static int ieq(const pc_Http1Header *f, const char *lit) {
  size_t n = strlen(lit);
  if (f->name_len != n) return 0;
  for (size_t i = 0; i < n; i++) {
    char c = f->name[i];
    if (c >= 'A' && c <= 'Z') c = (char)(c + 32);
    if (c != lit[i]) return 0;
  }
  return 1;
}

static char *dup_n(const char *s, size_t n) {
  char *d = malloc(n + 1);
  if (d == NULL) abort();
  memcpy(d, s, n);
  d[n] = '\0';
  return d;
}

/* Writes 'h' again (no framing fields, no body) and parses it back. */
static void round_trip(pc_Http1Role role, const pc_Http1Head *h) {
  pc_Http1Header kept[SLOTS];
  size_t n = 0, hosts = 0;
  for (size_t i = 0; i < h->nfields; i++) {
    const pc_Http1Header *f = &h->fields[i];
    if (ieq(f, "content-length") || ieq(f, "transfer-encoding") || ieq(f, "connection")) continue;
    hosts += ieq(f, "host");
    kept[n++] = *f;
  }
  if (role == kPc_Http1_Requests && hosts != 1) return; /* the writer needs one Host */
  char *method = role == kPc_Http1_Requests ? dup_n(h->method, h->method_len) : NULL;
  char *target = role == kPc_Http1_Requests ? dup_n(h->target, h->target_len) : NULL;
  pc_Http1Out o = {method, target, h->status, kept, n, kPc_Http1Body_None, 0, 0};
  size_t need = pc_Http1_WriteHead(NULL, 0, &o, NULL);
  if (need == 0) abort(); /* a head the parser took is one the writer takes */
  char *buf = malloc(need);
  if (buf == NULL || pc_Http1_WriteHead(buf, need, &o, NULL) != need) abort();
  pc_Http1Options big = {need, need, 0, 0, 0};
  pc_Http1Header slots[SLOTS];
  pc_Http1Parser p;
  pc_Http1Parser_Init(&p, role, &big, slots, SLOTS);
  pc_Http1Event ev;
  size_t used = pc_Http1Parser_Parse(&p, buf, need, &ev);
  int informational = role == kPc_Http1_Responses && h->status < 200;
  if (ev.type != (informational ? kPc_Http1Event_Informational : kPc_Http1Event_Head) ||
      used != need)
    abort();
  const pc_Http1Head *g = ev.head;
  if (g->nfields != n || g->minor != 1) abort();
  if (role == kPc_Http1_Requests &&
      (g->method_len != h->method_len || memcmp(g->method, h->method, h->method_len) != 0 ||
       g->target_len != h->target_len || memcmp(g->target, h->target, h->target_len) != 0))
    abort();
  if (role == kPc_Http1_Responses && g->status != h->status) abort();
  for (size_t i = 0; i < n; i++) {
    if (g->fields[i].name_len != kept[i].name_len || g->fields[i].value_len != kept[i].value_len ||
        memcmp(g->fields[i].name, kept[i].name, kept[i].name_len) != 0 ||
        memcmp(g->fields[i].value, kept[i].value, kept[i].value_len) != 0)
      abort();
  }
  free(buf);
  free(method);
  free(target);
}

/* The events of one parse of msg[0..len), hashed; 'seed' 0: whole, else
 * pieces drawn from it. */
static uint64_t run(pc_Http1Role role, int head, const pc_Http1Options *o, const uint8_t *msg,
                    size_t len, uint32_t seed) {
  pc_Http1Header slots[SLOTS];
  pc_Http1Parser p;
  pc_Http1Parser_Init(&p, role, o, slots, SLOTS);
  if (head) pc_Http1Parser_ExpectHead(&p);
  uint64_t h = 1469598103934665603u;
  char *held = malloc(1);
  size_t nheld = 0, pos = 0;
  if (held == NULL) abort();
  for (;;) {
    size_t piece = len - pos;
    if (seed != 0 && piece > 0) {
      seed = seed * 1103515245u + 12345u;
      size_t most = piece < 64 ? piece : 64;
      piece = 1 + (seed >> 16) % most;
    }
    char *buf = malloc(nheld + piece + 1);
    if (buf == NULL) abort();
    memcpy(buf, held, nheld);
    if (piece > 0) memcpy(buf + nheld, msg + pos, piece);
    free(held);
    held = buf;
    nheld += piece;
    pos += piece;
    if (pos == len) pc_Http1Parser_Eof(&p);
    for (int guard = 0;; guard++) {
      if (guard > 1000000) abort(); /* no progress */
      pc_Http1Event ev;
      size_t n = pc_Http1Parser_Parse(&p, held, nheld, &ev);
      if (n > nheld) abort();
      switch (ev.type) {
      case kPc_Http1Event_Head:
      case kPc_Http1Event_Informational:
        if (ev.head == NULL) abort();
        mix_u64(&h, (uint64_t)ev.type);
        mix_u64(&h, (uint64_t)ev.head->status);
        mix_u64(&h, (uint64_t)ev.head->minor);
        mix_u64(&h, (uint64_t)ev.head->body);
        mix_u64(&h, (uint64_t)ev.head->content_length);
        mix_u64(&h, (uint64_t)ev.head->keep_alive);
        mix_u64(&h, (uint64_t)ev.head->expect_continue);
        inside(ev.head->method, ev.head->method_len, held, nheld);
        inside(ev.head->target, ev.head->target_len, held, nheld);
        inside(ev.head->reason, ev.head->reason_len, held, nheld);
        mix(&h, ev.head->method, ev.head->method_len);
        mix(&h, ev.head->target, ev.head->target_len);
        mix(&h, ev.head->reason, ev.head->reason_len);
        mix_fields(&h, ev.head->fields, ev.head->nfields, held, nheld);
        if (seed == 0) round_trip(role, ev.head);
        break;
      case kPc_Http1Event_Body:
        if (ev.len == 0) abort();
        inside(ev.data, ev.len, held, nheld);
        mix(&h, ev.data, ev.len); /* the bytes only: pieces must not show */
        break;
      case kPc_Http1Event_Trailers:
        if (ev.nfields == 0) abort();
        mix_u64(&h, 3);
        mix_fields(&h, ev.fields, ev.nfields, held, nheld);
        break;
      case kPc_Http1Event_End:
      case kPc_Http1Event_Closed: mix_u64(&h, (uint64_t)ev.type); break;
      case kPc_Http1Event_Error:
        if (n != 0 || pc_Http1Parser_Error(&p, NULL) != ev.status) abort();
        mix_u64(&h, (uint64_t)ev.status);
        mix_u64(&h, ev.offset);
        break;
      default: break;
      }
      char *rest = malloc(nheld - n + 1);
      if (rest == NULL) abort();
      memcpy(rest, held + n, nheld - n);
      free(held);
      held = rest;
      nheld -= n;
      if (ev.type == kPc_Http1Event_NeedMore) {
        if (pos == len) abort(); /* the input ended: nothing more will come */
        break;
      }
      if (ev.type == kPc_Http1Event_Paused) {
        if (!pc_Http1Parser_Next(&p)) mix_u64(&h, 99);
        if (head) pc_Http1Parser_ExpectHead(&p);
      }
      if (ev.type == kPc_Http1Event_Closed || ev.type == kPc_Http1Event_Error) {
        free(held);
        return h;
      }
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  uint8_t flags = data[0];
  pc_Http1Options o;
  memset(&o, 0, sizeof o);
  if (flags & 4) {
    o.max_start_line = 64;
    o.max_head = 256;
    o.max_chunk_line = 16;
    o.max_trailers = 64;
    o.max_content_length = 300;
  }
  uint32_t seed = ((uint32_t)flags << 8 | (uint32_t)size) | 1u;
  for (int role = 0; role < 2; role++) {
    pc_Http1Role r = role ? kPc_Http1_Responses : kPc_Http1_Requests;
    uint64_t whole = run(r, flags & 2, &o, data + 1, size - 1, 0);
    uint64_t split = run(r, flags & 2, &o, data + 1, size - 1, seed);
    if (whole != split) abort();
  }
  return 0;
}
