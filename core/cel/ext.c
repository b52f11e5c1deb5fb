/* protovalidate's CEL functions (isNan, isInf, isEmail, isHostname, isIp,
 * isIpPrefix, isUri, isUriRef, isHostAndPort, unique, getField), written
 * after protovalidate-es's (the runtime the differential tests compare
 * with), and the strings extension protovalidate's environment has
 * (format, charAt, indexOf, lastIndexOf, lowerAscii, upperAscii, replace,
 * split, substring, trim, join, strings.quote), indexing strings by code
 * point as cel-spec does. */
#include "cel/cel_internal.h"

#include "base/hash.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* -- A cursor over ASCII grammars ------------------------------------------- */

typedef struct {
  const char *s;
  size_t l, i;
} Cur;

static int at(const Cur *c, char ch) {
  return c->i < c->l && c->s[c->i] == ch;
}
static int take(Cur *c, char ch) {
  if (!at(c, ch)) return 0;
  c->i++;
  return 1;
}
static int is_digit(int ch) {
  return ch >= '0' && ch <= '9';
}
static int is_alpha(int ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
}
static int is_hex(int ch) {
  return is_digit(ch) || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
}
static int digit(Cur *c) {
  if (c->i < c->l && is_digit((unsigned char)c->s[c->i])) {
    c->i++;
    return 1;
  }
  return 0;
}
static int hexdig(Cur *c) {
  if (c->i < c->l && is_hex((unsigned char)c->s[c->i])) {
    c->i++;
    return 1;
  }
  return 0;
}
static int alpha(Cur *c) {
  if (c->i < c->l && is_alpha((unsigned char)c->s[c->i])) {
    c->i++;
    return 1;
  }
  return 0;
}

/* A decimal number of the 'n' digits at 's' without a leading zero, up to
 * 'max'; -1 when it is not one. */
static long small_number(const char *s, size_t n, long max) {
  if (n == 0 || (n > 1 && s[0] == '0')) return -1;
  long v = 0;
  for (size_t k = 0; k < n; k++) {
    v = v * 10 + (s[k] - '0');
    if (v > max) return -1;
  }
  return v;
}

/* -- IP addresses ------------------------------------------------------------ */

typedef struct {
  Cur c;
  uint32_t octets[4];
  int noct;
  int prefix;
} Ip4;

static void ip4_init(Ip4 *p, const char *s, size_t n) {
  memset(p, 0, sizeof *p);
  p->c.s = s;
  p->c.l = n;
}

static int dec_octet(Ip4 *p) {
  size_t start = p->c.i;
  while (digit(&p->c))
    if (p->c.i - start > 3) return 0;
  long v = small_number(p->c.s + start, p->c.i - start, 255);
  if (v < 0) return 0;
  if (p->noct < 4) p->octets[p->noct] = (uint32_t)v;
  p->noct++;
  return 1;
}

static int ip4_part(Ip4 *p) {
  size_t start = p->c.i;
  if (dec_octet(p) && take(&p->c, '.') && dec_octet(p) && take(&p->c, '.') && dec_octet(p) &&
      take(&p->c, '.') && dec_octet(p))
    return 1;
  p->c.i = start;
  return 0;
}

static int prefix_length(Cur *c, int max_digits, long max, int *out) {
  size_t start = c->i;
  while (digit(c))
    if ((int)(c->i - start) > max_digits) return 0;
  long v = small_number(c->s + start, c->i - start, max);
  if (v < 0) return 0;
  *out = (int)v;
  return 1;
}

static int ip4_address(Ip4 *p) {
  return ip4_part(p) && p->c.i == p->c.l;
}

static int ip4_prefix(Ip4 *p) {
  return ip4_part(p) && take(&p->c, '/') && prefix_length(&p->c, 2, 32, &p->prefix) &&
         p->c.i == p->c.l;
}

static uint32_t ip4_bits(const Ip4 *p) {
  if (p->noct != 4) return 0;
  return p->octets[0] << 24 | p->octets[1] << 16 | p->octets[2] << 8 | p->octets[3];
}

static int ip4_prefix_only(const Ip4 *p) {
  uint32_t bits = ip4_bits(p);
  uint32_t mask = p->prefix == 0 ? 0 : p->prefix >= 32 ? 0xFFFFFFFFu : ~(0xFFFFFFFFu >> p->prefix);
  return (bits & mask) == bits;
}

typedef struct {
  Cur c;
  uint32_t pieces[16];
  int npieces;
  int dc_at, dc_seen;
  int dotted_ok;
  Ip4 dotted;
  int zone;
  int prefix;
} Ip6;

static void ip6_init(Ip6 *p, const char *s, size_t n) {
  memset(p, 0, sizeof *p);
  p->c.s = s;
  p->c.l = n;
  p->dc_at = -1;
}

/* 1: a piece, 0: no hex digit here, -1: more than four */
static int h16(Ip6 *p) {
  size_t start = p->c.i;
  while (hexdig(&p->c)) {
  }
  size_t n = p->c.i - start;
  if (n == 0) return 0;
  if (n > 4) return -1;
  uint32_t v = 0;
  for (size_t k = 0; k < n; k++) {
    int ch = (unsigned char)p->c.s[start + k];
    v = v * 16 + (uint32_t)(is_digit(ch) ? ch - '0' : (ch | 0x20) - 'a' + 10);
  }
  if (p->npieces >= 16) return -1;
  p->pieces[p->npieces++] = v;
  return 1;
}

static int ip6_dotted(Ip6 *p, size_t *start, size_t *end) {
  size_t s = p->c.i;
  while (digit(&p->c) || take(&p->c, '.')) {
  }
  if (p->c.i - s >= 7) {
    *start = s;
    *end = p->c.i;
    return 1;
  }
  p->c.i = s;
  return 0;
}

static int ip6_zone(Ip6 *p) {
  size_t start = p->c.i;
  if (take(&p->c, '%') && p->c.l - p->c.i > 0) {
    p->c.i = p->c.l; /* any non-empty zone */
    p->zone = 1;
    return 1;
  }
  p->c.i = start;
  p->zone = 0;
  return 0;
}

static int ip6_part(Ip6 *p) {
  while (p->c.i < p->c.l) {
    size_t ds, de;
    if ((p->dc_seen || p->npieces == 6) && ip6_dotted(p, &ds, &de)) {
      ip4_init(&p->dotted, p->c.s + ds, de - ds);
      if (ip4_address(&p->dotted)) {
        p->dotted_ok = 1;
        return 1;
      }
      return 0;
    }
    int r = h16(p);
    if (r < 0) return 0;
    if (r > 0) continue;
    if (take(&p->c, ':')) {
      if (take(&p->c, ':')) {
        if (p->dc_seen) return 0;
        p->dc_seen = 1;
        p->dc_at = p->npieces;
        if (take(&p->c, ':')) return 0;
      } else if (p->c.i == 1 || p->c.i == p->c.l) {
        return 0; /* a single colon at either end */
      }
      continue;
    }
    if (at(&p->c, '%') && !ip6_zone(p)) return 0;
    break;
  }
  if (p->dc_seen) return p->npieces < 8;
  return p->npieces == 8;
}

static int ip6_address(Ip6 *p) {
  return ip6_part(p) && p->c.i == p->c.l;
}

static int ip6_prefix(Ip6 *p) {
  return ip6_part(p) && !p->zone && take(&p->c, '/') && prefix_length(&p->c, 3, 128, &p->prefix) &&
         p->c.i == p->c.l;
}

static int ip6_prefix_only(const Ip6 *p) {
  uint32_t p16[24];
  int n = 0;
  for (int k = 0; k < p->npieces; k++) p16[n++] = p->pieces[k];
  if (p->dotted_ok) {
    uint32_t d = ip4_bits(&p->dotted);
    p16[n++] = d >> 16;
    p16[n++] = d & 0xFFFF;
  }
  if (p->dc_seen) {
    while (n < 8) {
      memmove(p16 + p->dc_at + 1, p16 + p->dc_at, (size_t)(n - p->dc_at) * sizeof *p16);
      p16[p->dc_at] = 0;
      n++;
    }
  }
  uint32_t words[4] = {0, 0, 0, 0};
  if (n == 8)
    for (size_t k = 0; k < 4; k++) words[k] = p16[2 * k] << 16 | p16[2 * k + 1];
  for (int k = 0; k < 4; k++) {
    int len = p->prefix - 32 * k;
    uint32_t mask = len >= 32 ? 0xFFFFFFFFu : len <= 0 ? 0 : ~(0xFFFFFFFFu >> len);
    if ((words[k] & mask) != words[k]) return 0;
  }
  return 1;
}

/* version 0: either */
int pc_Cel_IsIp(const char *s, size_t n, int64_t version) {
  if (version == 6) {
    Ip6 p;
    ip6_init(&p, s, n);
    return ip6_address(&p);
  }
  if (version == 4) {
    Ip4 p;
    ip4_init(&p, s, n);
    return ip4_address(&p);
  }
  if (version == 0) return pc_Cel_IsIp(s, n, 4) || pc_Cel_IsIp(s, n, 6);
  return 0;
}

int pc_Cel_IsIpPrefix(const char *s, size_t n, int64_t version, int strict) {
  if (version == 6) {
    Ip6 p;
    ip6_init(&p, s, n);
    return ip6_prefix(&p) && (!strict || ip6_prefix_only(&p));
  }
  if (version == 4) {
    Ip4 p;
    ip4_init(&p, s, n);
    return ip4_prefix(&p) && (!strict || ip4_prefix_only(&p));
  }
  if (version == 0) return pc_Cel_IsIpPrefix(s, n, 6, strict) || pc_Cel_IsIpPrefix(s, n, 4, strict);
  return 0;
}

/* -- Host names, ports, e-mail ----------------------------------------------- */

int pc_Cel_IsHostname(const char *s, size_t n) {
  if (n > 253) return 0;
  if (n > 0 && s[n - 1] == '.') n--;
  int all_digits = 0;
  size_t start = 0;
  for (size_t i = 0; i <= n; i++) {
    if (i < n && s[i] != '.') continue;
    const char *part = s + start;
    size_t l = i - start;
    if (l == 0 || l > 63 || part[0] == '-' || part[l - 1] == '-') return 0;
    all_digits = 1;
    for (size_t k = 0; k < l; k++) {
      int ch = (unsigned char)part[k];
      if (!is_alpha(ch) && !is_digit(ch) && ch != '-') return 0;
      all_digits = all_digits && is_digit(ch);
    }
    start = i + 1;
  }
  return !all_digits;
}

static int is_port(const char *s, size_t n) {
  if (n == 0) return 0;
  for (size_t i = 0; i < n; i++)
    if (!is_digit((unsigned char)s[i])) return 0;
  if (n > 1 && s[0] == '0') return 0;
  if (n > 5) return 0;
  long v = 0;
  for (size_t i = 0; i < n; i++) v = v * 10 + (s[i] - '0');
  return v <= 65535;
}

static long last_index(const char *s, size_t n, char ch) {
  for (size_t i = n; i > 0; i--)
    if (s[i - 1] == ch) return (long)(i - 1);
  return -1;
}

int pc_Cel_IsHostAndPort(const char *s, size_t n, int port_required) {
  if (n == 0) return 0;
  long split = last_index(s, n, ':');
  if (s[0] == '[') {
    long end = last_index(s, n, ']');
    if (end + 1 == (long)n) return !port_required && pc_Cel_IsIp(s + 1, (size_t)(end - 1), 6);
    if (end >= 0 && end + 1 == split)
      return pc_Cel_IsIp(s + 1, (size_t)(end - 1), 6) &&
             is_port(s + split + 1, n - (size_t)split - 1);
    return 0;
  }
  if (split < 0) return !port_required && (pc_Cel_IsHostname(s, n) || pc_Cel_IsIp(s, n, 4));
  return (pc_Cel_IsHostname(s, (size_t)split) || pc_Cel_IsIp(s, (size_t)split, 4)) &&
         is_port(s + split + 1, n - (size_t)split - 1);
}

/* The HTML standard's "valid e-mail address":
 * ^[a-zA-Z0-9.!#$%&'*+/=?^_`{|}~-]+@label(\.label)*$ with labels of one to
 * 63 letters, digits and inner hyphens. */
int pc_Cel_IsEmail(const char *s, size_t n) {
  static const char kLocal[] = ".!#$%&'*+/=?^_`{|}~-";
  size_t i = 0;
  while (i < n && (is_alpha((unsigned char)s[i]) || is_digit((unsigned char)s[i]) ||
                   (s[i] != '\0' && strchr(kLocal, s[i]) != NULL)))
    i++;
  if (i == 0 || i >= n || s[i] != '@') return 0;
  i++;
  for (;;) {
    size_t start = i;
    while (i < n && (is_alpha((unsigned char)s[i]) || is_digit((unsigned char)s[i]) || s[i] == '-'))
      i++;
    size_t l = i - start;
    if (l == 0 || l > 63 || s[start] == '-' || s[i - 1] == '-') return 0;
    if (i == n) return 1;
    if (s[i] != '.') return 0;
    i++;
  }
}

/* -- URIs (RFC 3986, zone identifiers of RFC 6874) --------------------------- */

typedef struct {
  Cur c;
  int pct_found;
} Uri;

static int unreserved(Cur *c) {
  return alpha(c) || digit(c) || take(c, '-') || take(c, '_') || take(c, '.') || take(c, '~');
}

static int sub_delims(Cur *c) {
  if (c->i < c->l && c->s[c->i] != '\0' && strchr("!$&'()*+,;=", c->s[c->i]) != NULL) {
    c->i++;
    return 1;
  }
  return 0;
}

static int pct_encoded(Uri *u) {
  size_t start = u->c.i;
  if (take(&u->c, '%') && hexdig(&u->c) && hexdig(&u->c)) {
    u->pct_found = 1;
    return 1;
  }
  u->c.i = start;
  return 0;
}

static int pchar(Uri *u) {
  return unreserved(&u->c) || pct_encoded(u) || sub_delims(&u->c) || take(&u->c, ':') ||
         take(&u->c, '@');
}

static int authority_end(const Uri *u) {
  return u->c.i >= u->c.l || at(&u->c, '?') || at(&u->c, '#') || at(&u->c, '/');
}

static int path_end(const Uri *u) {
  return u->c.i >= u->c.l || at(&u->c, '?') || at(&u->c, '#');
}

static int uri_scheme(Uri *u) {
  size_t start = u->c.i;
  if (alpha(&u->c)) {
    while (alpha(&u->c) || digit(&u->c) || take(&u->c, '+') || take(&u->c, '-') ||
           take(&u->c, '.')) {
    }
    if (at(&u->c, ':')) return 1;
  }
  u->c.i = start;
  return 0;
}

static int userinfo(Uri *u) {
  size_t start = u->c.i;
  for (;;) {
    if (unreserved(&u->c) || pct_encoded(u) || sub_delims(&u->c) || take(&u->c, ':')) continue;
    if (at(&u->c, '@')) return 1;
    u->c.i = start;
    return 0;
  }
}

static int reg_name(Uri *u) {
  size_t start = u->c.i;
  for (;;) {
    if (unreserved(&u->c) || pct_encoded(u) || sub_delims(&u->c)) continue;
    if (at(&u->c, ':') || authority_end(u)) return 1;
    u->c.i = start;
    return 0;
  }
}

static int ipv6_address(Uri *u) {
  size_t start = u->c.i;
  while (hexdig(&u->c) || take(&u->c, ':')) {
  }
  if (pc_Cel_IsIp(u->c.s + start, u->c.i - start, 6)) return 1;
  u->c.i = start;
  return 0;
}

static int uri_zone(Uri *u) {
  size_t start = u->c.i;
  while (unreserved(&u->c) || pct_encoded(u)) {
  }
  if (u->c.i > start) return 1;
  u->c.i = start;
  return 0;
}

static int ipv6_addrz(Uri *u) {
  size_t start = u->c.i;
  if (ipv6_address(u) && take(&u->c, '%') && take(&u->c, '2') && take(&u->c, '5') && uri_zone(u))
    return 1;
  u->c.i = start;
  return 0;
}

static int ipv_future(Uri *u) {
  size_t start = u->c.i;
  if (take(&u->c, 'v') && hexdig(&u->c)) {
    while (hexdig(&u->c)) {
    }
    if (take(&u->c, '.')) {
      int j = 0;
      while (unreserved(&u->c) || sub_delims(&u->c) || take(&u->c, ':')) j++;
      if (j >= 1) return 1;
    }
  }
  u->c.i = start;
  return 0;
}

static int ip_literal(Uri *u) {
  size_t start = u->c.i;
  if (take(&u->c, '[')) {
    size_t j = u->c.i;
    if (ipv6_address(u) && take(&u->c, ']')) return 1;
    u->c.i = j;
    if (ipv6_addrz(u) && take(&u->c, ']')) return 1;
    u->c.i = j;
    if (ipv_future(u) && take(&u->c, ']')) return 1;
  }
  u->c.i = start;
  return 0;
}

/* A UTF-8 check fed a byte at a time: 'need' continuation bytes to come,
 * the next in lo..hi. */
typedef struct {
  int need;
  unsigned char lo, hi;
} U8;

static int u8_feed(U8 *u, unsigned char b) {
  if (u->need == 0) {
    u->lo = 0x80;
    u->hi = 0xBF;
    if (b < 0x80) return 1;
    if (b >= 0xC2 && b <= 0xDF)
      u->need = 1;
    else if (b >= 0xE0 && b <= 0xEF)
      u->need = 2;
    else if (b >= 0xF0 && b <= 0xF4)
      u->need = 3;
    else
      return 0;
    if (b == 0xE0) u->lo = 0xA0;
    if (b == 0xED) u->hi = 0x9F;
    if (b == 0xF0) u->lo = 0x90;
    if (b == 0xF4) u->hi = 0x8F;
    return 1;
  }
  if (b < u->lo || b > u->hi) return 0;
  u->need--;
  u->lo = 0x80;
  u->hi = 0xBF;
  return 1;
}

/* Percent-encoding in a host must encode UTF-8 (as decodeURIComponent
 * checks). */
static int pct_utf8(const char *s, size_t n) {
  U8 u = {0, 0x80, 0xBF};
  for (size_t i = 0; i < n; i++) {
    unsigned char b = (unsigned char)s[i];
    if (b == '%' && i + 2 < n) {
      int h = is_digit((unsigned char)s[i + 1]) ? s[i + 1] - '0' : ((s[i + 1] | 0x20) - 'a' + 10);
      int l = is_digit((unsigned char)s[i + 2]) ? s[i + 2] - '0' : ((s[i + 2] | 0x20) - 'a' + 10);
      b = (unsigned char)(h * 16 + l);
      i += 2;
    }
    if (!u8_feed(&u, b)) return 0;
  }
  return u.need == 0;
}

static int host(Uri *u) {
  size_t start = u->c.i;
  u->pct_found = 0;
  if ((at(&u->c, '[') && ip_literal(u)) || reg_name(u)) {
    if (u->pct_found && !pct_utf8(u->c.s + start, u->c.i - start)) return 0;
    return 1;
  }
  return 0;
}

static int port(Uri *u) {
  size_t start = u->c.i;
  for (;;) {
    if (digit(&u->c)) continue;
    if (authority_end(u)) return 1;
    u->c.i = start;
    return 0;
  }
}

static int authority(Uri *u) {
  size_t start = u->c.i;
  if (userinfo(u) && !take(&u->c, '@')) {
    u->c.i = start;
    return 0;
  }
  if (!host(u)) {
    u->c.i = start;
    return 0;
  }
  if (take(&u->c, ':') && !port(u)) {
    u->c.i = start;
    return 0;
  }
  if (!authority_end(u)) {
    u->c.i = start;
    return 0;
  }
  return 1;
}

static void segment(Uri *u) {
  while (pchar(u)) {
  }
}

static int segment_nz(Uri *u) {
  if (!pchar(u)) return 0;
  segment(u);
  return 1;
}

static int segment_nz_nc(Uri *u) {
  size_t start = u->c.i;
  while (unreserved(&u->c) || pct_encoded(u) || sub_delims(&u->c) || take(&u->c, '@')) {
  }
  return u->c.i > start;
}

static int path_abempty(Uri *u) {
  size_t start = u->c.i;
  while (take(&u->c, '/')) segment(u);
  if (path_end(u)) return 1;
  u->c.i = start;
  return 0;
}

static int path_absolute(Uri *u) {
  size_t start = u->c.i;
  if (take(&u->c, '/')) {
    if (segment_nz(u))
      while (take(&u->c, '/')) segment(u);
    if (path_end(u)) return 1;
  }
  u->c.i = start;
  return 0;
}

static int path_rest(Uri *u, size_t start) {
  while (take(&u->c, '/')) segment(u);
  if (path_end(u)) return 1;
  u->c.i = start;
  return 0;
}

static int path_noscheme(Uri *u) {
  size_t start = u->c.i;
  if (segment_nz_nc(u)) return path_rest(u, start);
  u->c.i = start;
  return 0;
}

static int path_rootless(Uri *u) {
  size_t start = u->c.i;
  if (segment_nz(u)) return path_rest(u, start);
  u->c.i = start;
  return 0;
}

static int query_or_fragment(Uri *u, int query) {
  size_t start = u->c.i;
  for (;;) {
    if (pchar(u) || take(&u->c, '/') || take(&u->c, '?')) continue;
    if ((query && at(&u->c, '#')) || u->c.i == u->c.l) return 1;
    u->c.i = start;
    return 0;
  }
}

static int hier_or_relative_part(Uri *u, int relative) {
  size_t start = u->c.i;
  if (u->c.l - u->c.i >= 2 && u->c.s[u->c.i] == '/' && u->c.s[u->c.i + 1] == '/') {
    u->c.i += 2; /* "//" authority path-abempty */
    if (authority(u) && path_abempty(u)) return 1;
  }
  u->c.i = start;
  return path_absolute(u) || (relative ? path_noscheme(u) : path_rootless(u)) || path_end(u);
}

static int uri(Uri *u) {
  size_t start = u->c.i;
  if (!(uri_scheme(u) && take(&u->c, ':') && hier_or_relative_part(u, 0))) {
    u->c.i = start;
    return 0;
  }
  if (take(&u->c, '?') && !query_or_fragment(u, 1)) return 0;
  if (take(&u->c, '#') && !query_or_fragment(u, 0)) return 0;
  if (u->c.i != u->c.l) {
    u->c.i = start;
    return 0;
  }
  return 1;
}

static int relative_ref(Uri *u) {
  size_t start = u->c.i;
  if (!hier_or_relative_part(u, 1)) return 0;
  if ((take(&u->c, '?') && !query_or_fragment(u, 1)) ||
      (take(&u->c, '#') && !query_or_fragment(u, 0)) || u->c.i != u->c.l) {
    u->c.i = start;
    return 0;
  }
  return 1;
}

int pc_Cel_IsUri(const char *s, size_t n, int ref) {
  Uri u;
  memset(&u, 0, sizeof u);
  u.c.s = s;
  u.c.l = n;
  if (uri(&u)) return 1;
  return ref && relative_ref(&u);
}

/* -- unique() ------------------------------------------------------------------ */

static uint64_t hash_value(const pc_CelValue *v) {
  uint64_t h = (uint64_t)v->kind * 0x9E3779B97F4A7C15ULL;
  switch (v->kind) {
  case kPc_Cel_Bool: return pc_Hash_Mix64(h ^ (uint64_t)v->v.b);
  case kPc_Cel_Int: return pc_Hash_Mix64(h ^ (uint64_t)v->v.i);
  case kPc_Cel_Uint: return pc_Hash_Mix64(h ^ v->v.u);
  case kPc_Cel_Double: {
    double d = v->v.d == 0 ? 0.0 : v->v.d; /* -0 and 0 collide */
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    return pc_Hash_Mix64(h ^ bits);
  }
  default: {
    for (size_t i = 0; i < v->v.s.size; i++)
      h = (h ^ (unsigned char)v->v.s.data[i]) * 1099511628211ULL;
    return pc_Hash_Mix64(h);
  }
  }
}

/* Same kind and value (1 and 1u differ, as for protovalidate-es). */
static int same(const pc_CelValue *a, const pc_CelValue *b) {
  if (a->kind != b->kind) return 0;
  switch (a->kind) {
  case kPc_Cel_Bool: return a->v.b == b->v.b;
  case kPc_Cel_Int: return a->v.i == b->v.i;
  case kPc_Cel_Uint: return a->v.u == b->v.u;
  case kPc_Cel_Double: return a->v.d == b->v.d;
  default:
    return a->v.s.size == b->v.s.size &&
           (a->v.s.size == 0 || memcmp(a->v.s.data, b->v.s.data, a->v.s.size) == 0);
  }
}

static int unique(cel_E *e, const cel_Node *n, const pc_CelValue *a, pc_CelValue *out) {
  if (a->kind != kPc_Cel_List) return cel_no_overload(e, n, a, 1);
  const pc_CelList *l = a->v.list;
  size_t cap = 8;
  while (cap < 2 * l->size) cap *= 2;
  if (cel_steps(e, l->size, n->pos) != kCel_Ok) return kCel_Fatal;
  pc_CelValue *seen = cel_alloc(e, cap * sizeof *seen, n->pos);
  if (seen == NULL) return kCel_Fatal;
  memset(seen, 0, cap * sizeof *seen); /* kind Unbound: free */
  /* seeded with where the table is: a list cannot pick items of one slot */
  uint64_t seed = pc_Hash_Mix64((uint64_t)(uintptr_t)seen);
  for (size_t i = 0; i < l->size; i++) {
    pc_CelValue v;
    int rc = cel_list_get(e, l, i, n->pos, &v);
    if (rc != kCel_Ok) return rc;
    switch (v.kind) {
    case kPc_Cel_Bool:
    case kPc_Cel_Int:
    case kPc_Cel_Uint:
    case kPc_Cel_String:
    case kPc_Cel_Bytes: break;
    case kPc_Cel_Double:
      if (isnan(v.v.d)) continue; /* every NaN is distinct */
      break;
    default:
      return cel_fail(e, n->pos, "no matching overload for 'unique' on a list of %s",
                      cel_type_name(&v));
    }
    if (v.kind == kPc_Cel_String || v.kind == kPc_Cel_Bytes) {
      if (cel_steps(e, v.v.s.size / 16, n->pos) != kCel_Ok) return kCel_Fatal;
    }
    size_t slot = pc_Hash_Mix64(hash_value(&v) ^ seed) & (cap - 1);
    while (seen[slot].kind != kPc_Cel_Unbound) {
      if (same(&seen[slot], &v)) {
        *out = cel_bool(0);
        return kCel_Ok;
      }
      /* each element compared is a step: no list probes unbounded */
      if (cel_steps(e, 1, n->pos) != kCel_Ok) return kCel_Fatal;
      slot = (slot + 1) & (cap - 1);
    }
    seen[slot] = v;
  }
  *out = cel_bool(1);
  return kCel_Ok;
}

/* -- Strings: code point positions ------------------------------------------------ */

/* The byte offset of code point 'k' (k <= count), or the size. */
static size_t cp_offset(const pc_StringView *s, int64_t k) {
  size_t i = 0;
  for (int64_t c = 0; c < k && i < s->size; c++) cel_utf8_next(s->data, s->size, &i);
  return i;
}

/* A code point boundary of a string as cel_utf8_next steps through it (so
 * as size() counts: a byte sequence that is not UTF-8 is a U+FFFD for each
 * maximal subpart) and its index. */
typedef struct {
  const pc_StringView *s;
  size_t i;
  int64_t k;
} Boundary;

/* To the first boundary at or after byte 'to'. */
static void boundary_reach(Boundary *b, size_t to) {
  while (b->i < to && b->i < b->s->size) {
    if ((unsigned char)b->s->data[b->i] < 0x80)
      b->i++;
    else
      cel_utf8_next(b->s->data, b->s->size, &b->i);
    b->k++;
  }
}

/* Whether byte 'p' of 's' is a boundary, in constant time: a byte that
 * is not a continuation byte starts a code point, and so does a
 * continuation byte unless the sequence of the last byte before it that is
 * not one (3 back at most: a sequence is 4 bytes at most) reaches past it. */
static int is_boundary(const pc_StringView *s, size_t p) {
  if (p == 0 || p >= s->size || ((unsigned char)s->data[p] & 0xC0) != 0x80) return 1;
  for (size_t q = p; q > 0 && p - q < 3;) {
    q--;
    if (((unsigned char)s->data[q] & 0xC0) != 0x80) {
      size_t end = q;
      cel_utf8_next(s->data, s->size, &end);
      return end <= p;
    }
  }
  return 1; /* stray continuation bytes: one code point each */
}

/* The steps of searching 'n' bytes for 'sub': a step per 16 bytes of
 * either (memmem is linear); refused_steps' for each match refused. */
static uint64_t search_steps(size_t n, const pc_StringView *sub) {
  return n / 16 + sub->size / 16;
}

/* The steps of a match refused as starting inside a code point: the
 * search begun again after it (a needle of 258 bytes matching inside each
 * code point of 'é...', charged as a scan, took 400 ns a step, 5 times a
 * scan's). */
static uint64_t refused_steps(const pc_StringView *sub) {
  return 1 + sub->size / 16;
}

/* To the next match of 'sub' that starts at a boundary, at or after b's:
 * 1, or 0 if none, -1 when the budget is reached. Linear in the string's
 * size (memmem, the boundaries walked once) but for the matches that start
 * inside a code point ('sub' starting with a continuation byte): each is a
 * search begun again (memmem's set-up is the needle's size), charged a
 * step and one per 16 bytes of 'sub' (refused_steps). */
static int boundary_find(cel_E *e, uint32_t pos, Boundary *b, const pc_StringView *sub) {
  while (b->i <= b->s->size) {
    size_t at = pc_Cel_Find(b->s->data + b->i, b->s->size - b->i, sub->data, sub->size);
    if (at == SIZE_MAX) return 0;
    size_t start = b->i + at;
    boundary_reach(b, start);
    if (b->i == start) return 1;
    if (cel_steps(e, refused_steps(sub), pos) != kCel_Ok) return -1;
  }
  return 0;
}

/* The bytes of the haystack a window of last_find reads, beyond the
 * needle's size. */
#define LAST_WINDOW 65536

/* The offset of the last match of 'sub' in s's first 'end' bytes that
 * starts at a boundary, or SIZE_MAX, in '*from': the first match of the
 * reversed needle in reversed copies of windows of the text, from its end
 * (glibc has no memrmem). A window is LAST_WINDOW bytes or the needle's
 * size, whichever is more, plus the needle's size less one (a match
 * across two windows), so the text is copied less than twice over and the
 * copies take that window, not the text (a copy of a 9 MB text for each
 * lastIndexOf of a rule reached the evaluation's 16 MB of bytes). */
static int last_find(cel_E *e, const cel_Node *n, const pc_StringView *s, size_t end,
                     const pc_StringView *sub, size_t *from) {
  size_t m = sub->size, w = m > LAST_WINDOW ? m : LAST_WINDOW;
  size_t room = w + m < end ? w + m : end; /* at most a window's bytes */
  *from = SIZE_MAX;
  if (m > end) return kCel_Ok;
  char *rsub = cel_alloc(e, m + room + 1, n->pos);
  if (rsub == NULL) return kCel_Fatal;
  char *rs = rsub + m;
  for (size_t i = 0; i < m; i++) rsub[i] = sub->data[m - 1 - i];
  for (size_t hi = end;;) { /* the window: bytes [lo, hi) */
    size_t lo = hi - m + 1 > w ? hi - (w + m - 1) : 0, len = hi - lo;
    for (size_t i = 0; i < len; i++) rs[i] = s->data[hi - 1 - i];
    for (size_t ri = 0; ri <= len;) {
      size_t at = pc_Cel_Find(rs + ri, len - ri, rsub, m);
      if (at == SIZE_MAX) break;
      size_t start = hi - (ri + at) - m; /* where the match starts */
      if (is_boundary(s, start)) {
        *from = start;
        return kCel_Ok;
      }
      if (cel_steps(e, refused_steps(sub), n->pos) != kCel_Ok) return kCel_Fatal;
      ri += at + 1; /* it starts inside a code point: an earlier one */
    }
    if (lo == 0) return kCel_Ok;
    hi = lo + m - 1; /* the next window ends where a match starting before lo may */
  }
}

static int index_error(cel_E *e, const cel_Node *n, int64_t i, size_t len) {
  return cel_fail(e, n->pos, "index %lld out of range [0, %zu)", (long long)i, len);
}

static int is_space(uint32_t cp) {
  static const uint32_t kSpaces[] = {0x20,   0x09,   0x0a,   0x0b,   0x0c,   0x0d,   0x85,
                                     0xa0,   0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004,
                                     0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a, 0x2028,
                                     0x2029, 0x202f, 0x205f, 0x3000};
  for (size_t i = 0; i < sizeof kSpaces / sizeof kSpaces[0]; i++)
    if (kSpaces[i] == cp) return 1;
  return 0;
}

/* -- format() ---------------------------------------------------------------------- */

static int fmt_error(cel_E *e, const cel_Node *n, const char *issue) {
  return cel_fail(e, n->pos, "invalid argument to function format: %s", issue);
}

/* An integer in base 2, 8 or 16 ('upper' for %X), a '-' before a negative
 * one. */
static int fmt_base(cel_E *e, cel_Buf *b, const cel_Node *n, int neg, uint64_t u, int base,
                    int upper) {
  char tmp[70];
  size_t k = sizeof tmp;
  const char *digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  do {
    tmp[--k] = digits[u % (uint64_t)base];
    u /= (uint64_t)base;
  } while (u != 0);
  if (neg) tmp[--k] = '-';
  return cel_buf_add(e, b, tmp + k, sizeof tmp - k, n->pos);
}

static int fmt_int(cel_E *e, cel_Buf *b, const cel_Node *n, const pc_CelValue *v, int base,
                   int upper) {
  if (v->kind == kPc_Cel_Int) {
    uint64_t mag = v->v.i < 0 ? 0 - (uint64_t)v->v.i : (uint64_t)v->v.i;
    return fmt_base(e, b, n, v->v.i < 0, mag, base, upper);
  }
  return fmt_base(e, b, n, 0, v->v.u, base, upper);
}

static int fmt_hex_bytes(cel_E *e, cel_Buf *b, const cel_Node *n, const pc_StringView *s,
                         int upper) {
  const char *digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  for (size_t i = 0; i < s->size; i++) {
    char two[2] = {digits[(unsigned char)s->data[i] >> 4], digits[(unsigned char)s->data[i] & 15]};
    if (cel_buf_add(e, b, two, 2, n->pos) != kCel_Ok) return kCel_Fatal;
  }
  return kCel_Ok;
}

static int fmt_clause(cel_E *e, cel_Buf *b, const cel_Node *n, char c, const pc_CelValue *v,
                      int precision) {
  char tmp[400];
  int len;
  int is_int = v->kind == kPc_Cel_Int || v->kind == kPc_Cel_Uint;
  switch (c) {
  case 'e':
  case 'f':
    if (v->kind == kPc_Cel_String) {
      const pc_StringView *s = &v->v.s;
      if ((s->size == 3 && memcmp(s->data, "NaN", 3) == 0) ||
          (s->size == 8 && memcmp(s->data, "Infinity", 8) == 0) ||
          (s->size == 9 && memcmp(s->data, "-Infinity", 9) == 0))
        return cel_buf_add(e, b, s->data, s->size, n->pos);
      return fmt_error(e, n, "invalid floating point value");
    }
    if (v->kind != kPc_Cel_Double)
      return fmt_error(e, n,
                       c == 'e' ? "scientific clause can only be used on doubles"
                                : "fixed-point clause can only be used on doubles");
    if (!isfinite(v->v.d))
      len = cel_double_text(v->v.d, tmp, sizeof tmp);
    else if (precision > 100)
      return fmt_error(e, n, "precision too large");
    else if (c == 'e')
      len = snprintf(tmp, sizeof tmp, "%.*e", precision, v->v.d);
    else {
      /* %f of a huge number is long: print into the context */
      int need = snprintf(NULL, 0, "%.*f", precision, v->v.d);
      char *big = cel_alloc(e, (size_t)need + 1, n->pos);
      if (big == NULL) return kCel_Fatal;
      snprintf(big, (size_t)need + 1, "%.*f", precision, v->v.d);
      if (strcmp(big, "-0") == 0 ||
          (strncmp(big, "-0.", 3) == 0 && strspn(big + 3, "0") == strlen(big + 3)))
        return cel_buf_add(e, b, big + 1, (size_t)need - 1, n->pos); /* Intl prints no -0 */
      return cel_buf_add(e, b, big, (size_t)need, n->pos);
    }
    return cel_buf_add(e, b, tmp, (size_t)len, n->pos);
  case 'b':
    if (v->kind == kPc_Cel_Bool) return cel_buf_add(e, b, v->v.b ? "1" : "0", 1, n->pos);
    if (!is_int) return fmt_error(e, n, "only integers and bools can be formatted as binary");
    return fmt_int(e, b, n, v, 2, 0);
  case 'o':
    if (!is_int) return fmt_error(e, n, "invalid integer value");
    return fmt_int(e, b, n, v, 8, 0);
  case 'd':
    if (is_int) return fmt_int(e, b, n, v, 10, 0);
    if (v->kind == kPc_Cel_Double && !isfinite(v->v.d)) {
      len = cel_double_text(v->v.d, tmp, sizeof tmp);
      return cel_buf_add(e, b, tmp, (size_t)len, n->pos);
    }
    return fmt_error(e, n, "invalid integer value");
  case 'x':
  case 'X':
    if (is_int) return fmt_int(e, b, n, v, 16, c == 'X');
    if (v->kind == kPc_Cel_String || v->kind == kPc_Cel_Bytes)
      return fmt_hex_bytes(e, b, n, &v->v.s, c == 'X');
    return fmt_error(e, n, "only integers, byte buffers, and strings can be formatted as hex");
  case 's': {
    if (v->kind == kPc_Cel_Message) return fmt_error(e, n, "invalid string value");
    return cel_format_value(e, b, v, n->pos, 0);
  }
  default: {
    char issue[96];
    snprintf(issue, sizeof issue,
             "could not parse formatting clause: unrecognized formatting clause: %c", c);
    return fmt_error(e, n, issue);
  }
  }
}

static int format(cel_E *e, const cel_Node *n, const pc_CelValue *a, pc_CelValue *out) {
  if (a[0].kind != kPc_Cel_String || a[1].kind != kPc_Cel_List) return cel_no_overload(e, n, a, 2);
  const char *s = a[0].v.s.data;
  size_t len = a[0].v.s.size, j = 0;
  const pc_CelList *args = a[1].v.list;
  cel_Buf b = {NULL, 0, 0};
  int rc;
  if ((rc = cel_buf_add(e, &b, "", 0, n->pos)) != kCel_Ok) return rc;
  for (size_t i = 0; i < len;) {
    size_t start = i;
    while (i < len && s[i] != '%') i++;
    if (i > start && (rc = cel_buf_add(e, &b, s + start, i - start, n->pos)) != kCel_Ok) return rc;
    if (i >= len) break;
    if (i + 1 >= len) return fmt_error(e, n, "invalid format string");
    char c = s[i + 1];
    i += 2;
    if (c == '%') {
      if ((rc = cel_buf_add(e, &b, "%", 1, n->pos)) != kCel_Ok) return rc;
      continue;
    }
    int precision = 6;
    if (c == '.') {
      precision = 0;
      while (i < len && s[i] >= '0' && s[i] <= '9') {
        if (precision < 100000) precision = precision * 10 + (s[i] - '0');
        i++;
      }
      if (i >= len) return fmt_error(e, n, "invalid format string");
      c = s[i++];
    }
    if (j >= args->size) return fmt_error(e, n, "too few arguments for format string");
    pc_CelValue v;
    if ((rc = cel_list_get(e, args, j++, n->pos, &v)) != kCel_Ok ||
        (rc = fmt_clause(e, &b, n, c, &v, precision)) != kCel_Ok)
      return rc;
  }
  if (j < args->size) return fmt_error(e, n, "too many arguments for format string");
  *out = cel_string(b.data, b.size);
  return kCel_Ok;
}

/* -- The other string functions ----------------------------------------------------- */

static int strings_fn(cel_E *e, const cel_Node *n, pc_CelValue *a, size_t nargs, pc_CelValue *out) {
  const pc_StringView *s = &a[0].v.s;
  int rc;
  if (n->fn == kCelFn_JOIN) {
    if (a[0].kind != kPc_Cel_List || (nargs == 2 && a[1].kind != kPc_Cel_String))
      return cel_no_overload(e, n, a, nargs);
    const pc_CelList *l = a[0].v.list;
    cel_Buf b = {NULL, 0, 0};
    if ((rc = cel_buf_add(e, &b, "", 0, n->pos)) != kCel_Ok) return rc;
    for (size_t i = 0; i < l->size; i++) {
      pc_CelValue x;
      if ((rc = cel_list_get(e, l, i, n->pos, &x)) != kCel_Ok) return rc;
      if (x.kind != kPc_Cel_String)
        return cel_fail(e, n->pos,
                        "invalid argument to function join: list contains non-string value");
      if ((i > 0 && nargs == 2 &&
           (rc = cel_buf_add(e, &b, a[1].v.s.data, a[1].v.s.size, n->pos)) != kCel_Ok) ||
          (rc = cel_buf_add(e, &b, x.v.s.data, x.v.s.size, n->pos)) != kCel_Ok)
        return rc;
    }
    *out = cel_string(b.data, b.size);
    return kCel_Ok;
  }
  if (a[0].kind != kPc_Cel_String) return cel_no_overload(e, n, a, nargs);
  if (cel_steps(e, s->size / 16, n->pos) != kCel_Ok) return kCel_Fatal;
  size_t count = cel_utf8_count(s->data, s->size);
  switch (n->fn) {
  case kCelFn_CHAR_AT: {
    if (a[1].kind != kPc_Cel_Int) return cel_no_overload(e, n, a, nargs);
    int64_t i = a[1].v.i;
    if (i < 0 || (uint64_t)i > count) return index_error(e, n, i, count);
    size_t from = cp_offset(s, i), to = cp_offset(s, i + 1);
    *out = cel_string(s->data + from, to - from);
    return kCel_Ok;
  }
  case kCelFn_INDEX_OF:
  case kCelFn_LAST_INDEX_OF: {
    if (a[1].kind != kPc_Cel_String || (nargs == 3 && a[2].kind != kPc_Cel_Int))
      return cel_no_overload(e, n, a, nargs);
    const pc_StringView *sub = &a[1].v.s;
    int last = n->fn == kCelFn_LAST_INDEX_OF;
    int64_t start = last ? (int64_t)count : 0;
    if (nargs == 3) {
      start = a[2].v.i;
      if (start < 0 || (uint64_t)start >= count) return index_error(e, n, start, count);
    }
    if (cel_steps(e, search_steps(s->size, sub), n->pos) != kCel_Ok) return kCel_Fatal;
    int64_t found = -1;
    if (!last) {
      Boundary b = {s, cp_offset(s, start), start};
      int r = boundary_find(e, n->pos, &b, sub);
      if (r < 0) return kCel_Fatal;
      if (r) found = b.k;
    } else {
      /* the last match starting at or before code point 'start': its end
         within 'start''s code point plus the needle */
      size_t lim = cp_offset(s, start), end = lim + sub->size < s->size ? lim + sub->size : s->size;
      size_t from;
      if ((rc = last_find(e, n, s, end, sub, &from)) != kCel_Ok) return rc;
      if (from != SIZE_MAX) { /* its index: the boundaries walked once */
        Boundary b = {s, 0, 0};
        boundary_reach(&b, from);
        found = b.k;
      }
    }
    *out = cel_int(found);
    return kCel_Ok;
  }
  case kCelFn_LOWER_ASCII:
  case kCelFn_UPPER_ASCII: {
    char *t = cel_new_string(e, s->size, n->pos);
    if (t == NULL) return kCel_Fatal;
    for (size_t i = 0; i < s->size; i++) {
      char ch = s->data[i];
      if (n->fn == kCelFn_LOWER_ASCII && ch >= 'A' && ch <= 'Z') ch = (char)(ch + 32);
      if (n->fn == kCelFn_UPPER_ASCII && ch >= 'a' && ch <= 'z') ch = (char)(ch - 32);
      t[i] = ch;
    }
    t[s->size] = '\0';
    *out = cel_string(t, s->size);
    return kCel_Ok;
  }
  case kCelFn_REPLACE: {
    if (a[1].kind != kPc_Cel_String || a[2].kind != kPc_Cel_String ||
        (nargs == 4 && a[3].kind != kPc_Cel_Int))
      return cel_no_overload(e, n, a, nargs);
    /* Go's strings.Replace: n < 0 all; an empty 'old' matches before each
       code point and at the end */
    const pc_StringView *old = &a[1].v.s, *rep = &a[2].v.s;
    int64_t limit = nargs == 4 ? a[3].v.i : -1;
    cel_Buf b = {NULL, 0, 0};
    if ((rc = cel_buf_add(e, &b, "", 0, n->pos)) != kCel_Ok) return rc;
    if (cel_steps(e, search_steps(s->size, old), n->pos) != kCel_Ok) return kCel_Fatal;
    Boundary at = {s, 0, 0}; /* its index unused */
    size_t copied = 0;
    int64_t done = 0;
    int r = 0;
    while ((limit < 0 || done < limit) && (r = boundary_find(e, n->pos, &at, old)) > 0) {
      if ((rc = cel_buf_add(e, &b, s->data + copied, at.i - copied, n->pos)) != kCel_Ok ||
          (rc = cel_buf_add(e, &b, rep->data, rep->size, n->pos)) != kCel_Ok)
        return rc;
      done++;
      copied = at.i + old->size;
      if (old->size > 0) {
        at.i = copied; /* the match's end starts the next search */
      } else if (at.i == s->size) {
        break;
      } else {
        boundary_reach(&at, at.i + 1); /* an empty 'old' matches before each code point */
      }
    }
    if (r < 0) return kCel_Fatal;
    if ((rc = cel_buf_add(e, &b, s->data + copied, s->size - copied, n->pos)) != kCel_Ok) return rc;
    *out = cel_string(b.data, b.size);
    return kCel_Ok;
  }
  case kCelFn_SPLIT: {
    if (a[1].kind != kPc_Cel_String || (nargs == 3 && a[2].kind != kPc_Cel_Int))
      return cel_no_overload(e, n, a, nargs);
    /* Go's strings.SplitN: n == 0 none, n < 0 all, else at most n parts */
    const pc_StringView *sep = &a[1].v.s;
    int64_t limit = nargs == 3 ? a[2].v.i : -1;
    size_t cap = sep->size == 0 ? count : 1;
    if (sep->size > 0) {
      if (cel_steps(e, 2 * search_steps(s->size, sep), n->pos) != kCel_Ok) return kCel_Fatal;
      Boundary at = {s, 0, 0}; /* its index unused */
      int r = 0;
      while ((limit < 0 || cap < (uint64_t)limit) && (r = boundary_find(e, n->pos, &at, sep)) > 0) {
        cap++;
        at.i += sep->size;
      }
      if (r < 0) return kCel_Fatal;
    }
    if (limit >= 0 && (uint64_t)limit < cap) cap = (size_t)limit;
    if (cel_check_size(e, cap, n->pos) != kCel_Ok) return kCel_Fatal;
    pc_CelValue *parts = cel_alloc(e, (cap ? cap : 1) * sizeof *parts, n->pos);
    if (parts == NULL) return kCel_Fatal;
    size_t np = 0;
    Boundary at = {s, 0, 0}; /* its index unused */
    while (np < cap) {
      size_t i = at.i;
      if (np + 1 == cap) {
        parts[np++] = cel_string(s->data + i, s->size - i);
        break;
      }
      if (sep->size == 0) {
        boundary_reach(&at, i + 1); /* a code point a part, as size() counts them */
        parts[np++] = cel_string(s->data + i, at.i - i);
        continue;
      }
      if (boundary_find(e, n->pos, &at, sep) < 0) return kCel_Fatal; /* found: cap counted them */
      parts[np++] = cel_string(s->data + i, at.i - i);
      at.i += sep->size;
    }
    return cel_new_list(e, parts, np, n->pos, out);
  }
  case kCelFn_SUBSTRING: {
    if (a[1].kind != kPc_Cel_Int || (nargs == 3 && a[2].kind != kPc_Cel_Int))
      return cel_no_overload(e, n, a, nargs);
    int64_t from = a[1].v.i, to = nargs == 3 ? a[2].v.i : (int64_t)count;
    if (from < 0 || (uint64_t)from > count) return index_error(e, n, from, count);
    if (to < 0 || (uint64_t)to > count) return index_error(e, n, to, count);
    if (from > to)
      return cel_fail(e, n->pos, "invalid argument to function substring: start > end");
    size_t x = cp_offset(s, from), y = cp_offset(s, to);
    *out = cel_string(s->data + x, y - x);
    return kCel_Ok;
  }
  case kCelFn_TRIM: {
    size_t i = 0, end = s->size;
    while (i < s->size) {
      size_t k = i;
      if (!is_space(cel_utf8_next(s->data, s->size, &k))) break;
      i = k;
    }
    while (end > i) {
      /* the last code point starts at the last byte that is not a
         continuation byte, if it reads from there to 'end'; else it is a
         U+FFFD (a stray continuation byte was trimmed as part of a space) */
      size_t k = end - 1;
      while (k > i && ((unsigned char)s->data[k] & 0xC0) == 0x80) k--;
      size_t probe = k;
      uint32_t cp = cel_utf8_next(s->data, end, &probe);
      if (probe != end || !is_space(cp)) break;
      end = k;
    }
    *out = cel_string(s->data + i, end - i);
    return kCel_Ok;
  }
  default: { /* strings.quote */
    static const char *const kEscapes[] = {"\\0", "\\a", "\\b", "\\t", "\\n", "\\v", "\\f", "\\r"};
    cel_Buf b = {NULL, 0, 0};
    if ((rc = cel_buf_add(e, &b, "\"", 1, n->pos)) != kCel_Ok) return rc;
    for (size_t i = 0; i < s->size; i++) {
      char ch = s->data[i];
      const char *esc = NULL;
      if (ch == 0)
        esc = kEscapes[0];
      else if (ch >= 7 && ch <= 13)
        esc = kEscapes[ch - 6];
      else if (ch == '"')
        esc = "\\\"";
      else if (ch == '\\')
        esc = "\\\\";
      if ((rc = esc != NULL ? cel_buf_add(e, &b, esc, strlen(esc), n->pos)
                            : cel_buf_add(e, &b, &ch, 1, n->pos)) != kCel_Ok)
        return rc;
    }
    if ((rc = cel_buf_add(e, &b, "\"", 1, n->pos)) != kCel_Ok) return rc;
    *out = cel_string(b.data, b.size);
    return kCel_Ok;
  }
  }
}

/* -- Dispatch -------------------------------------------------------------------------- */

static int is_string(const pc_CelValue *v) {
  return v->kind == kPc_Cel_String;
}

int cel_ext_call(cel_E *e, const cel_Node *n, pc_CelValue *a, size_t nargs, pc_CelValue *out) {
  const pc_StringView *s = &a[0].v.s;
  switch (n->fn) {
  case kCelFn_IS_NAN:
    if (a[0].kind != kPc_Cel_Double) return cel_no_overload(e, n, a, nargs);
    *out = cel_bool(isnan(a[0].v.d));
    return kCel_Ok;
  case kCelFn_IS_INF: {
    if (a[0].kind != kPc_Cel_Double || (nargs == 2 && a[1].kind != kPc_Cel_Int))
      return cel_no_overload(e, n, a, nargs);
    int64_t sign = nargs == 2 ? a[1].v.i : 0;
    double d = a[0].v.d;
    *out = cel_bool((sign >= 0 && isinf(d) && d > 0) || (sign <= 0 && isinf(d) && d < 0));
    return kCel_Ok;
  }
  case kCelFn_IS_EMAIL:
  case kCelFn_IS_HOSTNAME:
  case kCelFn_IS_URI:
  case kCelFn_IS_URI_REF:
    if (!is_string(&a[0])) return cel_no_overload(e, n, a, nargs);
    if (cel_steps(e, 1 + s->size / 16, n->pos) != kCel_Ok) return kCel_Fatal;
    if (n->fn == kCelFn_IS_EMAIL)
      *out = cel_bool(pc_Cel_IsEmail(s->data, s->size));
    else if (n->fn == kCelFn_IS_HOSTNAME)
      *out = cel_bool(pc_Cel_IsHostname(s->data, s->size));
    else
      *out = cel_bool(pc_Cel_IsUri(s->data, s->size, n->fn == kCelFn_IS_URI_REF));
    return kCel_Ok;
  case kCelFn_IS_IP:
    if (!is_string(&a[0]) || (nargs == 2 && a[1].kind != kPc_Cel_Int))
      return cel_no_overload(e, n, a, nargs);
    if (cel_steps(e, 1 + s->size / 16, n->pos) != kCel_Ok) return kCel_Fatal;
    *out = cel_bool(pc_Cel_IsIp(s->data, s->size, nargs == 2 ? a[1].v.i : 0));
    return kCel_Ok;
  case kCelFn_IS_IP_PREFIX: {
    int64_t version = 0;
    int strict = 0;
    if (!is_string(&a[0])) return cel_no_overload(e, n, a, nargs);
    if (nargs == 2 && a[1].kind == kPc_Cel_Int)
      version = a[1].v.i;
    else if (nargs == 2 && a[1].kind == kPc_Cel_Bool)
      strict = a[1].v.b;
    else if (nargs == 3 && a[1].kind == kPc_Cel_Int && a[2].kind == kPc_Cel_Bool) {
      version = a[1].v.i;
      strict = a[2].v.b;
    } else if (nargs != 1) {
      return cel_no_overload(e, n, a, nargs);
    }
    if (cel_steps(e, 1 + s->size / 16, n->pos) != kCel_Ok) return kCel_Fatal;
    *out = cel_bool(pc_Cel_IsIpPrefix(s->data, s->size, version, strict));
    return kCel_Ok;
  }
  case kCelFn_IS_HOST_AND_PORT:
    if (!is_string(&a[0]) || a[1].kind != kPc_Cel_Bool) return cel_no_overload(e, n, a, nargs);
    if (cel_steps(e, 1 + s->size / 16, n->pos) != kCel_Ok) return kCel_Fatal;
    *out = cel_bool(pc_Cel_IsHostAndPort(s->data, s->size, a[1].v.b));
    return kCel_Ok;
  case kCelFn_UNIQUE: return unique(e, n, &a[0], out);
  case kCelFn_GET_FIELD: return cel_get_field(e, &a[0], &a[1], n->pos, out);
  case kCelFn_FORMAT: return format(e, n, a, out);
  default: return strings_fn(e, n, a, nargs, out);
  }
}
