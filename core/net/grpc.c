/* gRPC's pure parts shared by the engine and the channel (see grpc.h):
 * grpc-timeout, percent and base64 coding, metadata checks. */
#include "net/grpc.h"

#define ZLIB_CONST /* next_in is const */
#include <zlib.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>

size_t pc_Grpc_FormatTimeout(double seconds, char *out) {
  static const struct {
    double per_second;
    char unit;
  } units[] = {{1e9, 'n'}, {1e6, 'u'}, {1e3, 'm'}, {1, 'S'}, {1.0 / 60, 'M'}, {1.0 / 3600, 'H'}};
  const double max = 99999999;
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
    double v = seconds * units[i].per_second;
    if (v <= max) {
      /* Round up: a grpc-timeout is never shorter than the time left. */
      long long n = (long long)v;
      if ((double)n < v) n++;
      if (n < 1) n = 1;
      /* at most 8 digits and the unit: by hand, snprintf costs some 900
       * instructions on every call's headers */
      char digits[8];
      size_t k = 0;
      do {
        digits[k++] = (char)('0' + n % 10);
        n /= 10;
      } while (n > 0);
      for (size_t j = 0; j < k; j++) out[j] = digits[k - 1 - j];
      out[k] = units[i].unit;
      out[k + 1] = '\0';
      return k + 1;
    }
  }
  return (size_t)snprintf(out, 10, "%lldH", (long long)max);
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

size_t pc_Grpc_PercentDecode(char *s, size_t len) {
  size_t o = 0;
  for (size_t i = 0; i < len; i++) {
    int hi, lo;
    if (s[i] == '%' && i + 2 < len && (hi = hexval(s[i + 1])) >= 0 &&
        (lo = hexval(s[i + 2])) >= 0) {
      s[o++] = (char)(hi * 16 + lo);
      i += 2;
    } else {
      s[o++] = s[i];
    }
  }
  return o;
}

static const char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int pc_Grpc_Base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

size_t pc_Grpc_Base64Decode(const char *in, size_t len, unsigned char *out) {
  while (len > 0 && in[len - 1] == '=') len--;
  if (len % 4 == 1) return (size_t)-1;
  size_t o = 0;
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < len; i++) {
    int v = pc_Grpc_Base64Value(in[i]);
    if (v < 0) return (size_t)-1;
    acc = (acc << 6) | (uint32_t)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (unsigned char)(acc >> bits);
    }
  }
  return o;
}

size_t pc_Grpc_Base64Encode(const unsigned char *in, size_t len, char *out) {
  size_t o = 0, i = 0;
  for (; i + 2 < len; i += 3) {
    uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
    out[o++] = kB64[v >> 18];
    out[o++] = kB64[(v >> 12) & 63];
    out[o++] = kB64[(v >> 6) & 63];
    out[o++] = kB64[v & 63];
  }
  if (i < len) {
    uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < len ? (uint32_t)in[i + 1] << 8 : 0);
    out[o++] = kB64[v >> 18];
    out[o++] = kB64[(v >> 12) & 63];
    if (i + 1 < len) out[o++] = kB64[(v >> 6) & 63];
  }
  return o;
}

int pc_Grpc_IsBinKey(const char *k, size_t n) {
  return n >= 4 && memcmp(k + n - 4, "-bin", 4) == 0;
}

static int key_is(const pc_GrpcPair *p, const char *k) {
  size_t n = strlen(k);
  return p->key_len == n && memcmp(p->key, k, n) == 0;
}

int pc_GrpcPair_Check(const pc_GrpcPair *p, pc_Error *err) {
  if (p->key_len == 0) {
    pc_Error_Set(err, "metadata key is empty");
    return 0;
  }
  for (size_t i = 0; i < p->key_len; i++) {
    char c = p->key[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.')) {
      pc_Error_Set(err, "metadata key '%.*s': only lowercase letters, digits, '_', '-', '.'",
                   (int)(p->key_len > 64 ? 64 : p->key_len), p->key);
      return 0;
    }
  }
  if ((p->key_len >= 5 && memcmp(p->key, "grpc-", 5) == 0) || key_is(p, "content-type") ||
      key_is(p, "te") || key_is(p, "user-agent")) {
    pc_Error_Set(err, "metadata key '%.*s' is reserved for the transport",
                 (int)(p->key_len > 64 ? 64 : p->key_len), p->key);
    return 0;
  }
  if (!pc_Grpc_IsBinKey(p->key, p->key_len)) {
    for (size_t i = 0; i < p->value_len; i++) {
      unsigned char c = (unsigned char)p->value[i];
      if (c < 0x20 || c > 0x7e) {
        pc_Error_Set(err,
                     "metadata '%.*s': value must be printable ASCII (use a '-bin' key for bytes)",
                     (int)(p->key_len > 64 ? 64 : p->key_len), p->key);
        return 0;
      }
    }
  }
  return 1;
}

int pc_Grpc_PathCheck(const char *path, pc_Error *err) {
  if (path == NULL || path[0] != '/') {
    pc_Error_Set(err, "method path '%.200s': expected /package.Service/Method", path ? path : "");
    return 0;
  }
  for (const char *p = path; *p; p++) {
    if ((unsigned char)*p <= ' ' || *p == 0x7f || *p == '?' || *p == '#' || *p == '%') {
      pc_Error_Set(err, "method path '%.200s': unexpected character", path);
      return 0;
    }
  }
  return 1;
}

double pc_Grpc_ParseTimeout(const char *s, size_t len) {
  if (len < 2 || len > 9) return -1;
  double v = 0;
  for (size_t i = 0; i + 1 < len; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  switch (s[len - 1]) {
  case 'n': return v / 1e9;
  case 'u': return v / 1e6;
  case 'm': return v / 1e3;
  case 'S': return v;
  case 'M': return v * 60;
  case 'H': return v * 3600;
  default: return -1;
  }
}

size_t pc_Grpc_PercentEncode(const char *s, size_t len, char *out) {
  static const char hex[] = "0123456789ABCDEF";
  size_t o = 0;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c < 0x20 || c > 0x7e || c == '%') {
      out[o++] = '%';
      out[o++] = hex[c >> 4];
      out[o++] = hex[c & 15];
    } else {
      out[o++] = (char)c;
    }
  }
  out[o] = '\0';
  return o;
}

#define BLOCK_HEAD 16

void *pc_Grpc_BlockRealloc(pc_Alloc *alloc, void *ud, void *ptr, size_t n) {
  size_t old = 0;
  unsigned char *p = NULL;
  if (ptr != NULL) {
    p = (unsigned char *)ptr - BLOCK_HEAD;
    memcpy(&old, p, sizeof old);
  }
  if (n == 0) {
    if (p) alloc(ud, p, old, 0);
    return NULL;
  }
  if (n > SIZE_MAX - BLOCK_HEAD) return NULL;
  n += BLOCK_HEAD;
  unsigned char *q = alloc(ud, p, old, n);
  if (q == NULL) return NULL;
  memcpy(q, &n, sizeof n);
  return q + BLOCK_HEAD;
}

size_t pc_Grpc_BlockSize(const void *ptr) {
  size_t n;
  memcpy(&n, (const unsigned char *)ptr - BLOCK_HEAD, sizeof n);
  return n - BLOCK_HEAD;
}

typedef struct {
  pc_Alloc *alloc;
  void *ud;
} ZMem;

static voidpf z_alloc(voidpf opaque, uInt items, uInt size) {
  ZMem *m = opaque;
  if (size != 0 && items > SIZE_MAX / size) return NULL;
  return pc_Grpc_BlockRealloc(m->alloc, m->ud, NULL, (size_t)items * size);
}

static void z_free(voidpf opaque, voidpf ptr) {
  ZMem *m = opaque;
  if (ptr) pc_Grpc_BlockRealloc(m->alloc, m->ud, ptr, 0);
}

/* A zlib stream allocating through 'm' (which must outlive it). */
static void z_stream_init(z_stream *z, ZMem *m) {
  memset(z, 0, sizeof *z);
  z->zalloc = z_alloc;
  z->zfree = z_free;
  z->opaque = m;
}

size_t pc_Grpc_Gunzip(pc_Alloc *alloc, void *ud, const void *in, size_t len, size_t max, char **buf,
                      size_t *cap) {
  ZMem m = {alloc, ud};
  z_stream z;
  z_stream_init(&z, &m);
  if (len > UINT32_MAX) return (size_t)-1;
  if (inflateInit2(&z, 15 + 16) != Z_OK) return (size_t)-3;
  z.next_in = (const Bytef *)in;
  z.avail_in = (uInt)len;
  size_t out = 0;
  int r = Z_OK;
  while (r == Z_OK) {
    if (out > max) break;
    if (*cap - out < 1024) {
      size_t ncap = *cap ? *cap * 2 : len * 2 + 1024;
      if (ncap > max + 1024) ncap = max + 1024; /* more than *cap: out <= max */
      char *p = alloc(ud, *buf, *cap, ncap);
      if (p == NULL) {
        r = Z_MEM_ERROR;
        break;
      }
      *buf = p;
      *cap = ncap;
    }
    z.next_out = (Bytef *)*buf + out;
    z.avail_out = (uInt)(*cap - out > UINT32_MAX ? UINT32_MAX : *cap - out);
    uInt before = z.avail_out;
    r = inflate(&z, Z_NO_FLUSH);
    out += before - z.avail_out;
    if (r == Z_BUF_ERROR && z.avail_out > 0) break;
    if (r == Z_BUF_ERROR) r = Z_OK;
  }
  int trailing = z.avail_in > 0;
  inflateEnd(&z);
  if (out > max) return (size_t)-2;
  if (r == Z_MEM_ERROR) return (size_t)-3;
  if (r != Z_STREAM_END || trailing) return (size_t)-1;
  return out;
}

int pc_GrpcBuf_Reserve(pc_Alloc *alloc, void *ud, pc_GrpcBuf *b, size_t extra) {
  if (b->cap - b->len >= extra) return 1;
  if (extra > SIZE_MAX / 2 - b->len) return 0;
  size_t cap = b->cap ? b->cap : 256;
  while (cap - b->len < extra) cap *= 2;
  char *p = alloc(ud, b->p, b->cap, cap);
  if (p == NULL) return 0;
  b->p = p;
  b->cap = cap;
  return 1;
}

void pc_GrpcBuf_Free(pc_Alloc *alloc, void *ud, pc_GrpcBuf *b) {
  if (b->p) alloc(ud, b->p, b->cap, 0);
  b->p = NULL;
  b->len = b->cap = 0;
}

int pc_Grpc_FrameMessage(pc_Alloc *alloc, void *ud, pc_GrpcBuf *out, const void *msg, size_t len,
                         int gzip) {
  if (len > UINT32_MAX) return 0;
  size_t start = out->len;
  if (!gzip) {
    if (!pc_GrpcBuf_Reserve(alloc, ud, out, 5 + len)) return 0;
    out->p[start] = 0;
    if (len) memcpy(out->p + start + 5, msg, len);
  } else {
    ZMem m = {alloc, ud};
    z_stream z;
    z_stream_init(&z, &m);
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      return 0;
    size_t bound = deflateBound(&z, (uLong)len);
    if (!pc_GrpcBuf_Reserve(alloc, ud, out, 5 + bound)) {
      deflateEnd(&z);
      return 0;
    }
    z.next_in = (const Bytef *)msg;
    z.avail_in = (uInt)len;
    z.next_out = (Bytef *)out->p + start + 5;
    z.avail_out = (uInt)bound;
    int r = deflate(&z, Z_FINISH);
    size_t n = z.total_out;
    deflateEnd(&z);
    if (r != Z_STREAM_END || n > UINT32_MAX) return 0;
    out->p[start] = 1;
    len = n;
  }
  unsigned char *h = (unsigned char *)out->p + start;
  h[1] = (unsigned char)(len >> 24);
  h[2] = (unsigned char)(len >> 16);
  h[3] = (unsigned char)(len >> 8);
  h[4] = (unsigned char)len;
  out->len = start + 5 + len;
  return 1;
}
