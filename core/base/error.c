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

const char *pc_Error_Quote(char *buf, size_t room, const char *s, size_t n, pc_QuoteStyle style) {
  size_t o = 0, i = 0;
  for (; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    char esc[8] = {(char)c, 0};
    int k = 1;
    if (c == '"' || c == '\\')
      k = snprintf(esc, sizeof esc, "\\%c", c);
    else if (style == kPc_Quote_Json && c < 0x20)
      k = snprintf(esc, sizeof esc, "\\u%04x", (unsigned)c);
    else if (style == kPc_Quote_Lua && (c < 0x20 || c == 0x7f))
      k = snprintf(esc, sizeof esc,
                   i + 1 < n && isdigit((unsigned char)s[i + 1]) ? "\\%03u" : "\\%u", (unsigned)c);
    if (o + (size_t)k > room - 4) break;
    memcpy(buf + o, esc, (size_t)k);
    o += (size_t)k;
  }
  if (i < n) {
    for (; i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80; i--) o--; /* copied as is */
    memcpy(buf + o, "...", 3);
    o += 3;
  }
  buf[o] = '\0';
  return buf;
}
