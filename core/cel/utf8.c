/* Text helpers: UTF-8, positions in an expression as line:col, numbers
 * as JavaScript prints them. */
#define _GNU_SOURCE /* memmem */
#include "cel/cel_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -- Positions ----------------------------------------------------------- */

void cel_position(const char *text, size_t len, uint32_t pos, char *buf, size_t room) {
  int line = 1, col = 1;
  if (pos > len) pos = (uint32_t)len;
  for (size_t i = 0; i < pos; i++) {
    unsigned char c = (unsigned char)text[i];
    if (c == '\n' || (c == '\r' && !(i + 1 < len && text[i + 1] == '\n'))) {
      line++;
      col = 1;
    } else if (c == '\r') {
      /* the \r of \r\n: the \n ends the line */
    } else if ((c & 0xC0) != 0x80) {
      col++;
    }
  }
  snprintf(buf, room, "%d:%d: ", line, col);
}

/* -- UTF-8 ---------------------------------------------------------------- */

uint32_t cel_utf8_next(const char *s, size_t n, size_t *i) {
  const unsigned char *p = (const unsigned char *)s;
  size_t k = *i;
  unsigned c = p[k];
  if (c < 0x80) {
    *i = k + 1;
    return c;
  }
  int len;
  uint32_t cp, min;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
    cp = c & 0x1F;
    min = 0x80;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    cp = c & 0x0F;
    min = 0x800;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    cp = c & 0x07;
    min = 0x10000;
  } else {
    *i = k + 1;
    return 0xFFFD;
  }
  size_t j = 1;
  for (; j < (size_t)len && k + j < n; j++) {
    unsigned d = p[k + j];
    if ((d & 0xC0) != 0x80) break;
    uint32_t next = (cp << 6) | (d & 0x3F);
    /* stop at the first byte that makes the sequence impossible (the
       maximal subpart of WHATWG's decoder) */
    if (j == 1 && ((len == 3 && ((c == 0xE0 && d < 0xA0) || (c == 0xED && d > 0x9F))) ||
                   (len == 4 && ((c == 0xF0 && d < 0x90) || (c == 0xF4 && d > 0x8F)))))
      break;
    cp = next;
  }
  if (j < (size_t)len) {
    *i = k + j;
    return 0xFFFD;
  }
  *i = k + (size_t)len;
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0xFFFD;
  return cp;
}

/* Code points as cel_utf8_next steps through them: a byte sequence that
 * is not UTF-8 (a proto2 string field is not checked) counts a U+FFFD for
 * each maximal subpart, as protovalidate-es's decoder reads it, never 0 (a
 * run of stray continuation bytes counted as nothing passed any max_len). */
size_t cel_utf8_count(const char *s, size_t n) {
  size_t count = 0;
  for (size_t i = 0; i < n; count++) {
    if ((unsigned char)s[i] < 0x80)
      i++;
    else
      cel_utf8_next(s, n, &i);
  }
  return count;
}

size_t pc_Cel_StringSize(const char *s, size_t n) {
  return cel_utf8_count(s, n);
}

size_t pc_Cel_Find(const char *h, size_t hn, const char *needle, size_t nn) {
  if (nn == 0) return 0;
  if (nn > hn) return SIZE_MAX;
  const char *p = memmem(h, hn, needle, nn);
  return p == NULL ? SIZE_MAX : (size_t)(p - h);
}

/* -- Numbers ------------------------------------------------------------- */

/* JavaScript's Number.prototype.toString: the shortest digits that read
 * back as 'd', in plain notation from 1e-7 to 1e21, else with an exponent. */
int cel_double_text(double d, char *buf, size_t room) {
  if (isnan(d)) return snprintf(buf, room, "NaN");
  if (isinf(d)) return snprintf(buf, room, d < 0 ? "-Infinity" : "Infinity");
  if (d == 0) return snprintf(buf, room, "0");
  char tmp[40];
  int prec;
  for (prec = 1; prec <= 17; prec++) {
    snprintf(tmp, sizeof tmp, "%.*e", prec - 1, d);
    if (strtod(tmp, NULL) == d) break;
  }
  /* tmp: [-]d[.ddd]e[+-]xx */
  const char *p = tmp;
  int neg = *p == '-';
  if (neg) p++;
  char digits[32] = {0}; /* 17 at most, and n <= 21 */
  int k = 0;
  for (; *p != 'e'; p++)
    if (*p != '.') digits[k++] = *p;
  while (k > 1 && digits[k - 1] == '0') k--;
  int n = (int)strtol(p + 1, NULL, 10) + 1; /* value = 0.digits * 10^n */
  char out[64];
  size_t o = 0;
  if (neg) out[o++] = '-';
  if (k <= n && n <= 21) {
    memcpy(out + o, digits, (size_t)k);
    o += (size_t)k;
    for (int i = k; i < n; i++) out[o++] = '0';
  } else if (0 < n && n <= 21) {
    memcpy(out + o, digits, (size_t)n);
    o += (size_t)n;
    out[o++] = '.';
    memcpy(out + o, digits + n, (size_t)(k - n));
    o += (size_t)(k - n);
  } else if (-6 < n && n <= 0) {
    out[o++] = '0';
    out[o++] = '.';
    for (int i = 0; i < -n; i++) out[o++] = '0';
    memcpy(out + o, digits, (size_t)k);
    o += (size_t)k;
  } else {
    out[o++] = digits[0];
    if (k > 1) {
      out[o++] = '.';
      memcpy(out + o, digits + 1, (size_t)(k - 1));
      o += (size_t)(k - 1);
    }
    o += (size_t)snprintf(out + o, sizeof out - o, "e%c%d", n - 1 < 0 ? '-' : '+',
                          n - 1 < 0 ? 1 - n : n - 1);
  }
  out[o] = '\0';
  return snprintf(buf, room, "%s", out);
}
