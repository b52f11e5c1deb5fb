/* The HTTP/1.1 parser and writers (http1.h): every rule of the header
 * comment, each message parsed whole, one byte at a time and in two pieces
 * at every split point (the same events and the same error offset each
 * way), pipelining and the pause at a message boundary, the limits at and
 * one past their bound, and the writers' output parsed back.
 *
 * The driver keeps what the parser leaves unconsumed and hands it back
 * with the next piece, each time in a fresh allocation, so a pointer kept
 * across calls would be a use after free (the ASan build).
 *
 * With the argument "diff" this program is instead the differential test
 * against python3-h11 (ctest net.http1_diff): spec/tools/http1_diff.py
 * generates a seeded corpus, this parses each case (whole and in random
 * pieces, which must agree), the tool compares with h11. */
#include "net/http1.h"
#include "testing/check.h"
#include "testing/corpus.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* -- recording events ---------------------------------------------------- */

/* What a parse gave, as text: one line per event, body bytes merged (how
 * the input was split must not show). 'json': the differential's form, a
 * JSON array of events with every byte string in hex. */
typedef struct {
  int json;
  char *s;
  size_t n, cap;
  char *body;
  size_t nbody, capbody;
} Rec;

static void grow(char **s, size_t *cap, size_t need) {
  if (need <= *cap) return;
  size_t c = *cap ? *cap : 256;
  while (c < need) c *= 2;
  char *t = realloc(*s, c);
  if (t == NULL) abort();
  *s = t;
  *cap = c;
}

static void add(Rec *r, const char *s, size_t n) {
  grow(&r->s, &r->cap, r->n + n + 1);
  memcpy(r->s + r->n, s, n);
  r->n += n;
  r->s[r->n] = '\0';
}

static void addf(Rec *r, const char *fmt, unsigned long long v) {
  char tmp[64];
  int n = snprintf(tmp, sizeof tmp, fmt, v);
  add(r, tmp, (size_t)n);
}

static void add_str(Rec *r, const char *s) {
  add(r, s, strlen(s));
}

/* Bytes: escaped text (\xHH outside printable ASCII, and for '\\', '[',
 * ']'), or a hex JSON string. */
static void add_bytes(Rec *r, const char *s, size_t n) {
  static const char hex[] = "0123456789abcdef";
  if (r->json) add(r, "\"", 1);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (r->json) {
      char h[2] = {hex[c >> 4], hex[c & 15]};
      add(r, h, 2);
    } else if (c < 0x20 || c >= 0x7f || c == '\\' || c == '[' || c == ']') {
      char h[4] = {'\\', 'x', hex[c >> 4], hex[c & 15]};
      add(r, h, 4);
    } else {
      add(r, (const char *)&c, 1);
    }
  }
  if (r->json) add(r, "\"", 1);
}

static void begin(Rec *r, const char *name) {
  if (r->json) {
    add_str(r, r->n > 1 ? ",[\"" : "[\"");
    add_str(r, name);
    add_str(r, "\"");
  } else {
    if (r->n > 0) add_str(r, "\n");
    add_str(r, name);
  }
}

static void end_event(Rec *r) {
  if (r->json) add_str(r, "]");
}

static void sep(Rec *r) {
  add_str(r, r->json ? "," : " ");
}

static void flush_body(Rec *r) {
  if (r->nbody == 0) return;
  begin(r, "body");
  sep(r);
  add_bytes(r, r->body, r->nbody);
  end_event(r);
  r->nbody = 0;
}

static void add_fields(Rec *r, const pc_Http1Header *f, size_t n) {
  if (r->json) add_str(r, ",[");
  for (size_t i = 0; i < n; i++) {
    if (r->json) {
      add_str(r, i ? ",[" : "[");
      add_bytes(r, f[i].name, f[i].name_len);
      add_str(r, ",");
      add_bytes(r, f[i].value, f[i].value_len);
      add_str(r, "]");
    } else {
      add_str(r, " [");
      add_bytes(r, f[i].name, f[i].name_len);
      add_str(r, ": ");
      add_bytes(r, f[i].value, f[i].value_len);
      add_str(r, "]");
    }
  }
  if (r->json) add_str(r, "]");
}

static const char *const kBodies[] = {"none", "length", "chunked", "close"};

static void add_head(Rec *r, const char *name, const pc_Http1Head *h, pc_Http1Role role) {
  begin(r, name);
  sep(r);
  if (role == kPc_Http1_Requests) {
    add_bytes(r, h->method, h->method_len);
    sep(r);
    add_bytes(r, h->target, h->target_len);
  } else {
    addf(r, "%llu", (unsigned long long)h->status);
    sep(r);
    add_bytes(r, h->reason, h->reason_len);
  }
  sep(r);
  addf(r, r->json ? "\"1.%llu\"" : "1.%llu", (unsigned long long)h->minor);
  add_fields(r, h->fields, h->nfields);
  if (name[0] == 'h') { /* not for a 1xx */
    sep(r);
    if (r->json) add_str(r, "\"");
    add_str(r, kBodies[h->body]);
    if (r->json) {
      add_str(r, "\",");
      if (h->body == kPc_Http1Body_Length)
        addf(r, "%llu", (unsigned long long)h->content_length);
      else
        add_str(r, "-1");
    } else if (h->body == kPc_Http1Body_Length) {
      addf(r, " %llu", (unsigned long long)h->content_length);
    }
    add_str(r, r->json ? "," : " ka=");
    addf(r, "%llu", (unsigned long long)h->keep_alive);
    if (!r->json && h->expect_continue) add_str(r, " expect");
  }
  end_event(r);
}

/* -- the driver ---------------------------------------------------------- */

typedef struct {
  pc_Http1Role role;
  const pc_Http1Options *opts;
  size_t slots; /* field slots; 0: 32 */
  int head;     /* responses answer HEAD requests */
} Setup;

/* Records 'ev' (given for the 'n' bytes at 'buf'); checks that its slices
 * lie within them. */
static void record(Rec *r, const Setup *s, const pc_Http1Event *ev, const char *buf, size_t n) {
  switch (ev->type) {
  case kPc_Http1Event_Body:
    CHECK(ev->len > 0 && ev->data >= buf && ev->data + ev->len <= buf + n);
    grow(&r->body, &r->capbody, r->nbody + ev->len);
    memcpy(r->body + r->nbody, ev->data, ev->len);
    r->nbody += ev->len;
    return;
  case kPc_Http1Event_NeedMore:
  case kPc_Http1Event_Paused: return;
  default: break;
  }
  flush_body(r);
  switch (ev->type) {
  case kPc_Http1Event_Head:
  case kPc_Http1Event_Informational:
    CHECK(ev->head != NULL);
    if (ev->head == NULL) return;
    for (size_t i = 0; i < ev->head->nfields; i++) {
      const pc_Http1Header *f = &ev->head->fields[i];
      CHECK(f->name >= buf && f->value + f->value_len <= buf + n);
    }
    add_head(r, ev->type == kPc_Http1Event_Head ? "head" : "info", ev->head, s->role);
    break;
  case kPc_Http1Event_Trailers:
    CHECK(ev->nfields > 0);
    begin(r, "trailers");
    add_fields(r, ev->fields, ev->nfields);
    end_event(r);
    break;
  case kPc_Http1Event_End:
    begin(r, "end");
    end_event(r);
    break;
  case kPc_Http1Event_Closed:
    begin(r, "closed");
    end_event(r);
    break;
  case kPc_Http1Event_Error:
    begin(r, "error");
    sep(r);
    if (r->json) add_str(r, "\"");
    add_str(r, pc_Http1Status_String(ev->status));
    if (r->json) {
      add_str(r, "\",\"");
      add_str(r, ev->reason);
      add_str(r, "\"");
    } else {
      add_str(r, " \"");
      add_str(r, ev->reason);
      add_str(r, "\"");
    }
    add_str(r, r->json ? "," : " @");
    addf(r, "%llu", (unsigned long long)ev->offset);
    end_event(r);
    break;
  default: break;
  }
}

/* Parses what the caller holds until the parser needs more bytes (1) or
 * is done (0: closed or an error). Consumed bytes are dropped and the rest
 * moved to a fresh allocation after every event. */
static int pump(pc_Http1Parser *p, const Setup *s, char **held, size_t *nheld, Rec *r) {
  for (int guard = 0; guard < 1000000; guard++) {
    pc_Http1Event ev;
    size_t n = pc_Http1Parser_Parse(p, *held, *nheld, &ev);
    CHECK(n <= *nheld);
    if (n > *nheld) return 0;
    record(r, s, &ev, *held, *nheld);
    char *rest = malloc(*nheld - n + 1);
    if (rest == NULL) abort();
    memcpy(rest, *held + n, *nheld - n);
    free(*held);
    *held = rest;
    *nheld -= n;
    switch (ev.type) {
    case kPc_Http1Event_NeedMore: return 1;
    case kPc_Http1Event_Paused:
      if (!pc_Http1Parser_Next(p)) {
        begin(r, "close");
        end_event(r);
      }
      if (s->head) pc_Http1Parser_ExpectHead(p);
      break;
    case kPc_Http1Event_Closed:
    case kPc_Http1Event_Error: return 0;
    default: break;
    }
  }
  CHECK(!"the parser makes no progress");
  return 0;
}

/* Feeds msg[0..len) in the pieces the increasing split points 'cuts' make,
 * then the end of the input; the events go to 'r'. */
static void drive(const Setup *s, const char *msg, size_t len, const size_t *cuts, size_t ncuts,
                  Rec *r) {
  size_t nslots = s->slots ? s->slots : 32;
  pc_Http1Header *slots = malloc(nslots * sizeof *slots);
  if (slots == NULL) abort();
  pc_Http1Parser p;
  pc_Http1Parser_Init(&p, s->role, s->opts, slots, nslots);
  if (s->head) pc_Http1Parser_ExpectHead(&p);
  char *held = malloc(1);
  size_t nheld = 0;
  if (r->json) add_str(r, "[");
  for (size_t k = 0; k <= ncuts; k++) {
    size_t a = k == 0 ? 0 : cuts[k - 1], b = k == ncuts ? len : cuts[k];
    char *buf = malloc(nheld + (b - a) + 1);
    if (buf == NULL || held == NULL) abort();
    memcpy(buf, held, nheld);
    memcpy(buf + nheld, msg + a, b - a);
    free(held);
    held = buf;
    nheld += b - a;
    if (k == ncuts) pc_Http1Parser_Eof(&p);
    if (!pump(&p, s, &held, &nheld, r)) break;
    CHECK(k < ncuts); /* after the end of the input: closed or an error */
  }
  flush_body(r);
  if (r->json) add_str(r, "]");
  free(held);
  free(slots);
}

static void rec_free(Rec *r) {
  free(r->s);
  free(r->body);
  memset(r, 0, sizeof *r);
}

/* -- checking ------------------------------------------------------------ */

static int same(const Rec *r, const char *want, const char *msg, const char *how) {
  const char *got = r->s != NULL ? r->s : "";
  if (strcmp(got, want) == 0) return 1;
  fprintf(stderr, "message %s\n(%s)\nwant:\n%s\ngot:\n%s\n\n", msg, how, want, got);
  return 0;
}

/* 'msg' gives the events 'want' parsed whole, one byte at a time, and in
 * two pieces split at every point. */
static int expect_with(const Setup *s, const char *msg, size_t len, const char *want) {
  Rec r = {0};
  drive(s, msg, len, NULL, 0, &r);
  int ok = same(&r, want, msg, "whole");
  rec_free(&r);
  if (!ok) return 0;
  size_t *cuts = malloc((len + 1) * sizeof *cuts);
  if (cuts == NULL) abort();
  for (size_t i = 1; i < len; i++) cuts[i - 1] = i;
  drive(s, msg, len, cuts, len > 0 ? len - 1 : 0, &r);
  ok = same(&r, want, msg, "byte by byte");
  rec_free(&r);
  for (size_t i = 1; ok && i < len; i++) {
    drive(s, msg, len, &i, 1, &r);
    char how[64];
    snprintf(how, sizeof how, "split at %zu", i);
    ok = same(&r, want, msg, how);
    rec_free(&r);
  }
  free(cuts);
  return ok;
}

static int req(const char *msg, const char *want) {
  Setup s = {kPc_Http1_Requests, NULL, 0, 0};
  return expect_with(&s, msg, strlen(msg), want);
}

static int resp(const char *msg, const char *want) {
  Setup s = {kPc_Http1_Responses, NULL, 0, 0};
  return expect_with(&s, msg, strlen(msg), want);
}

/* A request with its head's fields 'fields' ("Host: a\r\n" is added). */
static int req_fields(const char *fields, const char *want) {
  char msg[1024];
  snprintf(msg, sizeof msg, "GET / HTTP/1.1\r\nHost: a\r\n%s\r\n", fields);
  return req(msg, want);
}

/* A chunked POST ("Host: a") and the events of its head. */
static const char kTe[] = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
static const char kTeHead[] =
    "head POST / 1.1 [Host: a] [Transfer-Encoding: chunked] chunked ka=1\n";

/* The chunked POST with 'chunks' for its body gives its head, then 'want'. */
static int chunked_with(const Setup *s, const char *chunks, const char *want) {
  char msg[512], w[512];
  snprintf(msg, sizeof msg, "%s%s", kTe, chunks);
  snprintf(w, sizeof w, "%s%s", kTeHead, want);
  return expect_with(s, msg, strlen(msg), w);
}

static int chunked(const char *chunks, const char *want) {
  Setup s = {kPc_Http1_Requests, NULL, 0, 0};
  return chunked_with(&s, chunks, want);
}

/* What a single-byte field value gives. */
static int value_byte(unsigned char c, int ok) {
  char msg[64];
  int n = snprintf(msg, sizeof msg, "GET / HTTP/1.1\r\nHost: a\r\nX: a%cb\r\n\r\n", c);
  Setup s = {kPc_Http1_Requests, NULL, 0, 0};
  Rec r = {0};
  drive(&s, msg, (size_t)n, NULL, 0, &r);
  const char *want = ok ? "head" : "error BadField";
  int good = strncmp(r.s, want, strlen(want)) == 0;
  if (!good) fprintf(stderr, "value byte 0x%02x: %s\n", c, r.s);
  rec_free(&r);
  return good;
}

/* -- the rules ----------------------------------------------------------- */

static void requests(void) {
  CHECK(
      req("GET / HTTP/1.1\r\nHost: a\r\n\r\n", "head GET / 1.1 [Host: a] none ka=1\nend\nclosed"));
  CHECK(req("POST /p?q=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello",
            "head POST /p?q=1 1.1 [Host: a] [Content-Length: 5] length 5 ka=1\nbody hello\nend\n"
            "closed"));
  CHECK(req("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n",
            "head POST / 1.1 [Host: a] [Content-Length: 0] length 0 ka=1\nend\nclosed"));
  /* chunked, extensions tolerated, trailers delivered */
  CHECK(req("POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
            "5;ext=1\r\nhello\r\n6 ; a=\"b c\"\t;x\r\n world\r\n000\r\nX-T: 1\r\nY:2 \r\n\r\n",
            "head POST /x 1.1 [Host: a] [Transfer-Encoding: chunked] chunked ka=1\n"
            "body hello world\ntrailers [X-T: 1] [Y: 2]\nend\nclosed"));
  CHECK(req("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: CHUNKED\r\n\r\n"
            "A\r\n0123456789\r\n0\r\n\r\n",
            "head POST / 1.1 [Host: a] [Transfer-Encoding: CHUNKED] chunked ka=1\n"
            "body 0123456789\nend\nclosed"));
  /* HTTP/1.0: no Host needed, never kept alive; keep-alive is not honoured */
  CHECK(req("GET / HTTP/1.0\r\n\r\n", "head GET / 1.0 none ka=0\nend\nclose\nclosed"));
  CHECK(req("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
            "head GET / 1.0 [Connection: keep-alive] none ka=0\nend\nclose\nclosed"));
  CHECK(req_fields("Connection: close\r\n",
                   "head GET / 1.1 [Host: a] [Connection: close] none ka=0\nend\nclose\nclosed"));
  CHECK(req_fields("Connection: Upgrade ,CLOSE\r\n",
                   "head GET / 1.1 [Host: a] [Connection: Upgrade ,CLOSE] none ka=0\nend\nclose\n"
                   "closed"));
  CHECK(req_fields("Connection: closed\r\n",
                   "head GET / 1.1 [Host: a] [Connection: closed] none ka=1\nend\nclosed"));
  CHECK(
      req_fields("Expect: 100-continue\r\n",
                 "head GET / 1.1 [Host: a] [Expect: 100-continue] none ka=1 expect\nend\nclosed"));
  /* whitespace around values goes; inside, it stays; empty values; obs-text */
  CHECK(req_fields("X: \t a  b\t \r\nE:\r\nF:   \r\nU: \xc3\xa9\r\n",
                   "head GET / 1.1 [Host: a] [X: a  b] [E: ] [F: ] [U: \\xc3\\xa9] none ka=1\n"
                   "end\nclosed"));
  /* methods are tokens, targets any VCHAR */
  CHECK(req("M-SEARCH * HTTP/1.1\r\nHost: a\r\n\r\n",
            "head M-SEARCH * 1.1 [Host: a] none ka=1\nend\nclosed"));
  CHECK(req("GET http://x/~a!$&'()*+,;=:@[] HTTP/1.1\r\nHost: x\r\n\r\n",
            "head GET http://x/~a!$&'()*+,;=:@\\x5b\\x5d 1.1 [Host: x] none ka=1\nend\nclosed"));
  /* empty lines before a request are skipped (RFC 9112 2.2) */
  CHECK(req("\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
            "head GET / 1.1 [Host: a] none ka=1\nend\nclosed"));
  CHECK(req("", "closed"));
  CHECK(req("\r\n", "closed"));
  CHECK(req("\r", "error Truncated \"closed inside a head\" @1"));
}

static void pipelining(void) {
  CHECK(req("GET /1 HTTP/1.1\r\nHost: a\r\n\r\n"
            "POST /2 HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc"
            "POST /3 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nz\r\n0\r\n\r\n"
            "\r\nGET /4 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
            "head GET /1 1.1 [Host: a] none ka=1\nend\n"
            "head POST /2 1.1 [Host: a] [Content-Length: 3] length 3 ka=1\nbody abc\nend\n"
            "head POST /3 1.1 [Host: a] [Transfer-Encoding: chunked] chunked ka=1\nbody z\nend\n"
            "head GET /4 1.1 [Host: a] [Connection: close] none ka=0\nend\nclose\nclosed"));
  /* nothing after a message that closes the connection */
  CHECK(req("GET / HTTP/1.0\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
            "head GET / 1.0 none ka=0\nend\nclose\n"
            "error AfterClose \"bytes after the last message\" @18"));
  /* The pause: at the end of a message the parser consumes nothing until
   * pc_Http1Parser_Next, however many bytes follow. */
  const char two[] = "GET /a HTTP/1.1\r\nHost: a\r\n\r\nGET /b HTTP/1.1\r\nHost: a\r\n\r\n";
  pc_Http1Header f[4];
  pc_Http1Parser p;
  pc_Http1Parser_Init(&p, kPc_Http1_Requests, NULL, f, 4);
  pc_Http1Event ev;
  size_t n = pc_Http1Parser_Parse(&p, two, sizeof two - 1, &ev);
  CHECK(ev.type == kPc_Http1Event_Head && n == 28 && ev.head->target_len == 2);
  size_t m = pc_Http1Parser_Parse(&p, two + n, sizeof two - 1 - n, &ev);
  CHECK(ev.type == kPc_Http1Event_End && m == 0);
  for (int i = 0; i < 3; i++) {
    m = pc_Http1Parser_Parse(&p, two + n, sizeof two - 1 - n, &ev);
    CHECK(ev.type == kPc_Http1Event_Paused && m == 0);
  }
  CHECK(pc_Http1Parser_Next(&p) == 1);
  m = pc_Http1Parser_Parse(&p, two + n, sizeof two - 1 - n, &ev);
  CHECK(ev.type == kPc_Http1Event_Head && m == 28 && memcmp(ev.head->target, "/b", 2) == 0);
  /* leaving a message unfinished is only for closing */
  pc_Http1Parser_Init(&p, kPc_Http1_Requests, NULL, f, 4);
  CHECK(pc_Http1Parser_Next(&p) == 1);
  const char post[] = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 9\r\n\r\nabc";
  n = pc_Http1Parser_Parse(&p, post, sizeof post - 1, &ev);
  CHECK(ev.type == kPc_Http1Event_Head);
  CHECK(pc_Http1Parser_Next(&p) == 0);
  m = pc_Http1Parser_Parse(&p, post + n, sizeof post - 1 - n, &ev);
  CHECK(ev.type == kPc_Http1Event_Error && ev.status == kPc_Http1Status_AfterClose);
  /* a head begun and then abandoned */
  pc_Http1Parser_Init(&p, kPc_Http1_Requests, NULL, f, 4);
  n = pc_Http1Parser_Parse(&p, "GET / HT", 8, &ev);
  CHECK(ev.type == kPc_Http1Event_NeedMore && n == 0);
  CHECK(pc_Http1Parser_Next(&p) == 0);
  /* trailers take the field slots, not the head's count */
  pc_Http1Parser_Init(&p, kPc_Http1_Requests, NULL, f, 4);
  const char tr[] =
      "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nT: 1\r\n\r\n";
  n = pc_Http1Parser_Parse(&p, tr, sizeof tr - 1, &ev);
  const pc_Http1Head *head = ev.head;
  CHECK(ev.type == kPc_Http1Event_Head && head->nfields == 2);
  m = pc_Http1Parser_Parse(&p, tr + n, sizeof tr - 1 - n, &ev);
  CHECK(ev.type == kPc_Http1Event_Trailers && ev.nfields == 1 && m == sizeof tr - 1 - n);
  CHECK(head->nfields == 2 && head->body == kPc_Http1Body_Chunked);
  /* after a 1xx the final response is still due */
  pc_Http1Parser_Init(&p, kPc_Http1_Responses, NULL, f, 4);
  n = pc_Http1Parser_Parse(&p, "HTTP/1.1 100 Continue\r\n\r\n", 25, &ev);
  CHECK(ev.type == kPc_Http1Event_Informational && n == 25 && ev.head->status == 100);
  CHECK(pc_Http1Parser_Next(&p) == 0);
  /* no bytes at all */
  pc_Http1Parser_Init(&p, kPc_Http1_Requests, NULL, f, 4);
  CHECK(pc_Http1Parser_Parse(&p, NULL, 0, &ev) == 0 && ev.type == kPc_Http1Event_NeedMore);
}

static void line_ends(void) {
  /* a bare LF anywhere is an error: start line, field line, blank line,
   * chunk size line, after chunk data, in the trailers */
  CHECK(req("GET / HTTP/1.1\nHost: a\r\n\r\n", "error BadLineEnd \"bare LF\" @14"));
  CHECK(req("GET / HTTP/1.1\r\nHost: a\n\r\n", "error BadLineEnd \"bare LF\" @23"));
  CHECK(req("GET / HTTP/1.1\r\nHost: a\r\n\n", "error BadLineEnd \"bare LF\" @25"));
  CHECK(req("\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", "error BadLineEnd \"bare LF\" @0"));
  CHECK(req("\r\n\nGET / HTTP/1.1\r\n", "error BadLineEnd \"bare LF\" @2"));
  CHECK(chunked("3\nabc\r\n0\r\n\r\n", "error BadLineEnd \"bare LF\" @57"));
  CHECK(chunked("3\r\nabc\n0\r\n\r\n", "body abc\nerror BadLineEnd \"bare LF\" @62"));
  CHECK(chunked("3\r\nabc\r\n0\n\r\n", "body abc\nerror BadLineEnd \"bare LF\" @65"));
  CHECK(chunked("3\r\nabc\r\n0\r\nT: 1\n\r\n", "body abc\nerror BadLineEnd \"bare LF\" @71"));
  CHECK(chunked("3\r\nabc\r\n0\r\n\n", "body abc\nerror BadLineEnd \"bare LF\" @67"));
  /* bare CR */
  CHECK(req("GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n", "error BadLineEnd \"bare CR\" @23"));
  CHECK(req("GET / HTTP/1.1\r\r\nHost: a\r\n\r\n", "error BadLineEnd \"bare CR\" @14"));
  CHECK(req("\rGET / HTTP/1.1\r\n", "error BadLineEnd \"bare CR\" @0"));
  CHECK(chunked("3\r\nabc\rx", "body abc\nerror BadLineEnd \"bare CR\" @62"));
  CHECK(
      chunked("3\r\nabcd\r\n", "body abc\nerror BadChunk \"chunk data longer than its size\" @62"));
  CHECK(chunked("3;a\rb\r\nabc\r\n", "error BadLineEnd \"bare CR\" @59"));
}

static void fields(void) {
  CHECK(req_fields(" X: 1\r\n", "error ObsFold \"line folding (obs-fold)\" @25"));
  CHECK(req_fields("X: 1\r\n  2\r\n", "error ObsFold \"line folding (obs-fold)\" @31"));
  CHECK(req_fields("X: 1\r\n\t2\r\n", "error ObsFold \"line folding (obs-fold)\" @31"));
  CHECK(req_fields("X : 1\r\n", "error BadField \"whitespace before the colon\" @26"));
  CHECK(req_fields("X\t: 1\r\n", "error BadField \"whitespace before the colon\" @26"));
  CHECK(req_fields(": 1\r\n", "error BadField \"empty field name\" @25"));
  CHECK(req_fields("X\r\n", "error BadField \"field line without a colon\" @26"));
  CHECK(req_fields("X Y: 1\r\n", "error BadField \"whitespace before the colon\" @26"));
  CHECK(req_fields("X@Y: 1\r\n", "error BadField \"field name not a token\" @26"));
  CHECK(req_fields("X\"Y: 1\r\n", "error BadField \"field name not a token\" @26"));
  /* every byte value in a field value: VCHAR, obs-text, SP, HTAB only */
  for (int c = 0; c < 256; c++) {
    if (c == '\r' || c == '\n') continue; /* line ends, above */
    int ok = c == ' ' || c == '\t' || (c > 0x20 && c != 0x7f);
    CHECK(value_byte((unsigned char)c, ok));
  }
  Setup s = {kPc_Http1_Requests, NULL, 0, 0};
  const char nul[] = "GET / HTTP/1.1\r\nHost: a\r\nX: a\0b\r\n\r\n";
  CHECK(expect_with(&s, nul, sizeof nul - 1, "error BadField \"NUL in a field value\" @29"));
  /* Host: one in HTTP/1.1, at most one in HTTP/1.0 */
  CHECK(req("GET / HTTP/1.1\r\n\r\n", "error BadHost \"no Host field\" @0"));
  CHECK(req("GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n",
            "error BadHost \"more than one Host field\" @0"));
  CHECK(req("GET / HTTP/1.0\r\nHost: a\r\nHOST: a\r\n\r\n",
            "error BadHost \"more than one Host field\" @0"));
  CHECK(req("GET / HTTP/1.0\r\nHost: a\r\n\r\n",
            "head GET / 1.0 [Host: a] none ka=0\nend\nclose\nclosed"));
}

static void start_lines(void) {
  CHECK(req("GET / HTTP/1.2\r\nHost: a\r\n\r\n",
            "error BadVersion \"HTTP version other than 1.0 and 1.1\" @6"));
  CHECK(req("GET / HTTP/2.0\r\nHost: a\r\n\r\n",
            "error BadVersion \"HTTP version other than 1.0 and 1.1\" @6"));
  CHECK(
      req("GET / HTTP/0.9\r\n\r\n", "error BadVersion \"HTTP version other than 1.0 and 1.1\" @6"));
  CHECK(req("GET / http/1.1\r\nHost: a\r\n\r\n", "error BadStartLine \"not an HTTP version\" @6"));
  CHECK(req("GET / HTTP/1.1 \r\nHost: a\r\n\r\n", "error BadStartLine \"not an HTTP version\" @6"));
  CHECK(req("GET / HTTP/1.10\r\nHost: a\r\n\r\n", "error BadStartLine \"not an HTTP version\" @6"));
  CHECK(req("GET /\r\n\r\n", "error BadStartLine \"bad request target\" @5"));
  CHECK(req("GET  / HTTP/1.1\r\nHost: a\r\n\r\n", "error BadStartLine \"bad request target\" @4"));
  CHECK(
      req("GET / x HTTP/1.1\r\nHost: a\r\n\r\n", "error BadStartLine \"not an HTTP version\" @6"));
  CHECK(
      req("GET /\x7f HTTP/1.1\r\nHost: a\r\n\r\n", "error BadStartLine \"bad request target\" @5"));
  CHECK(req("GET /\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n",
            "error BadStartLine \"bad request target\" @5"));
  CHECK(req("G(T / HTTP/1.1\r\nHost: a\r\n\r\n", "error BadStartLine \"bad method\" @1"));
  CHECK(req(" GET / HTTP/1.1\r\n", "error BadStartLine \"bad method\" @0"));
  /* a TLS handshake on a plain port fails at its first byte */
  pc_Http1Header f[4];
  pc_Http1Parser p;
  pc_Http1Event ev;
  pc_Http1Parser_Init(&p, kPc_Http1_Requests, NULL, f, 4);
  pc_Http1Parser_Parse(&p, "\x16\x03\x01", 3, &ev);
  CHECK(ev.type == kPc_Http1Event_Error && ev.status == kPc_Http1Status_BadStartLine &&
        ev.offset == 0);
  pc_Error err;
  pc_Error_Init(&err);
  CHECK(pc_Http1Parser_Error(&p, &err) == kPc_Http1Status_BadStartLine);
  CHECK(strcmp(err.msg, "HTTP/1.1 request: bad method at offset 0") == 0);
  /* the error sticks */
  pc_Http1Parser_Parse(&p, "GET", 3, &ev);
  CHECK(ev.type == kPc_Http1Event_Error && ev.status == kPc_Http1Status_BadStartLine);
  CHECK(pc_Http1Parser_Next(&p) == 0);
}

static void framing(void) {
  /* Content-Length: digits; a list or repeated fields of one value */
  CHECK(req("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 3,3\r\ncontent-length: 3\r\n\r\nabc",
            "head POST / 1.1 [Host: a] [Content-Length: 3, 3,3] [content-length: 3] length 3 "
            "ka=1\nbody abc\nend\nclosed"));
  CHECK(req_fields("Content-Length: 3, 4\r\n",
                   "error BadContentLength \"different Content-Length values\" @25"));
  CHECK(req_fields("Content-Length: 3\r\nContent-Length: 4\r\n",
                   "error BadContentLength \"different Content-Length values\" @44"));
  CHECK(req_fields("Content-Length: 3\r\nContent-Length: 03\r\n",
                   "error BadContentLength \"different Content-Length values\" @44"));
  CHECK(
      req_fields("Content-Length: 3,\r\n", "error BadContentLength \"empty Content-Length\" @25"));
  CHECK(req_fields("Content-Length:\r\n", "error BadContentLength \"empty Content-Length\" @25"));
  CHECK(req_fields("Content-Length: +3\r\n",
                   "error BadContentLength \"Content-Length not digits\" @25"));
  CHECK(req_fields("Content-Length: -1\r\n",
                   "error BadContentLength \"Content-Length not digits\" @25"));
  CHECK(req_fields("Content-Length: 0x3\r\n",
                   "error BadContentLength \"Content-Length not digits\" @25"));
  CHECK(req_fields("Content-Length: 3 3\r\n",
                   "error BadContentLength \"Content-Length not digits\" @25"));
  CHECK(req_fields("Content-Length: 9223372036854775808\r\n",
                   "error BadContentLength \"Content-Length overflows\" @25"));
  CHECK(req_fields("Content-Length: 99999999999999999999999\r\n",
                   "error BadContentLength \"Content-Length overflows\" @25"));
  CHECK(req_fields("Content-Length: 67108865\r\n",
                   "error ContentTooLarge \"Content-Length over the limit\" @25"));
  /* Transfer-Encoding: one field, "chunked", never with Content-Length,
   * never in HTTP/1.0 */
  CHECK(req_fields("Transfer-Encoding: gzip\r\n",
                   "error BadTransferEncoding \"transfer coding other than chunked\" @25"));
  CHECK(req_fields("Transfer-Encoding: gzip, chunked\r\n",
                   "error BadTransferEncoding \"transfer coding other than chunked\" @25"));
  CHECK(req_fields("Transfer-Encoding: chunked, chunked\r\n",
                   "error BadTransferEncoding \"transfer coding other than chunked\" @25"));
  CHECK(req_fields("Transfer-Encoding: chunked;q=1\r\n",
                   "error BadTransferEncoding \"transfer coding other than chunked\" @25"));
  CHECK(req_fields("Transfer-Encoding: \"chunked\"\r\n",
                   "error BadTransferEncoding \"transfer coding other than chunked\" @25"));
  CHECK(req_fields("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
                   "error BadTransferEncoding \"more than one Transfer-Encoding field\" @53"));
  CHECK(req_fields("Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n",
                   "error BadTransferEncoding \"more than one Transfer-Encoding field\" @50"));
  CHECK(req_fields("Transfer-Encoding: chunked\r\nContent-Length: 3\r\n",
                   "error AmbiguousLength \"Transfer-Encoding with Content-Length\" @25"));
  CHECK(req_fields("Content-Length: 3\r\nTransfer-Encoding: chunked\r\n",
                   "error AmbiguousLength \"Transfer-Encoding with Content-Length\" @44"));
  CHECK(req("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            "error BadTransferEncoding \"Transfer-Encoding in HTTP/1.0\" @17"));
  /* chunk sizes */
  static const struct {
    const char *chunks, *want;
  } bad[] = {
      {"g\r\n", "error BadChunk \"chunk size not hex\" @56"},
      {"\r\n", "error BadChunk \"chunk size not hex\" @56"},
      {"-1\r\n", "error BadChunk \"chunk size not hex\" @56"},
      {" 1\r\n", "error BadChunk \"chunk size not hex\" @56"},
      {"0x5\r\n", "error BadChunk \"bad byte after the chunk size\" @57"},
      {"1g\r\n", "error BadChunk \"bad byte after the chunk size\" @57"},
      {"5 \r\n", "error BadChunk \"whitespace after the chunk size\" @57"},
      {"5;a\x01\r\n", "error BadChunk \"control byte in a chunk extension\" @59"},
      {"5;a\x7f\r\n", "error BadChunk \"control byte in a chunk extension\" @59"},
      {"4000001\r\n", "error ContentTooLarge \"chunk size over the limit\" @62"},
      {"ffffffffffffffffffff\r\n", "error ContentTooLarge \"chunk size over the limit\" @62"},
      {"3\r\nabc", "body abc\nerror Truncated \"closed inside a chunk\" @62"},
      {"3\r\nab", "body ab\nerror Truncated \"closed inside a body\" @61"},
      {"3\r\nabc\r\n", "body abc\nerror Truncated \"closed inside a chunk size line\" @64"},
      {"3\r\nabc\r\n0\r\n", "body abc\nerror Truncated \"closed inside the trailers\" @67"},
      {"3\r\nabc\r\n0\r\nT: 1\r\n", "body abc\nerror Truncated \"closed inside the trailers\" @73"},
      {"0\r\n T: 1\r\n\r\n", "error ObsFold \"line folding (obs-fold)\" @59"},
      {"0\r\nT : 1\r\n\r\n", "error BadField \"whitespace before the colon\" @60"},
      {"0000000000000000000000000001\r\nz\r\n0\r\n\r\n", "body z\nend\nclosed"},
      {"0;"
       "\t\x80x=\"\xff\"\r\n\r\n",
       "end\nclosed"},
      {"1 ;\r\nz\r\n0\r\n\r\n", "body z\nend\nclosed"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    CHECK(chunked(bad[i].chunks, bad[i].want));
  /* overflow with the largest limit */
  pc_Http1Options o = {0};
  o.max_content_length = UINT64_MAX;
  Setup s = {kPc_Http1_Requests, &o, 0, 0};
  CHECK(chunked_with(&s, "10000000000000000\r\n", "error BadChunk \"chunk size overflows\" @72"));
  CHECK(chunked_with(&s, "7fffffffffffffff\r\n", "error Truncated \"closed inside a body\" @74"));
  /* truncated heads and bodies */
  CHECK(req("GET / HTTP/1.1\r\nHost: a\r\n", "error Truncated \"closed inside a head\" @25"));
  CHECK(req("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nabc",
            "head POST / 1.1 [Host: a] [Content-Length: 5] length 5 ka=1\nbody abc\n"
            "error Truncated \"closed inside a body\" @50"));
}

static void responses(void) {
  CHECK(resp("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi",
             "head 200 OK 1.1 [Content-Length: 2] length 2 ka=1\nbody hi\nend\nclosed"));
  CHECK(resp(
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\ngrpc-status: 0\r\n\r\n",
      "head 200 OK 1.1 [Transfer-Encoding: chunked] chunked ka=1\nbody hi\n"
      "trailers [grpc-status: 0]\nend\nclosed"));
  /* until close: the end of the input ends the body */
  CHECK(resp("HTTP/1.1 200 OK\r\n\r\nall of it",
             "head 200 OK 1.1 close ka=0\nbody all of it\nend\nclose\nclosed"));
  CHECK(resp("HTTP/1.1 200 OK\r\n\r\n", "head 200 OK 1.1 close ka=0\nend\nclose\nclosed"));
  /* no body: 1xx, 204, 304, a HEAD request */
  CHECK(resp("HTTP/1.1 204 No Content\r\nContent-Length: 7\r\n\r\n",
             "head 204 No Content 1.1 [Content-Length: 7] none ka=1\nend\nclosed"));
  CHECK(resp("HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n"
             "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
             "head 304 Not Modified 1.1 [Transfer-Encoding: chunked] none ka=1\nend\n"
             "head 200 OK 1.1 [Content-Length: 0] length 0 ka=1\nend\nclosed"));
  Setup head = {kPc_Http1_Responses, NULL, 0, 1};
  const char *h = "HTTP/1.1 200 OK\r\nContent-Length: 100000000000\r\n\r\nHTTP/1.1 200 OK\r\n\r\n";
  CHECK(expect_with(&head, h, strlen(h),
                    "head 200 OK 1.1 [Content-Length: 100000000000] none ka=1\nend\n"
                    "head 200 OK 1.1 none ka=1\nend\nclosed"));
  CHECK(resp("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s>\r\n\r\n"
             "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx",
             "info 100 Continue 1.1\ninfo 103 Early Hints 1.1 [Link: </s>]\n"
             "head 200 OK 1.1 [Content-Length: 1] length 1 ka=1\nbody x\nend\nclosed"));
  CHECK(resp("HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n",
             "error Unsupported \"101 Switching Protocols\" @0"));
  /* status lines */
  CHECK(resp("HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n",
             "head 200  1.1 [Content-Length: 0] length 0 ka=1\nend\nclosed"));
  CHECK(resp("HTTP/1.1 599 \r\nContent-Length: 0\r\n\r\n",
             "head 599  1.1 [Content-Length: 0] length 0 ka=1\nend\nclosed"));
  CHECK(resp("HTTP/1.1 200 Very\tOK \xff\r\nContent-Length: 0\r\n\r\n",
             "head 200 Very\\x09OK \\xff 1.1 [Content-Length: 0] length 0 ka=1\nend\nclosed"));
  CHECK(resp("HTTP/1.1 200 O\x01K\r\n\r\n",
             "error BadStartLine \"control byte in the reason phrase\" @14"));
  CHECK(resp("HTTP/1.1 20\r\n\r\n", "error BadStartLine \"bad status code\" @8"));
  CHECK(resp("HTTP/1.1 2000\r\n\r\n", "error BadStartLine \"bad status code\" @12"));
  CHECK(resp("HTTP/1.1 2x0 OK\r\n\r\n", "error BadStartLine \"bad status code\" @10"));
  CHECK(resp("HTTP/1.1 099 OK\r\n\r\n", "error BadStartLine \"status code below 100\" @9"));
  CHECK(resp("HTTP/1.1  200 OK\r\n\r\n", "error BadStartLine \"bad status code\" @9"));
  CHECK(resp("HTTP/2 200 OK\r\n\r\n", "error BadStartLine \"not an HTTP version\" @0"));
  CHECK(resp("HTTP/2.0 200 OK\r\n\r\n",
             "error BadVersion \"HTTP version other than 1.0 and 1.1\" @0"));
  CHECK(resp("\r\nHTTP/1.1 200 OK\r\n\r\n", "error BadStartLine \"not an HTTP version\" @0"));
  CHECK(resp("<html>", "error BadStartLine \"not an HTTP version\" @0"));
  CHECK(resp("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx",
             "head 200 OK 1.0 [Content-Length: 1] length 1 ka=0\nbody x\nend\nclose\nclosed"));
  CHECK(resp("HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
             "error BadTransferEncoding \"Transfer-Encoding in HTTP/1.0\" @17"));
  CHECK(resp("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
             "error AmbiguousLength \"Transfer-Encoding with Content-Length\" @36"));
  CHECK(resp("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
             "error BadTransferEncoding \"transfer coding other than chunked\" @17"));
  CHECK(resp("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nxy",
             "head 200 OK 1.1 [Connection: close] [Content-Length: 1] length 1 ka=0\nbody x\nend\n"
             "close\nerror AfterClose \"bytes after the last message\" @58"));
  /* no Host needed in a response; a missing final response is truncated */
  CHECK(resp("HTTP/1.1 100 Continue\r\n\r\n",
             "info 100 Continue 1.1\nerror Truncated \"closed before the final response\" @25"));
}

/* -- limits -------------------------------------------------------------- */

/* 'len' bytes of 'c'. */
static char *fill(char c, size_t len) {
  char *s = malloc(len + 1);
  if (s == NULL) abort();
  memset(s, c, len);
  s[len] = '\0';
  return s;
}

static void limits(void) {
  pc_Http1Options o = {0};
  o.max_start_line = 40;
  o.max_head = 100;
  o.max_chunk_line = 12;
  o.max_trailers = 30;
  o.max_content_length = 10;
  Setup s = {kPc_Http1_Requests, &o, 3, 0};
  char msg[512], want[512];
  /* the start line: 40 bytes pass, 41 do not (also before its CRLF came) */
  char *t = fill('a', 40 - 14);
  snprintf(msg, sizeof msg, "GET /%s HTTP/1.1\r\nHost: a\r\n\r\n", t);
  snprintf(want, sizeof want, "head GET /%s 1.1 [Host: a] none ka=1\nend\nclosed", t);
  CHECK(expect_with(&s, msg, strlen(msg), want));
  snprintf(msg, sizeof msg, "GET /%sb HTTP/1.1\r\nHost: a\r\n\r\n", t);
  CHECK(expect_with(&s, msg, strlen(msg), "error StartLineTooLong \"start line too long\" @40"));
  snprintf(msg, sizeof msg, "GET /%s%s", t, t);
  CHECK(expect_with(&s, msg, strlen(msg), "error StartLineTooLong \"start line too long\" @40"));
  /* (found by the fuzzer: a bare LF past the limit is past the limit) */
  snprintf(msg, sizeof msg, "GET /%sbb HTTP/1.1\nHost: a\r\n\r\n", t);
  CHECK(expect_with(&s, msg, strlen(msg), "error StartLineTooLong \"start line too long\" @40"));
  snprintf(msg, sizeof msg, "GET /%s HTTP/1.\nHost: a\r\n\r\n", t);
  CHECK(expect_with(&s, msg, strlen(msg), "error BadLineEnd \"bare LF\" @39"));
  free(t);
  /* the head: 100 bytes pass, 101 do not */
  const char *base = "GET / HTTP/1.1\r\nHost: a\r\nX: \r\n\r\n"; /* 32 bytes */
  t = fill('v', 100 - 32);
  snprintf(msg, sizeof msg, "GET / HTTP/1.1\r\nHost: a\r\nX: %s\r\n\r\n", t);
  CHECK(strlen(msg) == 100 && strlen(base) == 32);
  snprintf(want, sizeof want, "head GET / 1.1 [Host: a] [X: %s] none ka=1\nend\nclosed", t);
  CHECK(expect_with(&s, msg, strlen(msg), want));
  snprintf(msg, sizeof msg, "GET / HTTP/1.1\r\nHost: a\r\nX: %sv\r\n\r\n", t);
  CHECK(expect_with(&s, msg, strlen(msg), "error HeadTooLarge \"head too large\" @100"));
  free(t);
  /* fields: as many as slots (3) */
  CHECK(expect_with(&s, "GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\n\r\n", 39,
                    "head GET / 1.1 [Host: a] [A: 1] [B: 2] none ka=1\nend\nclosed"));
  CHECK(expect_with(&s, "GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", 45,
                    "error TooManyFields \"too many fields\" @37"));
  /* Content-Length: 10 passes, 11 does not */
  const char *cl10 = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n0123456789";
  CHECK(expect_with(&s, cl10, strlen(cl10),
                    "head POST / 1.1 [Host: a] [Content-Length: 10] length 10 ka=1\n"
                    "body 0123456789\nend\nclosed"));
  const char *cl11 = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\n";
  CHECK(expect_with(&s, cl11, strlen(cl11),
                    "error ContentTooLarge \"Content-Length over the limit\" @26"));
  /* chunks: a size up to 10, a size line up to 12 bytes */
  CHECK(
      chunked_with(&s, "a;xxxxxxxxxx\r\n0123456789\r\n0\r\n\r\n", "body 0123456789\nend\nclosed"));
  CHECK(chunked_with(&s, "b\r\n", "error ContentTooLarge \"chunk size over the limit\" @56"));
  CHECK(chunked_with(&s, "a;xxxxxxxxxxx\r\n0123456789\r\n0\r\n\r\n",
                     "error BadChunk \"chunk size line too long\" @68"));
  /* trailers: 30 bytes pass (with the blank line), 31 do not; 3 fields */
  CHECK(chunked_with(&s, "0\r\nA: 1\r\nB: 2\r\nC: 01234567890\r\n\r\n",
                     "trailers [A: 1] [B: 2] [C: 01234567890]\nend\nclosed"));
  CHECK(chunked_with(&s, "0\r\nA: 1\r\nB: 2\r\nC: 012345678901\r\n\r\n",
                     "error HeadTooLarge \"trailer section too large\" @89"));
  CHECK(chunked_with(&s, "0\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n",
                     "error TooManyFields \"too many fields\" @77"));
  /* the defaults: a 16 KiB head, an 8 KiB start line, byte by byte (the
   * scan resumes where it stopped, so this is quick) */
  Setup d = {kPc_Http1_Requests, NULL, 0, 0};
  t = fill('v', PC_HTTP1_DEFAULT_MAX_HEAD - 32);
  char *big = malloc(PC_HTTP1_DEFAULT_MAX_HEAD + 64);
  snprintf(big, PC_HTTP1_DEFAULT_MAX_HEAD + 64, "GET / HTTP/1.1\r\nHost: a\r\nX: %s\r\n\r\n", t);
  CHECK(strlen(big) == PC_HTTP1_DEFAULT_MAX_HEAD);
  size_t *cuts = malloc(PC_HTTP1_DEFAULT_MAX_HEAD * sizeof *cuts);
  for (size_t i = 1; i < PC_HTTP1_DEFAULT_MAX_HEAD; i++) cuts[i - 1] = i;
  Rec r = {0};
  drive(&d, big, strlen(big), cuts, PC_HTTP1_DEFAULT_MAX_HEAD - 1, &r);
  CHECK(strncmp(r.s, "head GET / 1.1 [Host: a] [X: vvv", 32) == 0 &&
        strstr(r.s, "none ka=1\nend\nclosed") != NULL);
  rec_free(&r);
  snprintf(big, PC_HTTP1_DEFAULT_MAX_HEAD + 64, "GET / HTTP/1.1\r\nHost: a\r\nX: %sv\r\n\r\n", t);
  drive(&d, big, strlen(big), NULL, 0, &r);
  CHECK(strcmp(r.s, "error HeadTooLarge \"head too large\" @16384") == 0);
  rec_free(&r);
  free(t);
  t = fill('a', PC_HTTP1_DEFAULT_MAX_START_LINE);
  snprintf(big, PC_HTTP1_DEFAULT_MAX_HEAD + 64, "GET /%s", t);
  drive(&d, big, strlen(big), cuts, PC_HTTP1_DEFAULT_MAX_START_LINE, &r);
  CHECK(strcmp(r.s, "error StartLineTooLong \"start line too long\" @8192") == 0);
  rec_free(&r);
  free(t);
  free(cuts);
  free(big);
}

/* -- writers ------------------------------------------------------------- */

static int wrote(const pc_Http1Out *h, const char *want) {
  char buf[512];
  pc_Error err;
  pc_Error_Init(&err);
  size_t n = pc_Http1_WriteHead(buf, sizeof buf, h, &err);
  if (n == strlen(want) && memcmp(buf, want, n) == 0 && pc_Http1_WriteHead(NULL, 0, h, NULL) == n)
    return 1;
  fprintf(stderr, "wrote %zu: %.*s (%s)\nwant: %s\n", n, (int)n, buf, err.msg, want);
  return 0;
}

static int refused(const pc_Http1Out *h, const char *want) {
  char buf[512];
  pc_Error err;
  pc_Error_Init(&err);
  size_t n = pc_Http1_WriteHead(buf, sizeof buf, h, &err);
  if (n == 0 && strcmp(err.msg, want) == 0) return 1;
  fprintf(stderr, "refused? %zu: %s\nwant: %s\n", n, err.msg, want);
  return 0;
}

static void writers(void) {
  pc_Http1Header f[] = {{"Content-Type", 12, "application/json", 16}, {"X-Empty", 7, "", 0}};
  pc_Http1Out h = {NULL, NULL, 200, f, 2, kPc_Http1Body_Length, 42, 0};
  CHECK(wrote(&h, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Empty: \r\n"
                  "Content-Length: 42\r\n\r\n"));
  h.body = kPc_Http1Body_Chunked;
  h.close = 1;
  h.nfields = 0;
  CHECK(wrote(&h, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"));
  h.body = kPc_Http1Body_Close;
  h.close = 0;
  h.status = 299;
  CHECK(wrote(&h, "HTTP/1.1 299 \r\nConnection: close\r\n\r\n"));
  h.body = kPc_Http1Body_None;
  h.status = 204;
  CHECK(wrote(&h, "HTTP/1.1 204 No Content\r\n\r\n"));
  h.status = 304;
  h.body = kPc_Http1Body_Length;
  h.content_length = 5;
  CHECK(wrote(&h, "HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n"));
  h.status = 100;
  h.body = kPc_Http1Body_None;
  CHECK(wrote(&h, "HTTP/1.1 100 Continue\r\n\r\n"));
  h.body = kPc_Http1Body_Length;
  CHECK(refused(&h, "HTTP/1.1 response: status 100 takes no body"));
  h.status = 204;
  CHECK(refused(&h, "HTTP/1.1 response: status 204 takes no body"));
  h.status = 304;
  h.body = kPc_Http1Body_Chunked;
  CHECK(refused(&h, "HTTP/1.1 response: status 304 takes no body"));
  h.status = 99;
  CHECK(refused(&h, "HTTP/1.1 response: status 99 out of range"));
  /* requests */
  pc_Http1Header rf[] = {{"Host", 4, "example.com:443", 15}, {"TE", 2, "trailers", 8}};
  pc_Http1Out q = {"POST", "/pkg.S/M", 0, rf, 2, kPc_Http1Body_Chunked, 0, 0};
  CHECK(wrote(&q, "POST /pkg.S/M HTTP/1.1\r\nHost: example.com:443\r\nTE: trailers\r\n"
                  "Transfer-Encoding: chunked\r\n\r\n"));
  q.body = kPc_Http1Body_Length;
  q.content_length = 0;
  q.close = 1;
  CHECK(wrote(&q, "POST /pkg.S/M HTTP/1.1\r\nHost: example.com:443\r\nTE: trailers\r\n"
                  "Content-Length: 0\r\nConnection: close\r\n\r\n"));
  q.body = kPc_Http1Body_Close;
  CHECK(refused(&q, "HTTP/1.1 request: a request body cannot end with the connection"));
  q.body = kPc_Http1Body_None;
  q.nfields = 1;
  q.fields = rf + 1;
  CHECK(refused(&q, "HTTP/1.1 request: 0 Host fields (one needed)"));
  q.fields = rf;
  q.method = "GE T";
  CHECK(refused(&q, "HTTP/1.1 request: method is not a token"));
  q.method = "GET";
  q.target = "/a b";
  CHECK(refused(&q, "HTTP/1.1 request: target empty or not VCHAR"));
  q.target = "";
  CHECK(refused(&q, "HTTP/1.1 request: target empty or not VCHAR"));
  q.target = "/";
  /* fields the writer refuses: injection, framing */
  static const struct {
    pc_Http1Header f;
    const char *want;
  } bad[] = {
      {{"X", 1, "a\r\nEvil: 1", 11},
       "HTTP/1.1 request: field \"X\": value has a control byte or surrounding whitespace"},
      {{"X", 1, "a\nb", 3},
       "HTTP/1.1 request: field \"X\": value has a control byte or surrounding whitespace"},
      {{"X", 1, "a\0b", 3},
       "HTTP/1.1 request: field \"X\": value has a control byte or surrounding whitespace"},
      {{"X", 1, " a", 2},
       "HTTP/1.1 request: field \"X\": value has a control byte or surrounding whitespace"},
      {{"X", 1, "a\t", 2},
       "HTTP/1.1 request: field \"X\": value has a control byte or surrounding whitespace"},
      {{"X Y", 3, "a", 1}, "HTTP/1.1 request: field name \"X Y\" is not a token"},
      {{"X:", 2, "a", 1}, "HTTP/1.1 request: field name \"X:\" is not a token"},
      {{"", 0, "a", 1}, "HTTP/1.1 request: empty field name"},
      {{"Content-Length", 14, "1", 1},
       "HTTP/1.1 request: field \"Content-Length\" is set by the framing, not by a field"},
      {{"transfer-encoding", 17, "chunked", 7},
       "HTTP/1.1 request: field \"transfer-encoding\" is set by the framing, not by a field"},
      {{"Connection", 10, "close", 5},
       "HTTP/1.1 request: field \"Connection\" is set by the framing, not by a field"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    pc_Http1Header two[2] = {rf[0], bad[i].f};
    q.fields = two;
    q.nfields = 2;
    CHECK(refused(&q, bad[i].want));
  }
  q.fields = rf;
  q.nfields = 2;
  /* too small a buffer: the size, nothing written */
  char small[8] = "-------";
  CHECK(pc_Http1_WriteHead(small, sizeof small, &q, NULL) == 74 && small[0] == '-');
  /* chunks */
  char ch[PC_HTTP1_CHUNK_HEAD_MAX];
  CHECK(pc_Http1_ChunkHead(ch, 0x1f) == 4 && memcmp(ch, "1f\r\n", 4) == 0);
  CHECK(pc_Http1_ChunkHead(ch, UINT64_MAX) == 18 && memcmp(ch, "ffffffffffffffff\r\n", 18) == 0);
  char buf[64];
  CHECK(pc_Http1_WriteChunk(buf, sizeof buf, "hello", 5) == 10 &&
        memcmp(buf, "5\r\nhello\r\n", 10) == 0);
  CHECK(pc_Http1_WriteChunk(buf, sizeof buf, "", 0) == 0);
  CHECK(pc_Http1_WriteChunk(small, 4, "hello", 5) == 10 && small[0] == '-');
  pc_Http1Header tr[] = {{"grpc-status", 11, "0", 1}, {"grpc-message", 12, "a b", 3}};
  pc_Error err;
  pc_Error_Init(&err);
  CHECK(pc_Http1_WriteLastChunk(buf, sizeof buf, tr, 2, &err) == 40 &&
        memcmp(buf, "0\r\ngrpc-status: 0\r\ngrpc-message: a b\r\n\r\n", 40) == 0);
  CHECK(pc_Http1_WriteLastChunk(buf, sizeof buf, NULL, 0, &err) == 5 &&
        memcmp(buf, "0\r\n\r\n", 5) == 0);
  CHECK(pc_Http1_WriteLastChunk(small, 4, NULL, 0, &err) == 5 && small[0] == '-');
  pc_Http1Header host = {"Host", 4, "a", 1};
  CHECK(pc_Http1_WriteLastChunk(buf, sizeof buf, &host, 1, &err) == 0 &&
        strcmp(err.msg, "HTTP/1.1 trailer: field \"Host\" is set by the framing, not by a field") ==
            0);
}

/* What the writers write, the parser reads back. */
static void round_trip(void) {
  char msg[1024];
  pc_Http1Header rf[] = {{"Host", 4, "h", 1}, {"X-A", 3, "1 2", 3}};
  pc_Http1Out q = {"POST", "/s/m", 0, rf, 2, kPc_Http1Body_Chunked, 0, 0};
  size_t n = pc_Http1_WriteHead(msg, sizeof msg, &q, NULL);
  n += pc_Http1_WriteChunk(msg + n, sizeof msg - n, "abc", 3);
  char big[300];
  memset(big, 'z', sizeof big);
  n += pc_Http1_WriteChunk(msg + n, sizeof msg - n, big, sizeof big);
  pc_Http1Header tr[] = {{"grpc-status", 11, "0", 1}};
  n += pc_Http1_WriteLastChunk(msg + n, sizeof msg - n, tr, 1, NULL);
  Setup s = {kPc_Http1_Requests, NULL, 0, 0};
  Rec r = {0};
  drive(&s, msg, n, NULL, 0, &r);
  CHECK(strncmp(r.s,
                "head POST /s/m 1.1 [Host: h] [X-A: 1 2] [Transfer-Encoding: chunked] chunked "
                "ka=1\nbody abczzz",
                85) == 0);
  CHECK(strstr(r.s, "zzz\ntrailers [grpc-status: 0]\nend\nclosed") != NULL);
  rec_free(&r);
  pc_Http1Out h = {NULL, NULL, 404, rf + 1, 1, kPc_Http1Body_Length, 2, 1};
  n = pc_Http1_WriteHead(msg, sizeof msg, &h, NULL);
  memcpy(msg + n, "no", 2);
  Setup c = {kPc_Http1_Responses, NULL, 0, 0};
  CHECK(expect_with(&c, msg, n + 2,
                    "head 404 Not Found 1.1 [X-A: 1 2] [Content-Length: 2] [Connection: close] "
                    "length 2 ka=0\nbody no\nend\nclose\nclosed"));
}

static void statuses(void) {
  CHECK(strcmp(pc_Http1Status_String(kPc_Http1Status_Ok), "Ok") == 0);
  CHECK(strcmp(pc_Http1Status_String(kPc_Http1Status_AfterClose), "AfterClose") == 0);
  CHECK(strcmp(pc_Http1Status_String((pc_Http1Status)99), "?") == 0);
  CHECK(pc_Http1Status_HttpCode(kPc_Http1Status_BadField) == 400);
  CHECK(pc_Http1Status_HttpCode(kPc_Http1Status_HeadTooLarge) == 431);
  CHECK(pc_Http1Status_HttpCode(kPc_Http1Status_TooManyFields) == 431);
  CHECK(pc_Http1Status_HttpCode(kPc_Http1Status_StartLineTooLong) == 414);
  CHECK(pc_Http1Status_HttpCode(kPc_Http1Status_ContentTooLarge) == 413);
  CHECK(pc_Http1Status_HttpCode(kPc_Http1Status_BadVersion) == 505);
  CHECK(pc_Http1Status_HttpCode(kPc_Http1Status_BadTransferEncoding) == 501);
  pc_Http1Parser p;
  pc_Http1Parser_Init(&p, kPc_Http1_Responses, NULL, NULL, 0);
  pc_Error err;
  pc_Error_Init(&err);
  CHECK(pc_Http1Parser_Error(&p, &err) == kPc_Http1Status_Ok && !err.set);
  /* no field slots: a head with a field is too many */
  pc_Http1Event ev;
  pc_Http1Parser_Parse(&p, "HTTP/1.1 200 OK\r\nA: 1\r\n\r\n", 26, &ev);
  CHECK(ev.type == kPc_Http1Event_Error && ev.status == kPc_Http1Status_TooManyFields);
  CHECK(pc_Http1Parser_Error(&p, &err) == kPc_Http1Status_TooManyFields);
  CHECK(strcmp(err.msg, "HTTP/1.1 response: too many fields at offset 17") == 0);
}

/* -- the differential (argument "diff") ---------------------------------- */

#define TOOL PC_SOURCE_DIR "/spec/tools/http1_diff.py"

static size_t unhex(const char *h, size_t n, char *out) {
  for (size_t i = 0; i < n / 2; i++) {
    unsigned v;
    if (sscanf(h + 2 * i, "%2x", &v) != 1) return 0;
    out[i] = (char)v;
  }
  return n / 2;
}

/* A case line: "id<TAB>role<TAB>head<TAB>hex". Each case is parsed whole
 * and in pieces at split points drawn from its id; both must give the same
 * events, written as "id<TAB>json". */
static int diff(void) {
  if (access("/usr/bin/python3", X_OK) != 0) return corpus_missing("/usr/bin/python3");
  if (system("/usr/bin/python3 -c 'import h11' 2>/dev/null") != 0)
    return corpus_missing("python3-h11 (Debian package python3-h11)");
  const char *seed = getenv("PC_DIFF_SEED") ? getenv("PC_DIFF_SEED") : "11";
  char cmd[1024];
  printf("seed %s\n", seed);
  fflush(stdout);
  snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s gen http1_diff_cases.tsv --seed %s --count 4000",
           TOOL, seed);
  if (system(cmd) != 0) {
    fprintf(stderr, "the generator failed\n");
    return 1;
  }
  size_t size;
  char *text = slurp("http1_diff_cases.tsv", &size);
  FILE *o = fopen("http1_diff_protocall.tsv", "w");
  CHECK(text != NULL && o != NULL);
  if (text == NULL || o == NULL) return CHECK_DONE();
  char *bytes = malloc(size / 2 + 1);
  int count = 0;
  for (char *line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
    char *id = line, *role = strchr(id, '\t');
    char *head = role ? strchr(role + 1, '\t') : NULL;
    char *hex = head ? strchr(head + 1, '\t') : NULL;
    CHECK(hex != NULL);
    if (hex == NULL) continue;
    *role++ = *head++ = *hex++ = '\0';
    size_t n = unhex(hex, strlen(hex), bytes);
    Setup s = {role[0] == 'q' ? kPc_Http1_Requests : kPc_Http1_Responses, NULL, 64, head[0] == '1'};
    Rec whole = {0}, split = {0};
    whole.json = split.json = 1;
    drive(&s, bytes, n, NULL, 0, &whole);
    unsigned long x = strtoul(id, NULL, 10) * 2654435761u + 1;
    size_t cuts[8], ncuts = 0;
    for (size_t k = 0; k < 8 && n > 1; k++) {
      x = x * 6364136223846793005u + 1442695040888963407u;
      size_t c = 1 + (size_t)(x >> 33) % (n - 1);
      if (ncuts == 0 || c > cuts[ncuts - 1]) cuts[ncuts++] = c;
    }
    drive(&s, bytes, n, cuts, ncuts, &split);
    if (strcmp(whole.s, split.s) != 0) {
      fprintf(stderr, "case %s: split differently, parsed differently:\n%s\n%s\n", id, whole.s,
              split.s);
      CHECK(0);
    }
    fprintf(o, "%s\t%s\n", id, whole.s);
    rec_free(&whole);
    rec_free(&split);
    count++;
  }
  fclose(o);
  free(bytes);
  free(text);
  printf("%d cases parsed\n", count);
  CHECK(count >= 1000);
  snprintf(cmd, sizeof cmd,
           "/usr/bin/python3 %s check http1_diff_cases.tsv http1_diff_protocall.tsv", TOOL);
  fflush(stdout);
  CHECK(system(cmd) == 0);
  return CHECK_DONE();
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "diff") == 0) return diff();
  requests();
  pipelining();
  line_ends();
  fields();
  start_lines();
  framing();
  responses();
  limits();
  writers();
  round_trip();
  statuses();
  return CHECK_DONE();
}
