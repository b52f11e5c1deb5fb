/* CORS and Connect's GET query, pure functions (see web_http.h). */
#include "net/web_http.h"

#include <string.h>

/* -- CORS ------------------------------------------------------------------ */

const char *pc_WebCors_AllowOrigin(const pc_WebCors *cors, const char *origin, size_t n) {
  if (cors == NULL || cors->origins == NULL || origin == NULL) return NULL;
  int any = 0;
  for (const char *p = cors->origins; *p;) {
    const char *e = strchr(p, '\n');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == 1 && p[0] == '*') any = 1;
    if (len == n && memcmp(p, origin, n) == 0) return origin;
    if (e == NULL) break;
    p = e + 1;
  }
  if (!any) return NULL;
  return cors->credentials ? origin : "*";
}

const char *pc_WebCors_AllowMethods(const pc_WebCors *cors, pc_Arena *a) {
  const char *more = cors->methods;
  size_t base = sizeof PC_WEB_CORS_METHODS - 1, more_len = more ? strlen(more) : 0;
  char *v = pc_Arena_Malloc(a, base + (more ? 2 + more_len : 0) + 1), *w = v;
  if (v == NULL) return NULL;
  memcpy(w, PC_WEB_CORS_METHODS, base);
  w += base;
  if (more) {
    memcpy(w, ", ", 2);
    memcpy(w + 2, more, more_len);
    w += 2 + more_len;
  }
  *w = '\0';
  return v;
}

/* Whether 'c' may be in a field name (RFC 9110's tchar). */
static int tchar(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static int lower(unsigned char c) {
  return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

const char *pc_WebCors_AllowHeaders(const pc_WebCors *cors, const char *requested, size_t n,
                                    pc_Arena *a) {
  const char *more = cors->headers, *prefix = cors->header_prefix;
  size_t more_len = more ? strlen(more) : 0, plen = prefix ? strlen(prefix) : 0;
  if (prefix == NULL || requested == NULL) n = 0;
  /* each name kept costs at most its bytes and ", " */
  size_t cap = sizeof PC_WEB_CORS_HEADERS + (more ? 2 + more_len : 0) + 2 * n + 2;
  char *v = pc_Arena_Malloc(a, cap), *w = v;
  if (v == NULL) return NULL;
  memcpy(w, PC_WEB_CORS_HEADERS, sizeof PC_WEB_CORS_HEADERS - 1);
  w += sizeof PC_WEB_CORS_HEADERS - 1;
  if (more) {
    memcpy(w, ", ", 2);
    memcpy(w + 2, more, more_len);
    w += 2 + more_len;
  }
  for (size_t i = 0; i < n;) {
    while (i < n && (requested[i] == ' ' || requested[i] == '\t' || requested[i] == ',')) i++;
    size_t start = i;
    while (i < n && requested[i] != ',') i++;
    size_t end = i;
    while (end > start && (requested[end - 1] == ' ' || requested[end - 1] == '\t')) end--;
    size_t len = end - start, k = 0;
    if (len <= plen) continue;
    while (k < plen &&
           lower((unsigned char)requested[start + k]) == lower((unsigned char)prefix[k]))
      k++;
    if (k < plen) continue;
    while (k < len && tchar((unsigned char)requested[start + k])) k++;
    if (k < len) continue;
    memcpy(w, ", ", 2);
    memcpy(w + 2, requested + start, len);
    w += 2 + len;
  }
  *w = '\0';
  return v;
}

/* -- Connect GET ----------------------------------------------------------- */

static int hexval(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Percent-decodes the 'n' bytes at 'p' into 'out' (room for n), '+' as a
 * space; returns the length, or (size_t)-1 at a '%' not followed by two
 * hex digits. */
static size_t unescape(const char *p, size_t n, char *out) {
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    if (p[i] == '%') {
      int hi = i + 2 < n ? hexval((unsigned char)p[i + 1]) : -1;
      int lo = i + 2 < n ? hexval((unsigned char)p[i + 2]) : -1;
      if (hi < 0 || lo < 0) return (size_t)-1;
      out[o++] = (char)(hi << 4 | lo);
      i += 2;
    } else {
      out[o++] = p[i];
      if (p[i] == '+') out[o - 1] = ' ';
    }
  }
  return o;
}

/* Whether the key 'k' ('kn' bytes) is 'name'. */
static int param(const char *k, size_t kn, const char *name) {
  return kn == strlen(name) && memcmp(k, name, kn) == 0;
}

/* A short query name or value percent-decoded into 'buf' (SHORT_MAX
 * bytes): '*p' and '*n' then point at it. One longer, or malformed, stays
 * as it came (it matches no name, and a value is named in the error). */
#define SHORT_MAX 32
static void decode_short(const char **p, size_t *n, char *buf) {
  if (*n > SHORT_MAX || memchr(*p, '%', *n) == NULL) return;
  size_t m = unescape(*p, *n, buf);
  if (m == (size_t)-1) return;
  *p = buf;
  *n = m;
}

int pc_Connect_ParseGet(pc_Arena *arena, const char *q, size_t len, size_t max, pc_ConnectGet *out,
                        int *too_big, pc_Error *err) {
  memset(out, 0, sizeof *out);
  *too_big = 0;
  const char *enc = NULL, *msg = NULL, *b64 = NULL, *comp = NULL, *ver = NULL;
  size_t encn = 0, msgn = 0, b64n = 0, compn = 0, vern = 0;
  char encb[SHORT_MAX], b64b[SHORT_MAX], compb[SHORT_MAX], verb[SHORT_MAX];
  for (size_t i = 0; i < len;) {
    size_t j = i;
    while (j < len && q[j] != '&') j++;
    size_t eq = i;
    while (eq < j && q[eq] != '=') eq++;
    const char *k = q + i, *v = eq < j ? q + eq + 1 : q + j;
    size_t kn = eq - i, vn = eq < j ? j - eq - 1 : 0;
    /* names decoded as Go's url.ParseQuery does; the first of a repeated
     * parameter wins, as connect-go's Query().Get */
    char kb[SHORT_MAX];
    decode_short(&k, &kn, kb);
    if (param(k, kn, "encoding") && !enc) {
      decode_short(&v, &vn, encb);
      enc = v;
      encn = vn;
    } else if (param(k, kn, "message") && !msg) {
      msg = v;
      msgn = vn;
    } else if (param(k, kn, "base64") && !b64) {
      decode_short(&v, &vn, b64b);
      b64 = v;
      b64n = vn;
    } else if (param(k, kn, "compression") && !comp) {
      decode_short(&v, &vn, compb);
      comp = v;
      compn = vn;
    } else if (param(k, kn, "connect") && !ver) {
      decode_short(&v, &vn, verb);
      ver = v;
      vern = vn;
    }
    i = j + 1;
  }
  if (ver && !(vern == 2 && memcmp(ver, "v1", 2) == 0)) {
    pc_Error_Set(err, "query parameter 'connect' must be v1, got '%.*s'",
                 (int)(vern > 20 ? 20 : vern), ver);
    return 0;
  }
  if (enc == NULL) {
    pc_Error_Set(err, "query parameter 'encoding' is missing (proto or json)");
    return 0;
  }
  if (encn == 5 && memcmp(enc, "proto", 5) == 0)
    out->codec = kPc_WebCodec_Proto;
  else if (encn == 4 && memcmp(enc, "json", 4) == 0)
    out->codec = kPc_WebCodec_Json;
  else {
    pc_Error_Set(err, "query parameter 'encoding' must be proto or json, got '%.*s'",
                 (int)(encn > 20 ? 20 : encn), enc);
    return 0;
  }
  if (comp && compn > 0) {
    if (compn == 4 && memcmp(comp, "gzip", 4) == 0)
      out->compression = "gzip";
    else if (compn == 8 && memcmp(comp, "identity", 8) == 0)
      out->compression = "identity";
    else {
      pc_Error_Set(err, "query parameter 'compression' must be gzip or identity, got '%.*s'",
                   (int)(compn > 20 ? 20 : compn), comp);
      return 0;
    }
  }
  int base64 = 0;
  if (b64) {
    if (b64n == 1 && b64[0] == '1')
      base64 = 1;
    else if (!(b64n == 1 && b64[0] == '0') && b64n != 0) {
      pc_Error_Set(err, "query parameter 'base64' must be 1 or 0, got '%.*s'",
                   (int)(b64n > 20 ? 20 : b64n), b64);
      return 0;
    }
  }
  if (msg == NULL) {
    pc_Error_Set(err, "query parameter 'message' is missing");
    return 0;
  }
  char *buf = pc_Arena_Malloc(arena, msgn + 1);
  if (buf == NULL) {
    pc_Error_Set(err, "out of memory reading the query");
    return 0;
  }
  size_t n = unescape(msg, msgn, buf);
  if (n == (size_t)-1) {
    pc_Error_Set(err, "query parameter 'message' has a '%%' not followed by two hex digits");
    return 0;
  }
  if (base64) {
    for (size_t i = 0; i < n; i++) {
      if (buf[i] == '-')
        buf[i] = '+';
      else if (buf[i] == '_')
        buf[i] = '/';
    }
    size_t m = pc_Grpc_Base64Decode(buf, n, (unsigned char *)buf);
    if (m == (size_t)-1) {
      pc_Error_Set(err, "query parameter 'message' is not base64url (base64=1)");
      return 0;
    }
    n = m;
  }
  if (n > max) {
    *too_big = 1;
    pc_Error_Set(err, "request message of %zu bytes exceeds the limit of %zu bytes", n, max);
    return 0;
  }
  out->message = buf;
  out->message_len = n;
  return 1;
}
