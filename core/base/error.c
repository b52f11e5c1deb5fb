#include "base/error.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void pc_Error_Init(pc_Error *e) {
  if (e == NULL) return;
  e->set = 0;
  e->msg[0] = '\0';
}

void pc_Error_Set(pc_Error *e, const char *fmt, ...) {
  if (e == NULL || e->set) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->msg, sizeof e->msg, fmt, ap);
  va_end(ap);
  e->set = 1;
}

void pc_Error_SetAtV(pc_Error *e, const char *file, int line, int col, const char *fmt,
                     va_list ap) {
  if (e == NULL || e->set) return;
  char msg[PC_ERROR_MAX];
  vsnprintf(msg, sizeof msg, fmt, ap);
  if (line > 0)
    pc_Error_Set(e, "%s:%d:%d: %s", file, line, col, msg);
  else
    pc_Error_Set(e, "%s: %s", file, msg);
}

/* The length of the well-formed UTF-8 sequence (RFC 3629) that starts 's'
 * ('n' bytes left, s[0] >= 0x80), or 0. */
static size_t utf8_sequence(const unsigned char *s, size_t n) {
  unsigned char c = s[0];
  size_t len = c >= 0xC2 && c <= 0xDF   ? 2
               : c >= 0xE0 && c <= 0xEF ? 3
               : c >= 0xF0 && c <= 0xF4 ? 4
                                        : 0;
  if (len == 0 || len > n) return 0;
  unsigned char lo = 0x80, hi = 0xBF; /* the second byte's range */
  if (c == 0xE0) lo = 0xA0;           /* not overlong */
  if (c == 0xED) hi = 0x9F;           /* not a surrogate */
  if (c == 0xF0) lo = 0x90;
  if (c == 0xF4) hi = 0x8F; /* not past U+10FFFF */
  if (s[1] < lo || s[1] > hi) return 0;
  for (size_t k = 2; k < len; k++)
    if ((s[k] & 0xC0) != 0x80) return 0;
  return len;
}

const char *pc_Error_Quote(char *buf, size_t room, const char *s, size_t n, pc_QuoteStyle style) {
  const unsigned char *u = (const unsigned char *)s;
  size_t o = 0, i = 0;
  while (i < n) {
    unsigned char c = u[i];
    char esc[8] = {(char)c, 0};
    size_t k = 1, step = 1; /* bytes written, bytes read */
    if (c == '"' || c == '\\') {
      k = (size_t)snprintf(esc, sizeof esc, "\\%c", c);
    } else if (c >= 0x80) {
      step = utf8_sequence(u + i, n - i);
      if (step > 0) {
        memcpy(esc, u + i, step);
        k = step;
      } else { /* a byte that is not UTF-8: escaped, so the message is */
        step = 1;
        k = (size_t)snprintf(esc, sizeof esc, style == kPc_Quote_Json ? "\\x%02x" : "\\%u",
                             (unsigned)c);
      }
    } else if (style == kPc_Quote_Json && c < 0x20) {
      k = (size_t)snprintf(esc, sizeof esc, "\\u%04x", (unsigned)c);
    } else if (style == kPc_Quote_Lua && (c < 0x20 || c == 0x7f)) {
      int digit = i + 1 < n && isdigit(u[i + 1]);
      k = (size_t)snprintf(esc, sizeof esc, digit ? "\\%03u" : "\\%u", (unsigned)c);
    }
    if (o + k > room - 4) break;
    memcpy(buf + o, esc, k);
    o += k;
    i += step;
  }
  if (i < n) {
    memcpy(buf + o, "...", 3);
    o += 3;
  }
  buf[o] = '\0';
  return buf;
}
