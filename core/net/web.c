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
  if (same(ct, plus, "application/grpc")) return kPc_WebProtocol_Grpc;
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
  default: return "";
  }
}

/* -- base64 ---------------------------------------------------------------- */

size_t pc_WebBase64_Decode(pc_WebBase64 *b, const char *in, size_t len, unsigned char *out,
                           size_t *at) {
  size_t o = 0;
  for (size_t i = 0; i < len; i++) {
    int c = (unsigned char)in[i];
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
