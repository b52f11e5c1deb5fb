/* HTTP/1.1 messages, sans-I/O: the parser's state machine, the line
 * checks and the framing decision (RFC 9112 6.3), the writers. See
 * http1.h for the rules and the contract with the caller. */
#include "net/http1.h"

#include <stdio.h>
#include <string.h>

enum {
  S_HEAD,       /* a head: start line and fields (p->scan, p->seek) */
  S_LENGTH,     /* Content-Length body, p->remaining bytes left */
  S_CLOSE,      /* body until the connection closes */
  S_CHUNK_LINE, /* a chunk size line (p->seek) */
  S_CHUNK_DATA, /* chunk data, p->remaining bytes left */
  S_CHUNK_CR,   /* the CRLF after chunk data */
  S_CHUNK_LF,
  S_TRAILERS, /* the trailer section (p->scan, p->seek) */
  S_END,      /* End is the next event */
  S_PAUSED,   /* End given; waiting for pc_Http1Parser_Next */
  S_CLOSED,   /* no message may follow */
  S_ERROR
};

/* -- bytes --------------------------------------------------------------- */

/* tchar of RFC 9110 5.6.2. */
static int is_tchar(unsigned char c) {
  switch (c) {
  case '!':
  case '#':
  case '$':
  case '%':
  case '&':
  case '\'':
  case '*':
  case '+':
  case '-':
  case '.':
  case '^':
  case '_':
  case '`':
  case '|':
  case '~': return 1;
  default: return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  }
}

/* VCHAR or obs-text: what a field value, a reason phrase or a chunk
 * extension may hold besides SP and HTAB. */
static int is_vchar(unsigned char c) {
  return c > 0x20 && c != 0x7f;
}

static int is_ws(unsigned char c) {
  return c == ' ' || c == '\t';
}

static int hex_value(unsigned char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Whether s[0..n) equals the lower-case 'lit', ignoring ASCII case. */
static int ieq(const char *s, size_t n, const char *lit) {
  size_t i = 0;
  for (; i < n && lit[i] != '\0'; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c >= 'A' && c <= 'Z') c = (unsigned char)(c + 32);
    if (c != (unsigned char)lit[i]) return 0;
  }
  return i == n && lit[i] == '\0';
}

/* Whether the comma-separated list s[0..n) has 'lit' (lower case) as an
 * element, ignoring case and the whitespace around elements. */
static int list_has(const char *s, size_t n, const char *lit) {
  size_t i = 0;
  while (i <= n) {
    size_t j = i;
    while (j < n && s[j] != ',') j++;
    size_t a = i, b = j;
    while (a < b && is_ws((unsigned char)s[a])) a++;
    while (b > a && is_ws((unsigned char)s[b - 1])) b--;
    if (ieq(s + a, b - a, lit)) return 1;
    i = j + 1;
  }
  return 0;
}

/* -- errors -------------------------------------------------------------- */

static const char *const kStatusNames[] = {"Ok",
                                           "BadStartLine",
                                           "BadVersion",
                                           "BadLineEnd",
                                           "BadField",
                                           "ObsFold",
                                           "StartLineTooLong",
                                           "HeadTooLarge",
                                           "TooManyFields",
                                           "BadHost",
                                           "BadContentLength",
                                           "ContentTooLarge",
                                           "BadTransferEncoding",
                                           "AmbiguousLength",
                                           "BadChunk",
                                           "Truncated",
                                           "Unsupported",
                                           "AfterClose"};

const char *pc_Http1Status_String(pc_Http1Status s) {
  size_t i = (size_t)s;
  return i < sizeof kStatusNames / sizeof kStatusNames[0] ? kStatusNames[i] : "?";
}

int pc_Http1Status_HttpCode(pc_Http1Status s) {
  switch (s) {
  case kPc_Http1Status_Ok: return 200;
  case kPc_Http1Status_StartLineTooLong: return 414;
  case kPc_Http1Status_HeadTooLarge:
  case kPc_Http1Status_TooManyFields: return 431;
  case kPc_Http1Status_ContentTooLarge: return 413;
  case kPc_Http1Status_BadVersion: return 505;
  case kPc_Http1Status_BadTransferEncoding: return 501;
  default: return 400;
  }
}

/* Records the error at byte 'at' of this call's data; the parser stays in
 * it. Returns 0 (for "return fail(...)" in the checks). */
static int fail(pc_Http1Parser *p, pc_Http1Status s, const char *reason, size_t at) {
  p->state = S_ERROR;
  p->status = s;
  p->reason = reason;
  p->error_at = p->offset + at;
  return 0;
}

/* -- heads --------------------------------------------------------------- */

/* The version at s[0..n): 1 for HTTP/1.1, 0 for HTTP/1.0, -1 with the
 * error recorded (at 'at'). */
static int version(pc_Http1Parser *p, const char *s, size_t n, size_t at) {
  if (n == 8 && memcmp(s, "HTTP/1.", 7) == 0 && (s[7] == '0' || s[7] == '1')) return s[7] - '0';
  if (n == 8 && memcmp(s, "HTTP/", 5) == 0 && s[5] >= '0' && s[5] <= '9' && s[6] == '.' &&
      s[7] >= '0' && s[7] <= '9') {
    fail(p, kPc_Http1Status_BadVersion, "HTTP version other than 1.0 and 1.1", at);
    return -1;
  }
  fail(p, kPc_Http1Status_BadStartLine, "not an HTTP version", at);
  return -1;
}

/* method SP request-target SP HTTP-version (RFC 9112 3). */
static int request_line(pc_Http1Parser *p, const char *s, size_t n, size_t at) {
  size_t i = 0;
  while (i < n && is_tchar((unsigned char)s[i])) i++;
  if (i == 0 || i == n || s[i] != ' ')
    return fail(p, kPc_Http1Status_BadStartLine, "bad method", at + i);
  p->head.method = s;
  p->head.method_len = i++;
  size_t t = i;
  while (i < n && s[i] > 0x20 && s[i] < 0x7f) i++;
  if (i == t || i == n || s[i] != ' ')
    return fail(p, kPc_Http1Status_BadStartLine, "bad request target", at + i);
  p->head.target = s + t;
  p->head.target_len = i - t;
  i++;
  int minor = version(p, s + i, n - i, at + i);
  if (minor < 0) return 0;
  p->head.minor = minor;
  return 1;
}

/* HTTP-version SP status-code [SP reason-phrase] (RFC 9112 4; the reason
 * may be left out with its space, as h11 and many clients allow). */
static int status_line(pc_Http1Parser *p, const char *s, size_t n, size_t at) {
  int minor = version(p, s, n < 8 ? n : 8, at);
  if (minor < 0) return 0;
  p->head.minor = minor;
  if (n < 12 || s[8] != ' ')
    return fail(p, kPc_Http1Status_BadStartLine, "bad status code", at + 8);
  int status = 0;
  for (size_t i = 9; i < 12; i++) {
    if (s[i] < '0' || s[i] > '9')
      return fail(p, kPc_Http1Status_BadStartLine, "bad status code", at + i);
    status = status * 10 + (s[i] - '0');
  }
  if (status < 100) return fail(p, kPc_Http1Status_BadStartLine, "status code below 100", at + 9);
  p->head.status = status;
  p->head.reason = s + n;
  p->head.reason_len = 0;
  if (n == 12) return 1;
  if (s[12] != ' ') return fail(p, kPc_Http1Status_BadStartLine, "bad status code", at + 12);
  for (size_t i = 13; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (!is_vchar(c) && !is_ws(c))
      return fail(p, kPc_Http1Status_BadStartLine, "control byte in the reason phrase", at + i);
  }
  p->head.reason = s + 13;
  p->head.reason_len = n - 13;
  return 1;
}

/* field-name ":" OWS field-value OWS (RFC 9112 5). */
static int field_line(pc_Http1Parser *p, const char *s, size_t n, size_t at, pc_Http1Header *f) {
  size_t i = 0;
  while (i < n && is_tchar((unsigned char)s[i])) i++;
  if (i == n) return fail(p, kPc_Http1Status_BadField, "field line without a colon", at + i);
  if (s[i] != ':') {
    if (i > 0 && is_ws((unsigned char)s[i]))
      return fail(p, kPc_Http1Status_BadField, "whitespace before the colon", at + i);
    return fail(p, kPc_Http1Status_BadField, "field name not a token", at + i);
  }
  if (i == 0) return fail(p, kPc_Http1Status_BadField, "empty field name", at);
  f->name = s;
  f->name_len = i++;
  while (i < n && is_ws((unsigned char)s[i])) i++;
  size_t v = i, e = i;
  for (; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (is_vchar(c))
      e = i + 1;
    else if (!is_ws(c))
      return fail(p, kPc_Http1Status_BadField,
                  c == 0 ? "NUL in a field value" : "control byte in a field value", at + i);
  }
  f->value = s + v;
  f->value_len = e - v;
  return 1;
}

/* Scans a head (or, 'trailers', a trailer section) at d[0..len), which is
 * at byte 'at' of this call's data: each line as it completes is checked
 * and its fields stored, from where the last call stopped (p->scan: the
 * start of the first line not yet checked; p->seek: how far the search for
 * its LF got). Returns 1 with '*end' past the blank line, 0 when more
 * bytes are needed, -1 on an error (recorded); the fields are in p->fields,
 * '*count' of them. Fields of lines checked in
 * an earlier call point into that call's bytes, so once the section is
 * whole those lines are read again from this call's. */
static int section(pc_Http1Parser *p, const char *d, size_t len, int trailers, size_t at,
                   size_t *end, size_t *count) {
  size_t limit = trailers ? p->o.max_trailers : p->o.max_head;
  size_t avail = len < limit ? len : limit;
  size_t first = p->scan, pos = p->scan, n = p->nscan;
  if (pos > avail || p->seek > avail) { /* not the bytes given before: start over */
    first = pos = n = 0;
    p->seek = 0;
  }
  for (;;) {
    size_t from = p->seek > pos ? p->seek : pos;
    const char *lf = from < avail ? memchr(d + from, '\n', avail - from) : NULL;
    if (lf == NULL) {
      p->scan = pos;
      p->nscan = n;
      p->seek = avail;
      if (!trailers && pos == 0 && avail >= p->o.max_start_line + 2)
        return fail(p, kPc_Http1Status_StartLineTooLong, "start line too long",
                    at + p->o.max_start_line),
               -1;
      if (len >= limit)
        return fail(p, kPc_Http1Status_HeadTooLarge,
                    trailers ? "trailer section too large" : "head too large", at + limit),
               -1;
      return 0;
    }
    size_t i = (size_t)(lf - d);
    /* As the limit acts when the bytes come in pieces: an LF this far
     * comes after max_start_line + 2 bytes without one. */
    if (!trailers && pos == 0 && i >= p->o.max_start_line + 2)
      return fail(p, kPc_Http1Status_StartLineTooLong, "start line too long",
                  at + p->o.max_start_line),
             -1;
    if (i == pos || d[i - 1] != '\r')
      return fail(p, kPc_Http1Status_BadLineEnd, "bare LF", at + i), -1;
    size_t ll = i - 1 - pos;
    const char *cr = memchr(d + pos, '\r', ll);
    if (cr != NULL)
      return fail(p, kPc_Http1Status_BadLineEnd, "bare CR", at + (size_t)(cr - d)), -1;
    if (ll == 0) {
      if (!trailers && pos == 0)
        return fail(p, kPc_Http1Status_BadStartLine, "empty start line", at), -1;
      if (first > 0) { /* fields stored from an earlier call's bytes */
        p->scan = p->nscan = p->seek = 0;
        return section(p, d, len, trailers, at, end, count);
      }
      p->scan = p->nscan = p->seek = 0;
      *count = n;
      *end = i + 1;
      return 1;
    }
    if (!trailers && pos == 0) {
      int ok =
          p->role == kPc_Http1_Requests ? request_line(p, d, ll, at) : status_line(p, d, ll, at);
      if (!ok) return -1;
    } else {
      if (is_ws((unsigned char)d[pos]))
        return fail(p, kPc_Http1Status_ObsFold, "line folding (obs-fold)", at + pos), -1;
      if (n == p->cap)
        return fail(p, kPc_Http1Status_TooManyFields, "too many fields", at + pos), -1;
      if (!field_line(p, d + pos, ll, at + pos, &p->fields[n])) return -1;
      n++;
    }
    pos = i + 1;
  }
}

/* The field at 'f' is at byte 'at' + its distance from 'd'. */
static size_t where(const pc_Http1Header *f, const char *d, size_t at) {
  return at + (size_t)(f->name - d);
}

/* What the fields of a whole head at d (byte 'at' of the call) say about
 * the message: framing (RFC 9112 6.3), Host, keep-alive, Expect. Returns
 * 1, or 0 with the error recorded. */
static int interpret(pc_Http1Parser *p, const char *d, size_t at) {
  pc_Http1Head *h = &p->head;
  const char *cl = NULL;
  size_t cl_len = 0, te = 0, hosts = 0, te_at = 0, cl_at = 0;
  int te_chunked = 0, close = 0, expect = 0;
  h->fields = p->fields;
  for (size_t k = 0; k < h->nfields; k++) {
    const pc_Http1Header *f = &p->fields[k];
    if (ieq(f->name, f->name_len, "content-length")) {
      size_t i = 0;
      cl_at = where(f, d, at);
      while (i <= f->value_len) {
        size_t j = i;
        while (j < f->value_len && f->value[j] != ',') j++;
        size_t a = i, b = j;
        while (a < b && is_ws((unsigned char)f->value[a])) a++;
        while (b > a && is_ws((unsigned char)f->value[b - 1])) b--;
        if (a == b) return fail(p, kPc_Http1Status_BadContentLength, "empty Content-Length", cl_at);
        for (size_t c = a; c < b; c++)
          if (f->value[c] < '0' || f->value[c] > '9')
            return fail(p, kPc_Http1Status_BadContentLength, "Content-Length not digits", cl_at);
        if (cl == NULL) {
          cl = f->value + a;
          cl_len = b - a;
        } else if (cl_len != b - a || memcmp(cl, f->value + a, cl_len) != 0) {
          return fail(p, kPc_Http1Status_BadContentLength, "different Content-Length values",
                      cl_at);
        }
        i = j + 1;
      }
    } else if (ieq(f->name, f->name_len, "transfer-encoding")) {
      te++;
      te_at = where(f, d, at);
      te_chunked = ieq(f->value, f->value_len, "chunked");
    } else if (ieq(f->name, f->name_len, "host")) {
      hosts++;
    } else if (ieq(f->name, f->name_len, "connection")) {
      if (list_has(f->value, f->value_len, "close")) close = 1;
    } else if (ieq(f->name, f->name_len, "expect")) {
      if (list_has(f->value, f->value_len, "100-continue")) expect = 1;
    }
  }
  h->content_length = -1;
  if (cl != NULL) {
    uint64_t v = 0;
    for (size_t i = 0; i < cl_len; i++) {
      if (v > (UINT64_MAX - 9) / 10)
        v = UINT64_MAX;
      else
        v = v * 10 + (uint64_t)(cl[i] - '0');
    }
    if (v > (uint64_t)INT64_MAX)
      return fail(p, kPc_Http1Status_BadContentLength, "Content-Length overflows", cl_at);
    h->content_length = (int64_t)v;
  }
  if (te > 1)
    return fail(p, kPc_Http1Status_BadTransferEncoding, "more than one Transfer-Encoding field",
                te_at);
  if (te == 1 && !te_chunked)
    return fail(p, kPc_Http1Status_BadTransferEncoding, "transfer coding other than chunked",
                te_at);
  if (te == 1 && cl != NULL)
    return fail(p, kPc_Http1Status_AmbiguousLength, "Transfer-Encoding with Content-Length", te_at);
  if (te == 1 && h->minor == 0)
    return fail(p, kPc_Http1Status_BadTransferEncoding, "Transfer-Encoding in HTTP/1.0", te_at);
  h->keep_alive = h->minor == 1 && !close;
  if (p->role == kPc_Http1_Requests) {
    if (hosts > 1) return fail(p, kPc_Http1Status_BadHost, "more than one Host field", at);
    if (hosts == 0 && h->minor == 1) return fail(p, kPc_Http1Status_BadHost, "no Host field", at);
    h->expect_continue = expect && h->minor == 1;
    h->body = te ? kPc_Http1Body_Chunked : cl != NULL ? kPc_Http1Body_Length : kPc_Http1Body_None;
  } else if (h->status == 101) {
    return fail(p, kPc_Http1Status_Unsupported, "101 Switching Protocols", at);
  } else if (h->status < 200 || h->status == 204 || h->status == 304 || p->head_request) {
    h->body = kPc_Http1Body_None;
  } else {
    h->body = te ? kPc_Http1Body_Chunked : cl != NULL ? kPc_Http1Body_Length : kPc_Http1Body_Close;
    if (h->body == kPc_Http1Body_Close) h->keep_alive = 0;
  }
  if (h->body == kPc_Http1Body_Length && (uint64_t)h->content_length > p->o.max_content_length)
    return fail(p, kPc_Http1Status_ContentTooLarge, "Content-Length over the limit", cl_at);
  return 1;
}

/* -- chunks -------------------------------------------------------------- */

/* chunk-size [ chunk-ext ] CRLF at d[0..len), byte 'at' of the call: 1
 * with '*size' and '*end' (past the LF), 0 when more bytes are needed, -1
 * on an error (recorded). Extensions are skipped: BWS ";" and then VCHAR,
 * obs-text, SP and HTAB. */
static int chunk_line(pc_Http1Parser *p, const char *d, size_t len, size_t at, uint64_t *size,
                      size_t *end) {
  size_t limit = p->o.max_chunk_line + 2;
  size_t avail = len < limit ? len : limit;
  if (avail > 0 && hex_value((unsigned char)d[0]) < 0)
    return fail(p, d[0] == '\n' ? kPc_Http1Status_BadLineEnd : kPc_Http1Status_BadChunk,
                d[0] == '\n' ? "bare LF" : "chunk size not hex", at),
           -1;
  size_t from = p->seek < avail ? p->seek : 0;
  const char *lf = from < avail ? memchr(d + from, '\n', avail - from) : NULL;
  if (lf == NULL) {
    p->seek = avail;
    if (len >= limit)
      return fail(p, kPc_Http1Status_BadChunk, "chunk size line too long", at + limit - 2), -1;
    return 0;
  }
  size_t i = (size_t)(lf - d), n = i - 1;
  if (d[i - 1] != '\r') return fail(p, kPc_Http1Status_BadLineEnd, "bare LF", at + i), -1;
  const char *cr = memchr(d, '\r', n);
  if (cr != NULL) return fail(p, kPc_Http1Status_BadLineEnd, "bare CR", at + (size_t)(cr - d)), -1;
  uint64_t v = 0;
  size_t k = 0;
  for (int h; k < n && (h = hex_value((unsigned char)d[k])) >= 0; k++) {
    if (v > (UINT64_MAX - (uint64_t)h) / 16)
      return fail(p, kPc_Http1Status_BadChunk, "chunk size overflows", at + k), -1;
    v = v * 16 + (uint64_t)h;
    if (v > p->o.max_content_length)
      return fail(p, kPc_Http1Status_ContentTooLarge, "chunk size over the limit", at + k), -1;
  }
  size_t j = k;
  while (j < n && is_ws((unsigned char)d[j])) j++;
  if (j < n) {
    if (d[j] != ';')
      return fail(p, kPc_Http1Status_BadChunk, "bad byte after the chunk size", at + j), -1;
    for (j++; j < n; j++)
      if (!is_vchar((unsigned char)d[j]) && !is_ws((unsigned char)d[j]))
        return fail(p, kPc_Http1Status_BadChunk, "control byte in a chunk extension", at + j), -1;
  } else if (j > k) {
    return fail(p, kPc_Http1Status_BadChunk, "whitespace after the chunk size", at + k), -1;
  }
  p->seek = 0;
  *size = v;
  *end = i + 1;
  return 1;
}

/* -- the parser ---------------------------------------------------------- */

void pc_Http1Parser_Init(pc_Http1Parser *p, pc_Http1Role role, const pc_Http1Options *opts,
                         pc_Http1Header *fields, size_t max_fields) {
  memset(p, 0, sizeof *p);
  if (opts != NULL) p->o = *opts;
  if (p->o.max_start_line == 0) p->o.max_start_line = PC_HTTP1_DEFAULT_MAX_START_LINE;
  if (p->o.max_head == 0) p->o.max_head = PC_HTTP1_DEFAULT_MAX_HEAD;
  if (p->o.max_chunk_line == 0) p->o.max_chunk_line = PC_HTTP1_DEFAULT_MAX_CHUNK_LINE;
  if (p->o.max_trailers == 0) p->o.max_trailers = PC_HTTP1_DEFAULT_MAX_TRAILERS;
  if (p->o.max_content_length == 0) p->o.max_content_length = PC_HTTP1_DEFAULT_MAX_CONTENT_LENGTH;
  if (p->o.max_content_length > (uint64_t)INT64_MAX) p->o.max_content_length = (uint64_t)INT64_MAX;
  p->fields = fields;
  p->cap = fields != NULL ? max_fields : 0;
  p->role = role;
  p->state = S_HEAD;
  p->head.content_length = -1;
}

void pc_Http1Parser_Eof(pc_Http1Parser *p) {
  p->eof = 1;
}

void pc_Http1Parser_ExpectHead(pc_Http1Parser *p) {
  p->head_request = 1;
}

/* The next message: a fresh head, nothing scanned. */
static void restart(pc_Http1Parser *p) {
  p->state = S_HEAD;
  p->scan = p->nscan = p->seek = 0;
  p->head_request = p->interim = 0;
  p->remaining = 0;
  memset(&p->head, 0, sizeof p->head);
  p->head.content_length = -1;
}

int pc_Http1Parser_Next(pc_Http1Parser *p) {
  switch (p->state) {
  case S_PAUSED:
    if (!p->head.keep_alive) break;
    restart(p);
    return 1;
  case S_HEAD:
    if (p->scan == 0 && p->seek == 0 && !p->interim) return 1;
    break;
  case S_ERROR: return 0;
  default: break;
  }
  p->state = S_CLOSED;
  return 0;
}

pc_Http1Status pc_Http1Parser_Error(const pc_Http1Parser *p, pc_Error *err) {
  if (p->state != S_ERROR) return kPc_Http1Status_Ok;
  pc_Error_Set(err, "HTTP/1.1 %s: %s at offset %llu",
               p->role == kPc_Http1_Requests ? "request" : "response", p->reason,
               (unsigned long long)p->error_at);
  return p->status;
}

static size_t event(pc_Http1Event *ev, pc_Http1EventType type, size_t consumed) {
  ev->type = type;
  return consumed;
}

/* One event from data[0..len); the bytes consumed. */
static size_t step(pc_Http1Parser *p, const char *data, size_t len, pc_Http1Event *ev) {
  size_t pos = 0;
  for (;;) {
    switch (p->state) {
    case S_HEAD: {
      if (p->scan == 0 && p->seek == 0) {
        if (p->role == kPc_Http1_Requests) { /* empty lines before a request (RFC 9112 2.2) */
          while (len - pos >= 2 && data[pos] == '\r' && data[pos + 1] == '\n') pos += 2;
          if (len - pos == 1 && data[pos] == '\r') {
            if (p->eof) return fail(p, kPc_Http1Status_Truncated, "closed inside a head", len);
            return event(ev, kPc_Http1Event_NeedMore, pos);
          }
        }
        if (pos == len) {
          if (!p->eof) return event(ev, kPc_Http1Event_NeedMore, pos);
          if (p->interim)
            return fail(p, kPc_Http1Status_Truncated, "closed before the final response", pos);
          p->state = S_CLOSED;
          return event(ev, kPc_Http1Event_Closed, pos);
        }
        unsigned char c = (unsigned char)data[pos];
        if (c == '\n') return fail(p, kPc_Http1Status_BadLineEnd, "bare LF", pos);
        /* Fail at once on what cannot start a head (a TLS handshake on a
         * plain port), not after max_head bytes. */
        if (p->role == kPc_Http1_Requests ? !is_tchar(c) && c != '\r' : c != 'H')
          return fail(p, kPc_Http1Status_BadStartLine,
                      p->role == kPc_Http1_Requests ? "bad method" : "not an HTTP version", pos);
      }
      size_t end;
      int r = section(p, data + pos, len - pos, 0, pos, &end, &p->head.nfields);
      if (r < 0) return 0;
      if (r == 0) {
        if (p->eof) return fail(p, kPc_Http1Status_Truncated, "closed inside a head", len);
        return event(ev, kPc_Http1Event_NeedMore, pos);
      }
      if (!interpret(p, data + pos, pos)) return 0;
      pos += end;
      ev->head = &p->head;
      if (p->role == kPc_Http1_Responses && p->head.status < 200) {
        p->interim = 1;
        return event(ev, kPc_Http1Event_Informational, pos);
      }
      switch (p->head.body) {
      case kPc_Http1Body_Length:
        p->remaining = (uint64_t)p->head.content_length;
        p->state = p->remaining > 0 ? S_LENGTH : S_END;
        break;
      case kPc_Http1Body_Chunked: p->state = S_CHUNK_LINE; break;
      case kPc_Http1Body_Close: p->state = S_CLOSE; break;
      default: p->state = S_END; break;
      }
      return event(ev, kPc_Http1Event_Head, pos);
    }
    case S_LENGTH:
    case S_CHUNK_DATA: {
      if (pos == len) {
        if (p->eof) return fail(p, kPc_Http1Status_Truncated, "closed inside a body", pos);
        return event(ev, kPc_Http1Event_NeedMore, pos);
      }
      size_t take = len - pos;
      if ((uint64_t)take > p->remaining) take = (size_t)p->remaining;
      ev->data = data + pos;
      ev->len = take;
      p->remaining -= take;
      if (p->remaining == 0) p->state = p->state == S_LENGTH ? S_END : S_CHUNK_CR;
      return event(ev, kPc_Http1Event_Body, pos + take);
    }
    case S_CLOSE:
      if (pos == len) {
        if (!p->eof) return event(ev, kPc_Http1Event_NeedMore, pos);
        p->state = S_END;
        continue;
      }
      ev->data = data + pos;
      ev->len = len - pos;
      return event(ev, kPc_Http1Event_Body, len);
    case S_CHUNK_LINE: {
      uint64_t size;
      size_t end;
      int r = chunk_line(p, data + pos, len - pos, pos, &size, &end);
      if (r < 0) return 0;
      if (r == 0) {
        if (p->eof)
          return fail(p, kPc_Http1Status_Truncated, "closed inside a chunk size line", len);
        return event(ev, kPc_Http1Event_NeedMore, pos);
      }
      pos += end;
      p->remaining = size;
      p->state = size > 0 ? S_CHUNK_DATA : S_TRAILERS;
      continue;
    }
    case S_CHUNK_CR:
    case S_CHUNK_LF: {
      if (pos == len) {
        if (p->eof) return fail(p, kPc_Http1Status_Truncated, "closed inside a chunk", pos);
        return event(ev, kPc_Http1Event_NeedMore, pos);
      }
      char c = data[pos];
      if (p->state == S_CHUNK_CR && c != '\r')
        return fail(p, c == '\n' ? kPc_Http1Status_BadLineEnd : kPc_Http1Status_BadChunk,
                    c == '\n' ? "bare LF" : "chunk data longer than its size", pos);
      if (p->state == S_CHUNK_LF && c != '\n')
        return fail(p, kPc_Http1Status_BadLineEnd, "bare CR", pos - 1);
      pos++;
      p->state = p->state == S_CHUNK_CR ? S_CHUNK_LF : S_CHUNK_LINE;
      continue;
    }
    case S_TRAILERS: {
      size_t end, count;
      int r = section(p, data + pos, len - pos, 1, pos, &end, &count);
      if (r < 0) return 0;
      if (r == 0) {
        if (p->eof) return fail(p, kPc_Http1Status_Truncated, "closed inside the trailers", len);
        return event(ev, kPc_Http1Event_NeedMore, pos);
      }
      pos += end;
      if (count == 0) {
        p->state = S_PAUSED;
        return event(ev, kPc_Http1Event_End, pos);
      }
      ev->fields = p->fields;
      ev->nfields = count;
      p->state = S_END;
      return event(ev, kPc_Http1Event_Trailers, pos);
    }
    case S_END: p->state = S_PAUSED; return event(ev, kPc_Http1Event_End, pos);
    case S_PAUSED: return event(ev, kPc_Http1Event_Paused, pos);
    case S_CLOSED:
      if (pos < len)
        return fail(p, kPc_Http1Status_AfterClose, "bytes after the last message", pos);
      return event(ev, p->eof ? kPc_Http1Event_Closed : kPc_Http1Event_NeedMore, pos);
    default: return 0;
    }
  }
}

size_t pc_Http1Parser_Parse(pc_Http1Parser *p, const char *data, size_t len, pc_Http1Event *ev) {
  memset(ev, 0, sizeof *ev);
  if (data == NULL) len = 0;
  size_t n = step(p, data, len, ev);
  if (p->state == S_ERROR) {
    ev->type = kPc_Http1Event_Error;
    ev->status = p->status;
    ev->reason = p->reason;
    ev->offset = p->error_at;
    ev->head = NULL;
    ev->data = NULL;
    ev->len = 0;
    return 0;
  }
  p->offset += n;
  return n;
}

/* -- writing ------------------------------------------------------------- */

/* Output into buf[0..cap), counting what does not fit ('buf' NULL: count
 * only). */
typedef struct {
  char *buf;
  size_t cap, n;
} Out;

static void put(Out *w, const void *s, size_t n) {
  if (w->buf != NULL && w->n <= w->cap && n <= w->cap - w->n) memcpy(w->buf + w->n, s, n);
  w->n += n;
}

static void put_str(Out *w, const char *s) {
  put(w, s, strlen(s));
}

static void put_u64(Out *w, uint64_t v, int base) {
  char tmp[24];
  size_t i = sizeof tmp;
  do {
    tmp[--i] = "0123456789abcdef"[v % (uint64_t)base];
    v /= (uint64_t)base;
  } while (v != 0);
  put(w, tmp + i, sizeof tmp - i);
}

static const struct {
  int status;
  const char *reason;
} kReasons[] = {
    {100, "Continue"},
    {200, "OK"},
    {201, "Created"},
    {202, "Accepted"},
    {204, "No Content"},
    {206, "Partial Content"},
    {301, "Moved Permanently"},
    {302, "Found"},
    {304, "Not Modified"},
    {400, "Bad Request"},
    {401, "Unauthorized"},
    {403, "Forbidden"},
    {404, "Not Found"},
    {405, "Method Not Allowed"},
    {408, "Request Timeout"},
    {409, "Conflict"},
    {411, "Length Required"},
    {412, "Precondition Failed"},
    {413, "Content Too Large"},
    {414, "URI Too Long"},
    {415, "Unsupported Media Type"},
    {417, "Expectation Failed"},
    {429, "Too Many Requests"},
    {431, "Request Header Fields Too Large"},
    {500, "Internal Server Error"},
    {501, "Not Implemented"},
    {502, "Bad Gateway"},
    {503, "Service Unavailable"},
    {504, "Gateway Timeout"},
    {505, "HTTP Version Not Supported"},
};

static const char *reason_of(int status) {
  for (size_t i = 0; i < sizeof kReasons / sizeof kReasons[0]; i++)
    if (kReasons[i].status == status) return kReasons[i].reason;
  return "";
}

/* Whether the field 'f' may be written: a token name, a value of VCHAR,
 * obs-text and inner SP or HTAB, and not a name the writer owns
 * ('owned', NULL-terminated). */
static int field_ok(const pc_Http1Header *f, const char *const *owned, const char *what,
                    pc_Error *err) {
  char q[64];
  if (f->name_len == 0 || (f->name == NULL && f->name_len > 0)) {
    pc_Error_Set(err, "HTTP/1.1 %s: empty field name", what);
    return 0;
  }
  for (size_t i = 0; i < f->name_len; i++) {
    if (!is_tchar((unsigned char)f->name[i])) {
      pc_Error_Set(err, "HTTP/1.1 %s: field name \"%s\" is not a token", what,
                   pc_Error_Quote(q, sizeof q, f->name, f->name_len, kPc_Quote_Json));
      return 0;
    }
  }
  for (size_t k = 0; owned[k] != NULL; k++) {
    if (ieq(f->name, f->name_len, owned[k])) {
      pc_Error_Set(err, "HTTP/1.1 %s: field \"%s\" is set by the framing, not by a field", what,
                   pc_Error_Quote(q, sizeof q, f->name, f->name_len, kPc_Quote_Json));
      return 0;
    }
  }
  if (f->value == NULL && f->value_len > 0) {
    pc_Error_Set(err, "HTTP/1.1 %s: field value missing", what);
    return 0;
  }
  for (size_t i = 0; i < f->value_len; i++) {
    unsigned char c = (unsigned char)f->value[i];
    int edge = i == 0 || i + 1 == f->value_len;
    if (!is_vchar(c) && !(is_ws(c) && !edge)) {
      pc_Error_Set(err,
                   "HTTP/1.1 %s: field \"%s\": value has a control byte or surrounding whitespace",
                   what, pc_Error_Quote(q, sizeof q, f->name, f->name_len, kPc_Quote_Json));
      return 0;
    }
  }
  return 1;
}

static void put_field(Out *w, const pc_Http1Header *f) {
  put(w, f->name, f->name_len);
  put(w, ": ", 2);
  put(w, f->value, f->value_len);
  put(w, "\r\n", 2);
}

static const char *const kHeadOwned[] = {"content-length", "transfer-encoding", "connection", NULL};
static const char *const kTrailerOwned[] = {"content-length", "transfer-encoding", "host",
                                            "connection", NULL};

/* The head 'h' into 'w', or 0 with 'err' set. */
static int write_head(Out *w, const pc_Http1Out *h, pc_Error *err) {
  int request = h->method != NULL;
  const char *what = request ? "request" : "response";
  size_t hosts = 0;
  for (size_t k = 0; k < h->nfields; k++) {
    if (!field_ok(&h->fields[k], kHeadOwned, what, err)) return 0;
    if (ieq(h->fields[k].name, h->fields[k].name_len, "host")) hosts++;
  }
  if (request) {
    size_t m = strlen(h->method);
    for (size_t i = 0; i < m; i++)
      if (!is_tchar((unsigned char)h->method[i])) m = 0;
    if (m == 0) {
      pc_Error_Set(err, "HTTP/1.1 request: method is not a token");
      return 0;
    }
    const char *t = h->target != NULL ? h->target : "";
    size_t tn = strlen(t);
    for (size_t i = 0; i < tn; i++)
      if (t[i] <= 0x20 || t[i] >= 0x7f) tn = 0;
    if (tn == 0) {
      pc_Error_Set(err, "HTTP/1.1 request: target empty or not VCHAR");
      return 0;
    }
    if (hosts != 1) {
      pc_Error_Set(err, "HTTP/1.1 request: %zu Host fields (one needed)", hosts);
      return 0;
    }
    if (h->body == kPc_Http1Body_Close) {
      pc_Error_Set(err, "HTTP/1.1 request: a request body cannot end with the connection");
      return 0;
    }
    put_str(w, h->method);
    put(w, " ", 1);
    put_str(w, t);
    put_str(w, " HTTP/1.1\r\n");
  } else {
    int s = h->status;
    if (s < 100 || s > 999) {
      pc_Error_Set(err, "HTTP/1.1 response: status %d out of range", s);
      return 0;
    }
    int bodiless = s < 200 || s == 204;
    if ((bodiless && h->body != kPc_Http1Body_None) ||
        (s == 304 && (h->body == kPc_Http1Body_Chunked || h->body == kPc_Http1Body_Close))) {
      pc_Error_Set(err, "HTTP/1.1 response: status %d takes no body", s);
      return 0;
    }
    put_str(w, "HTTP/1.1 ");
    put_u64(w, (uint64_t)s, 10);
    put(w, " ", 1);
    put_str(w, reason_of(s));
    put(w, "\r\n", 2);
  }
  for (size_t k = 0; k < h->nfields; k++) put_field(w, &h->fields[k]);
  if (h->body == kPc_Http1Body_Length) {
    put_str(w, "Content-Length: ");
    put_u64(w, h->content_length, 10);
    put(w, "\r\n", 2);
  } else if (h->body == kPc_Http1Body_Chunked) {
    put_str(w, "Transfer-Encoding: chunked\r\n");
  }
  if (h->close || h->body == kPc_Http1Body_Close) put_str(w, "Connection: close\r\n");
  put(w, "\r\n", 2);
  return 1;
}

size_t pc_Http1_WriteHead(char *buf, size_t cap, const pc_Http1Out *h, pc_Error *err) {
  Out w = {NULL, 0, 0};
  if (!write_head(&w, h, err)) return 0;
  if (w.n <= cap && buf != NULL) {
    Out out = {buf, cap, 0};
    write_head(&out, h, NULL);
  }
  return w.n;
}

size_t pc_Http1_ChunkHead(char out[PC_HTTP1_CHUNK_HEAD_MAX], uint64_t size) {
  Out w = {out, PC_HTTP1_CHUNK_HEAD_MAX, 0};
  put_u64(&w, size, 16);
  put(&w, "\r\n", 2);
  return w.n;
}

size_t pc_Http1_WriteChunk(char *buf, size_t cap, const void *data, size_t len) {
  if (len == 0) return 0;
  char head[PC_HTTP1_CHUNK_HEAD_MAX];
  size_t hn = pc_Http1_ChunkHead(head, len);
  size_t n = hn + len + 2;
  if (n <= cap && buf != NULL) {
    memcpy(buf, head, hn);
    memcpy(buf + hn, data, len);
    buf[hn + len] = '\r';
    buf[hn + len + 1] = '\n';
  }
  return n;
}

static void write_last(Out *w, const pc_Http1Header *trailers, size_t n) {
  put(w, "0\r\n", 3);
  for (size_t k = 0; k < n; k++) put_field(w, &trailers[k]);
  put(w, "\r\n", 2);
}

size_t pc_Http1_WriteLastChunk(char *buf, size_t cap, const pc_Http1Header *trailers, size_t n,
                               pc_Error *err) {
  for (size_t k = 0; k < n; k++)
    if (!field_ok(&trailers[k], kTrailerOwned, "trailer", err)) return 0;
  Out w = {NULL, 0, 0};
  write_last(&w, trailers, n);
  if (w.n <= cap && buf != NULL) {
    Out out = {buf, cap, 0};
    write_last(&out, trailers, n);
  }
  return w.n;
}
