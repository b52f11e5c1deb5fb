/* gRPC's pure parts shared by the engine and the channel (see grpc.h):
 * grpc-timeout, percent and base64 coding, metadata checks. */
#include "net/grpc.h"

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
      return (size_t)snprintf(out, 10, "%lld%c", n, units[i].unit);
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

static int b64val(char c) {
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
    int v = b64val(in[i]);
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
