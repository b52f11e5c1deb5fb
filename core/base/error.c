#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>

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
