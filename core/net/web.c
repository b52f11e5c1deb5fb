/* gRPC-Web and Connect framing and status, pure functions (see web.h). */
#include "net/web.h"
#include "wire/wire.h"

#include <stdio.h>
#include <string.h>

/* -- classification -------------------------------------------------------- */

static int lower(int c) {
  return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

/* Whether the 'n' bytes at 'p' are 'k' whatever their case. */
static int same(const char *p, size_t n, const char *k) {
  size_t kn = strlen(k);
  if (n != kn) return 0;
  for (size_t i = 0; i < n; i++)
    if (lower((unsigned char)p[i]) != k[i]) return 0;
  return 1;
}

/* The codec of a subtype suffix ("", "proto", "json"); -1 for another. */
static int codec_of(const char *p, size_t n, int empty_ok) {
  if (n == 0) return empty_ok ? kPc_WebCodec_Proto : -1;
  if (same(p, n, "proto")) return kPc_WebCodec_Proto;
  if (same(p, n, "json")) return kPc_WebCodec_Json;
  return -1;
}

pc_WebProtocol pc_Web_Classify(const char *method, const char *ct, size_t ctn, pc_WebCodec *codec) {
  *codec = kPc_WebCodec_Proto;
  if (ct == NULL) return kPc_WebProtocol_None;
  size_t end = 0; /* the media type, without parameters or trailing blanks */
  while (end < ctn && ct[end] != ';') end++;
  while (end > 0 && (ct[end - 1] == ' ' || ct[end - 1] == '\t')) end--;
  size_t plus = 0;
  while (plus < end && ct[plus] != '+') plus++;
  const char *sub = plus < end ? ct + plus + 1 : ct + end;
  size_t subn = plus < end ? end - plus - 1 : 0;
  int post = method == NULL || strcmp(method, "POST") == 0;
  int c;
  if (same(ct, plus, "application/grpc")) {
    if (codec_of(sub, subn, 1) == kPc_WebCodec_Json) *codec = kPc_WebCodec_Json;
    return kPc_WebProtocol_Grpc;
  }
  if (same(ct, plus, "application/grpc-web") && (c = codec_of(sub, subn, 1)) >= 0) {
    *codec = (pc_WebCodec)c;
    return kPc_WebProtocol_GrpcWeb;
  }
  if (same(ct, plus, "application/grpc-web-text") && (c = codec_of(sub, subn, 1)) >= 0) {
    *codec = (pc_WebCodec)c;
    return kPc_WebProtocol_GrpcWebText;
  }
  if (same(ct, plus, "application/connect") && (c = codec_of(sub, subn, 0)) >= 0) {
    *codec = (pc_WebCodec)c;
    return kPc_WebProtocol_ConnectStream;
  }
  if (post && plus == end && end > 12 && same(ct, 12, "application/") &&
      (c = codec_of(ct + 12, end - 12, 0)) >= 0) {
    *codec = (pc_WebCodec)c;
    return kPc_WebProtocol_ConnectUnary;
  }
  return kPc_WebProtocol_None;
}

const char *pc_WebProtocol_Name(pc_WebProtocol p) {
  switch (p) {
  case kPc_WebProtocol_Grpc: return "grpc";
  case kPc_WebProtocol_GrpcWeb: return "grpc-web";
  case kPc_WebProtocol_GrpcWebText: return "grpc-web-text";
  case kPc_WebProtocol_ConnectUnary:
  case kPc_WebProtocol_ConnectStream: return "connect";
  case kPc_WebProtocol_Http: return "http";
  default: return "";
  }
}

/* -- base64 ---------------------------------------------------------------- */

size_t pc_WebBase64_Decode(pc_WebBase64 *b, const char *in, size_t len, unsigned char *out,
                           size_t *at) {
  size_t o = 0;
  for (size_t i = 0; i < len; i++) {
    int c = (unsigned char)in[i];
    if (c == '\r' || c == '\n') continue; /* line breaks of wrapped base64 (RFC 2045) */
    if (c == '=') {
      /* "xx==" and "xxx=" end a group; "xx=" waits for its second '=' */
      if (b->n < 2 || (b->n == 3 && b->pad > 0)) {
        *at = i;
        return (size_t)-1;
      }
      if (b->n == 2 && ++b->pad < 2) continue;
      out[o++] = (unsigned char)(b->q[0] << 2 | b->q[1] >> 4);
      if (b->n == 3) out[o++] = (unsigned char)(b->q[1] << 4 | b->q[2] >> 2);
      b->n = b->pad = 0;
      continue;
    }
    int v = pc_Grpc_Base64Value((char)c);
    if (v < 0 || b->pad > 0) {
      *at = i;
      return (size_t)-1;
    }
    b->q[b->n++] = (unsigned char)v;
    if (b->n == 4) {
      out[o++] = (unsigned char)(b->q[0] << 2 | b->q[1] >> 4);
      out[o++] = (unsigned char)(b->q[1] << 4 | b->q[2] >> 2);
      out[o++] = (unsigned char)(b->q[2] << 6 | b->q[3]);
      b->n = 0;
    }
  }
  return o;
}

size_t pc_WebBase64_Pending(const pc_WebBase64 *b) {
  return b->n + b->pad;
}

size_t pc_Web_Base64Encode(const unsigned char *in, size_t len, char *out) {
  size_t n = pc_Grpc_Base64Encode(in, len, out);
  while (n % 4 != 0) out[n++] = '=';
  return n;
}

/* -- building bodies ------------------------------------------------------- */

typedef struct {
  pc_Alloc *alloc;
  void *ud;
  pc_GrpcBuf *b;
  int ok;
} Out;

static void put(Out *o, const void *p, size_t n) {
  if (!o->ok) return;
  if (!pc_GrpcBuf_Reserve(o->alloc, o->ud, o->b, n)) {
    o->ok = 0;
    return;
  }
  memcpy(o->b->p + o->b->len, p, n);
  o->b->len += n;
}

static void puts_(Out *o, const char *s) {
  put(o, s, strlen(s));
}

/* Base64 of 'n' bytes at 'p', padded or not. */
static void put_base64(Out *o, const char *p, size_t n, int pad) {
  if (!o->ok || !pc_GrpcBuf_Reserve(o->alloc, o->ud, o->b, n / 3 * 4 + 8)) {
    o->ok = 0;
    return;
  }
  char *at = o->b->p + o->b->len;
  o->b->len += pad ? pc_Web_Base64Encode((const unsigned char *)p, n, at)
                   : pc_Grpc_Base64Encode((const unsigned char *)p, n, at);
}

/* Reserves the 5-byte prefix with 'flags'; returns where it starts. */
static size_t begin_envelope(Out *o, unsigned char flags) {
  size_t start = o->b->len;
  unsigned char h[5] = {flags, 0, 0, 0, 0};
  put(o, h, 5);
  return start;
}

static void end_envelope(Out *o, size_t start) {
  if (!o->ok) return;
  size_t n = o->b->len - start - 5;
  unsigned char *h = (unsigned char *)o->b->p + start;
  h[1] = (unsigned char)(n >> 24);
  h[2] = (unsigned char)(n >> 16);
  h[3] = (unsigned char)(n >> 8);
  h[4] = (unsigned char)n;
}

static void put_line(Out *o, const char *k, size_t kn, const char *v, size_t vn, int bin) {
  put(o, k, kn);
  put(o, ":", 1);
  if (bin)
    put_base64(o, v, vn, 0);
  else
    put(o, v, vn);
  put(o, "\r\n", 2);
}

int pc_Web_GrpcWebTrailers(pc_Alloc *alloc, void *ud, pc_GrpcBuf *out, const pc_GrpcStatus *st,
                           const pc_GrpcPair *md, size_t n) {
  Out o = {alloc, ud, out, 1};
  size_t len0 = out->len;
  size_t start = begin_envelope(&o, 0x80);
  char code[16];
  int cn = snprintf(code, sizeof code, "%d", (int)st->code);
  put_line(&o, "grpc-status", 11, code, (size_t)cn, 0);
  if (st->message_len > 0) {
    char small[256], *m = small;
    size_t need = st->message_len * 3 + 1;
    if (need > sizeof small) m = pc_Grpc_BlockRealloc(alloc, ud, NULL, need);
    if (m == NULL) {
      o.ok = 0;
    } else {
      size_t mn = pc_Grpc_PercentEncode(st->message, st->message_len, m);
      put_line(&o, "grpc-message", 12, m, mn, 0);
      if (m != small) pc_Grpc_BlockRealloc(alloc, ud, m, 0);
    }
  }
  if (st->details_len > 0)
    put_line(&o, "grpc-status-details-bin", 23, st->details, st->details_len, 1);
  for (size_t i = 0; i < n; i++)
    put_line(&o, md[i].key, md[i].key_len, md[i].value, md[i].value_len,
             pc_Grpc_IsBinKey(md[i].key, md[i].key_len));
  end_envelope(&o, start);
  if (!o.ok) out->len = len0;
  return o.ok;
}

/* -- Connect --------------------------------------------------------------- */

/* ORDER CODE (base/status.h): gRPC's names in lower case, "canceled" as
 * Connect spells it */
static const char *const CONNECT_CODES[PC_CODE_COUNT] = {
    "ok",        "canceled",       "unknown",           "invalid_argument",   "deadline_exceeded",
    "not_found", "already_exists", "permission_denied", "resource_exhausted", "failed_precondition",
    "aborted",   "out_of_range",   "unimplemented",     "internal",           "unavailable",
    "data_loss", "unauthenticated"};

const char *pc_Connect_CodeName(pc_Code code) {
  return (int)code >= 0 && (int)code < PC_CODE_COUNT ? CONNECT_CODES[code] : "unknown";
}

int pc_Connect_HttpStatus(pc_Code code) {
  switch (code) {
  case kPc_Code_Ok: return 200;
  case kPc_Code_Cancelled: return 499;
  case kPc_Code_InvalidArgument:
  case kPc_Code_FailedPrecondition:
  case kPc_Code_OutOfRange: return 400;
  case kPc_Code_DeadlineExceeded: return 504;
  case kPc_Code_NotFound: return 404;
  case kPc_Code_AlreadyExists:
  case kPc_Code_Aborted: return 409;
  case kPc_Code_PermissionDenied: return 403;
  case kPc_Code_ResourceExhausted: return 429;
  case kPc_Code_Unimplemented: return 501;
  case kPc_Code_Unavailable: return 503;
  case kPc_Code_Unauthenticated: return 401;
  default: return 500;
  }
}

double pc_Connect_ParseTimeout(const char *s, size_t len) {
  if (len == 0 || len > 10) return -1;
  double ms = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    ms = ms * 10 + (s[i] - '0');
  }
  return ms / 1000;
}

/* A JSON string: quotes, backslashes and control characters escaped;
 * other bytes as they are. */
static void put_json_string(Out *o, const char *s, size_t n) {
  put(o, "\"", 1);
  size_t run = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    put(o, s + run, i - run);
    run = i + 1;
    char esc[8];
    if (c == '"' || c == '\\') {
      esc[0] = '\\';
      esc[1] = (char)c;
      put(o, esc, 2);
    } else {
      snprintf(esc, sizeof esc, "\\u%04x", c);
      put(o, esc, 6);
    }
  }
  put(o, s + run, n - run);
  put(o, "\"", 1);
}

/* The next field of the message at '*p' (before 'end'): its number, and
 * for a length-delimited one its bytes ('*val' NULL for another); moves
 * '*p' past it. 0 at the end or at bytes that are not a message. */
static int next_field(const uint8_t **p, const uint8_t *end, uint32_t *num, const char **val,
                      size_t *vn) {
  pc_WireStatus st;
  pc_WireType wt;
  const uint8_t *at;
  if (*p >= end) return 0;
  const uint8_t *q = pc_Wire_ReadTag(*p, end, num, &wt, &st);
  if (q == NULL) return 0;
  *val = NULL;
  if (wt == kPc_Wire_Len) {
    q = pc_Wire_ReadLength(q, end, vn, &st);
    if (q == NULL) return 0;
    *val = (const char *)q;
    *p = q + *vn;
    return 1;
  }
  *p = pc_Wire_SkipField(q, end, *num, wt, 8, &st, &at);
  return *p != NULL;
}

/* The next detail of a google.rpc.Status (its repeated google.protobuf.Any
 * 'details', field 3) from '*p': the type URL and the value. */
static int next_detail(const uint8_t **p, const uint8_t *end, const char **type, size_t *tn,
                       const char **value, size_t *vn) {
  uint32_t num, fnum;
  const char *any, *f;
  size_t an, fn;
  while (next_field(p, end, &num, &any, &an)) {
    if (num != 3 || any == NULL) continue;
    const uint8_t *q = (const uint8_t *)any, *qend = q + an;
    *type = *value = "";
    *tn = *vn = 0;
    while (next_field(&q, qend, &fnum, &f, &fn)) {
      if (fnum == 1 && f) {
        *type = f;
        *tn = fn;
      } else if (fnum == 2 && f) {
        *value = f;
        *vn = fn;
      }
    }
    return 1;
  }
  return 0;
}

/* The details of a google.rpc.Status, each as {"type":..., "value":...}
 * (the type's name without its URL prefix). */
static void put_details(Out *o, const char *status, size_t len) {
  const uint8_t *p = (const uint8_t *)status, *end = p + len;
  const char *type, *value;
  size_t tn, vn;
  for (int first = 1; next_detail(&p, end, &type, &tn, &value, &vn); first = 0) {
    for (size_t i = tn; i > 0; i--) /* "type.googleapis.com/google.rpc.X": the name */
      if (type[i - 1] == '/') {
        type += i;
        tn -= i;
        break;
      }
    puts_(o, first ? "{\"type\":" : ",{\"type\":");
    put_json_string(o, type, tn);
    puts_(o, ",\"value\":\"");
    put_base64(o, value, vn, 0);
    puts_(o, "\"}");
  }
}

/* Whether the Status bytes hold at least one detail. */
static int has_details(const char *status, size_t len) {
  const uint8_t *p = (const uint8_t *)status;
  const char *type, *value;
  size_t tn, vn;
  return next_detail(&p, p + len, &type, &tn, &value, &vn);
}

static void put_error(Out *o, const pc_GrpcStatus *st) {
  puts_(o, "{\"code\":\"");
  puts_(o, pc_Connect_CodeName(st->code));
  puts_(o, "\"");
  if (st->message_len > 0) {
    puts_(o, ",\"message\":");
    put_json_string(o, st->message, st->message_len);
  }
  if (st->details_len > 0 && has_details(st->details, st->details_len)) {
    puts_(o, ",\"details\":[");
    put_details(o, st->details, st->details_len);
    puts_(o, "]");
  }
  puts_(o, "}");
}

int pc_Web_StatusJson(pc_Alloc *alloc, void *ud, pc_GrpcBuf *out, const pc_GrpcStatus *st) {
  Out o = {alloc, ud, out, 1};
  size_t len0 = out->len;
  char code[16];
  snprintf(code, sizeof code, "%d", (int)st->code);
  puts_(&o, "{\"code\":");
  puts_(&o, code);
  puts_(&o, ",\"message\":");
  put_json_string(&o, st->message ? st->message : "", st->message ? st->message_len : 0);
  puts_(&o, ",\"details\":[]}");
  if (!o.ok) out->len = len0;
  return o.ok;
}

int pc_Connect_ErrorJson(pc_Alloc *alloc, void *ud, pc_GrpcBuf *out, const pc_GrpcStatus *st) {
  Out o = {alloc, ud, out, 1};
  size_t len0 = out->len;
  put_error(&o, st);
  if (!o.ok) out->len = len0;
  return o.ok;
}

int pc_Connect_EndStream(pc_Alloc *alloc, void *ud, pc_GrpcBuf *out, const pc_GrpcStatus *st,
                         const pc_GrpcPair *md, size_t n) {
  Out o = {alloc, ud, out, 1};
  size_t len0 = out->len;
  size_t start = begin_envelope(&o, 0x02);
  puts_(&o, "{");
  int comma = 0;
  if (st->code != kPc_Code_Ok) {
    puts_(&o, "\"error\":");
    put_error(&o, st);
    comma = 1;
  }
  if (n > 0) {
    puts_(&o, comma ? ",\"metadata\":{" : "\"metadata\":{");
    int first = 1;
    for (size_t i = 0; i < n; i++) {
      size_t j = 0; /* a key listed before was written with all its values */
      while (j < i &&
             !(md[j].key_len == md[i].key_len && memcmp(md[j].key, md[i].key, md[i].key_len) == 0))
        j++;
      if (j < i) continue;
      puts_(&o, first ? "" : ",");
      first = 0;
      put_json_string(&o, md[i].key, md[i].key_len);
      puts_(&o, ":[");
      int bin = pc_Grpc_IsBinKey(md[i].key, md[i].key_len);
      for (size_t k = i; k < n; k++) {
        if (md[k].key_len != md[i].key_len || memcmp(md[k].key, md[i].key, md[i].key_len) != 0)
          continue;
        puts_(&o, k == i ? "" : ",");
        if (bin) {
          puts_(&o, "\"");
          put_base64(&o, md[k].value, md[k].value_len, 0);
          puts_(&o, "\"");
        } else {
          put_json_string(&o, md[k].value, md[k].value_len);
        }
      }
      puts_(&o, "]");
    }
    puts_(&o, "}");
  }
  puts_(&o, "}");
  end_envelope(&o, start);
  if (!o.ok) out->len = len0;
  return o.ok;
}

/* -- the client's direction: Connect's JSON read back ----------------------- */

/* A cursor over JSON text; strings are unescaped into 'arena'. */
typedef struct {
  const char *p, *end;
  pc_Arena *arena;
  pc_Error *err;
  int depth;
} JsonIn;

enum { kJsonMaxDepth = 64 };

static void json_ws(JsonIn *j) {
  while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}

static int json_fail(JsonIn *j, const char *what, const char *start) {
  pc_Error_Set(j->err, "%s at offset %ld", what, (long)(j->p - start));
  return 0;
}

/* Whether the next character (after blanks) is 'c'; takes it if so. */
static int json_eat(JsonIn *j, char c) {
  json_ws(j);
  if (j->p < j->end && *j->p == c) {
    j->p++;
    return 1;
  }
  return 0;
}

static int hex4(const char *p, unsigned *v) {
  *v = 0;
  for (int i = 0; i < 4; i++) {
    char c = p[i];
    unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                 : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                 : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                        : 16u;
    if (d > 15) return 0;
    *v = *v << 4 | d;
  }
  return 1;
}

static size_t put_utf8(unsigned cp, char *o) {
  if (cp < 0x80) {
    o[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    o[0] = (char)(0xC0 | cp >> 6);
    o[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (char)(0xE0 | cp >> 12);
    o[1] = (char)(0x80 | (cp >> 6 & 0x3F));
    o[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (char)(0xF0 | cp >> 18);
  o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
  o[2] = (char)(0x80 | (cp >> 6 & 0x3F));
  o[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* A string (the cursor at its '"'): '*out' unescaped, NUL-terminated, in
 * the arena ('out' NULL: checked and passed over). */
static int json_string(JsonIn *j, const char *start, char **out, size_t *outn) {
  json_ws(j);
  if (j->p >= j->end || *j->p != '"') return json_fail(j, "expected a string", start);
  const char *q = ++j->p;
  while (q < j->end && *q != '"') q += *q == '\\' && q + 1 < j->end ? 2 : 1;
  if (q >= j->end) return json_fail(j, "unterminated string", start);
  size_t cap = (size_t)(q - j->p);
  char *o = out ? pc_Arena_Malloc(j->arena, cap + 1) : NULL;
  if (out && o == NULL) return json_fail(j, "out of memory", start);
  size_t n = 0;
  while (j->p < q) {
    unsigned char c = (unsigned char)*j->p++;
    if (c < 0x20) return json_fail(j, "control character in a string", start);
    if (c != '\\') {
      if (o) o[n] = (char)c;
      n++;
      continue;
    }
    char e = *j->p++;
    char one = 0;
    switch (e) {
    case '"':
    case '\\':
    case '/': one = e; break;
    case 'b': one = '\b'; break;
    case 'f': one = '\f'; break;
    case 'n': one = '\n'; break;
    case 'r': one = '\r'; break;
    case 't': one = '\t'; break;
    default: break;
    }
    if (one) {
      if (o) o[n] = one;
      n++;
      continue;
    }
    unsigned cp, lo;
    if (e != 'u' || q - j->p < 4 || !hex4(j->p, &cp)) return json_fail(j, "bad escape", start);
    j->p += 4;
    if (cp >= 0xD800 && cp < 0xDC00 && q - j->p >= 6 && j->p[0] == '\\' && j->p[1] == 'u' &&
        hex4(j->p + 2, &lo) && lo >= 0xDC00 && lo < 0xE000) {
      cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
      j->p += 6;
    }
    /* six escaped characters make at most four bytes: room enough */
    char tmp[4];
    size_t k = put_utf8(cp, tmp);
    if (o) memcpy(o + n, tmp, k);
    n += k;
  }
  j->p = q + 1;
  if (o) {
    o[n] = '\0';
    *out = o;
    *outn = n;
  }
  return 1;
}

static int json_skip(JsonIn *j, const char *start);

/* An object's members: 'member' is called with each key, the cursor at
 * its value, and must consume the value. */
typedef int JsonMemberFn(JsonIn *j, const char *start, const char *key, size_t keyn, void *ud);

static int json_object(JsonIn *j, const char *start, JsonMemberFn *member, void *ud) {
  if (!json_eat(j, '{')) return json_fail(j, "expected an object", start);
  if (++j->depth > kJsonMaxDepth) return json_fail(j, "nesting too deep", start);
  if (!json_eat(j, '}')) {
    do {
      char *k = NULL;
      size_t kn = 0;
      if (!json_string(j, start, &k, &kn)) return 0;
      if (!json_eat(j, ':')) return json_fail(j, "expected ':'", start);
      if (!(member ? member(j, start, k, kn, ud) : json_skip(j, start))) return 0;
    } while (json_eat(j, ','));
    if (!json_eat(j, '}')) return json_fail(j, "expected ',' or '}'", start);
  }
  j->depth--;
  return 1;
}

/* An array's elements, each through 'element' (which consumes it). */
typedef int JsonElementFn(JsonIn *j, const char *start, void *ud);

static int json_array(JsonIn *j, const char *start, JsonElementFn *element, void *ud) {
  if (!json_eat(j, '[')) return json_fail(j, "expected an array", start);
  if (++j->depth > kJsonMaxDepth) return json_fail(j, "nesting too deep", start);
  if (!json_eat(j, ']')) {
    do {
      if (!(element ? element(j, start, ud) : json_skip(j, start))) return 0;
    } while (json_eat(j, ','));
    if (!json_eat(j, ']')) return json_fail(j, "expected ',' or ']'", start);
  }
  j->depth--;
  return 1;
}

static int json_skip(JsonIn *j, const char *start) {
  json_ws(j);
  if (j->p >= j->end) return json_fail(j, "unexpected end", start);
  char c = *j->p;
  if (c == '{') return json_object(j, start, NULL, NULL);
  if (c == '[') return json_array(j, start, NULL, NULL);
  if (c == '"') return json_string(j, start, NULL, NULL);
  const char *s = j->p;
  while (j->p < j->end && (strchr("+-.0123456789eE", *j->p) || (*j->p >= 'a' && *j->p <= 'z')))
    j->p++;
  size_t n = (size_t)(j->p - s);
  if (n == 0) return json_fail(j, "unexpected character", start);
  if ((c >= 'a' && c <= 'z') && !(n == 4 && (!memcmp(s, "true", 4) || !memcmp(s, "null", 4))) &&
      !(n == 5 && !memcmp(s, "false", 5)))
    return json_fail(j, "unexpected word", start);
  return 1;
}

static int key_eq(const char *k, size_t kn, const char *lit) {
  return kn == strlen(lit) && memcmp(k, lit, kn) == 0;
}

/* One detail as read: its type and its value, decoded. */
typedef struct Detail {
  const char *type;
  size_t type_len;
  unsigned char *value;
  size_t value_len;
  struct Detail *next;
} Detail;

typedef struct {
  pc_ConnectError *out;
  Detail *first, **tail;
  Detail *cur;
} ErrorIn;

static int detail_member(JsonIn *j, const char *start, const char *k, size_t kn, void *ud) {
  Detail *d = ud;
  if (key_eq(k, kn, "type")) {
    char *t;
    if (!json_string(j, start, &t, &d->type_len)) return 0;
    d->type = t;
    return 1;
  }
  if (key_eq(k, kn, "value")) {
    char *v;
    size_t vn;
    if (!json_string(j, start, &v, &vn)) return 0;
    d->value = pc_Arena_Malloc(j->arena, vn / 4 * 3 + 4);
    if (d->value == NULL) return json_fail(j, "out of memory", start);
    /* Connect writes it unpadded; padded is taken too, and URL-safe */
    for (size_t i = 0; i < vn; i++) {
      if (v[i] == '-') v[i] = '+';
      if (v[i] == '_') v[i] = '/';
    }
    d->value_len = pc_Grpc_Base64Decode(v, vn, d->value);
    if (d->value_len == (size_t)-1) return json_fail(j, "a detail's value is not base64", start);
    return 1;
  }
  return json_skip(j, start);
}

static int detail_element(JsonIn *j, const char *start, void *ud) {
  ErrorIn *e = ud;
  Detail *d = pc_Arena_Malloc(j->arena, sizeof *d);
  if (d == NULL) return json_fail(j, "out of memory", start);
  memset(d, 0, sizeof *d);
  d->type = "";
  if (!json_object(j, start, detail_member, d)) return 0;
  *e->tail = d;
  e->tail = &d->next;
  return 1;
}

static pc_Code code_named(const char *k, size_t kn) {
  for (int c = 0; c < PC_CODE_COUNT; c++)
    if (key_eq(k, kn, pc_Connect_CodeName((pc_Code)c))) return (pc_Code)c;
  return kPc_Code_Unknown;
}

static int error_member(JsonIn *j, const char *start, const char *k, size_t kn, void *ud) {
  ErrorIn *e = ud;
  if (key_eq(k, kn, "code")) {
    char *c;
    size_t cn;
    if (!json_string(j, start, &c, &cn)) return 0;
    e->out->code = code_named(c, cn);
    return 1;
  }
  if (key_eq(k, kn, "message")) {
    char *m;
    if (!json_string(j, start, &m, &e->out->message_len)) return 0;
    e->out->message = m;
    return 1;
  }
  if (key_eq(k, kn, "details")) return json_array(j, start, detail_element, e);
  return json_skip(j, start);
}

static size_t varint_len(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    n++;
  }
  return n;
}

static unsigned char *put_varint(unsigned char *o, uint64_t v) {
  while (v >= 0x80) {
    *o++ = (unsigned char)(v | 0x80);
    v >>= 7;
  }
  *o++ = (unsigned char)v;
  return o;
}

static unsigned char *put_bytes(unsigned char *o, unsigned field, const void *p, size_t n) {
  o = put_varint(o, (uint64_t)field << 3 | 2);
  o = put_varint(o, n);
  if (n) memcpy(o, p, n);
  return o + n;
}

#define TYPE_PREFIX "type.googleapis.com/"

/* The google.rpc.Status of the error read, when it had details. */
static int build_status(JsonIn *j, ErrorIn *e) {
  if (e->first == NULL) return 1;
  size_t pre = strlen(TYPE_PREFIX), total = 0;
  pc_ConnectError *o = e->out;
  if (o->code != kPc_Code_Ok) total += 1 + varint_len((uint64_t)o->code);
  if (o->message_len) total += 1 + varint_len(o->message_len) + o->message_len;
  for (Detail *d = e->first; d; d = d->next) {
    size_t url = pre + d->type_len;
    size_t any = 1 + varint_len(url) + url + 1 + varint_len(d->value_len) + d->value_len;
    total += 1 + varint_len(any) + any;
  }
  unsigned char *b = pc_Arena_Malloc(j->arena, total + 1), *w = b;
  if (b == NULL) return json_fail(j, "out of memory", j->p);
  if (o->code != kPc_Code_Ok) {
    *w++ = 0x08;
    w = put_varint(w, (uint64_t)o->code);
  }
  if (o->message_len) w = put_bytes(w, 2, o->message, o->message_len);
  for (Detail *d = e->first; d; d = d->next) {
    size_t url = pre + d->type_len;
    size_t any = 1 + varint_len(url) + url + 1 + varint_len(d->value_len) + d->value_len;
    w = put_varint(w, 3 << 3 | 2);
    w = put_varint(w, any);
    w = put_varint(w, 1 << 3 | 2);
    w = put_varint(w, url);
    memcpy(w, TYPE_PREFIX, pre);
    memcpy(w + pre, d->type, d->type_len);
    w += url;
    w = put_bytes(w, 2, d->value, d->value_len);
  }
  *w = 0;
  o->details = (const char *)b;
  o->details_len = total;
  return 1;
}

static int read_error(JsonIn *j, const char *start, pc_ConnectError *out) {
  ErrorIn e = {out, NULL, NULL, NULL};
  e.tail = &e.first;
  out->present = 1;
  out->message = "";
  out->message_len = 0;
  out->details = "";
  out->details_len = 0;
  return json_object(j, start, error_member, &e) && build_status(j, &e);
}

static int json_done(JsonIn *j, const char *start) {
  json_ws(j);
  return j->p == j->end || json_fail(j, "text after the JSON value", start);
}

int pc_Connect_ParseError(pc_Arena *arena, const char *json, size_t len, pc_ConnectError *out,
                          pc_Error *err) {
  JsonIn j = {json, json + len, arena, err, 0};
  return read_error(&j, json, out) && json_done(&j, json);
}

typedef struct {
  pc_ConnectError *out;
  pc_ConnectPairFn *pair;
  void *ud;
  const char *key;
  size_t key_len;
} EndIn;

static int md_value(JsonIn *j, const char *start, void *ud) {
  EndIn *e = ud;
  char *v;
  size_t vn;
  if (!json_string(j, start, &v, &vn)) return 0;
  if (!e->pair(e->ud, e->key, e->key_len, v, vn)) return json_fail(j, "metadata refused", start);
  return 1;
}

static int md_member(JsonIn *j, const char *start, const char *k, size_t kn, void *ud) {
  EndIn *e = ud;
  char *lk = pc_Arena_StrDup(j->arena, k, kn);
  if (lk == NULL) return json_fail(j, "out of memory", start);
  for (size_t i = 0; i < kn; i++) lk[i] = (char)lower((unsigned char)lk[i]);
  e->key = lk;
  e->key_len = kn;
  return json_array(j, start, md_value, e);
}

static int end_member(JsonIn *j, const char *start, const char *k, size_t kn, void *ud) {
  EndIn *e = ud;
  if (key_eq(k, kn, "error")) {
    json_ws(j);
    if (j->p < j->end && *j->p == 'n') return json_skip(j, start); /* null */
    return read_error(j, start, e->out);
  }
  if (key_eq(k, kn, "metadata")) {
    json_ws(j);
    if (j->p < j->end && *j->p == 'n') return json_skip(j, start);
    return json_object(j, start, md_member, e);
  }
  return json_skip(j, start);
}

int pc_Connect_ParseEndStream(pc_Arena *arena, const char *json, size_t len, pc_ConnectError *out,
                              pc_ConnectPairFn *pair, void *ud, pc_Error *err) {
  JsonIn j = {json, json + len, arena, err, 0};
  EndIn e = {out, pair, ud, NULL, 0};
  out->present = 0;
  return json_object(&j, json, end_member, &e) && json_done(&j, json);
}

int pc_Web_ParseGrpcWebTrailers(pc_Arena *arena, const char *body, size_t len,
                                pc_ConnectPairFn *pair, void *ud, pc_Error *err) {
  size_t i = 0;
  while (i < len) {
    size_t eol = i;
    while (eol < len && body[eol] != '\n') eol++;
    size_t end = eol;
    if (end > i && body[end - 1] == '\r') end--;
    if (end > i) {
      size_t colon = i;
      while (colon < end && body[colon] != ':') colon++;
      if (colon == end || colon == i) {
        pc_Error_Set(err, "gRPC-Web trailer line at offset %zu has no key or no ':'", i);
        return 0;
      }
      char *k = pc_Arena_StrDup(arena, body + i, colon - i);
      if (k == NULL) {
        pc_Error_Set(err, "out of memory");
        return 0;
      }
      size_t kn = colon - i;
      while (kn > 0 && (k[kn - 1] == ' ' || k[kn - 1] == '\t')) kn--;
      for (size_t x = 0; x < kn; x++) k[x] = (char)lower((unsigned char)k[x]);
      size_t v = colon + 1, ve = end;
      while (v < ve && (body[v] == ' ' || body[v] == '\t')) v++;
      while (ve > v && (body[ve - 1] == ' ' || body[ve - 1] == '\t')) ve--;
      if (!pair(ud, k, kn, body + v, ve - v)) {
        pc_Error_Set(err, "gRPC-Web trailer '%.*s' refused", (int)(kn > 32 ? 32 : kn), k);
        return 0;
      }
    }
    i = eol + 1;
  }
  return 1;
}

size_t pc_Connect_FormatTimeout(double seconds, char *out) {
  double ms = seconds * 1000.0;
  unsigned long long v = ms >= 9999999999.0 ? 9999999999ULL : (unsigned long long)ms;
  if ((double)v < ms && v < 9999999999ULL) v++;
  if (v == 0) v = 1;
  return (size_t)snprintf(out, 12, "%llu", v);
}
