#include "error.h"

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
