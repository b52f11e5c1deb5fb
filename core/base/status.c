#include "base/status.h"

#include <string.h>

/* ORDER CODE */
static const char *const kNames[PC_CODE_COUNT] = {
    "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
    "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
    "DATA_LOSS", "UNAUTHENTICATED"};

const char *pc_Code_Name(int code) {
  if (code < 0 || code >= PC_CODE_COUNT) return NULL;
  return kNames[code];
}

int pc_Code_FromName(const char *name, size_t len) {
  for (int i = 0; i < PC_CODE_COUNT; i++) {
    if (strlen(kNames[i]) == len && memcmp(kNames[i], name, len) == 0) return i;
  }
  return -1;
}

pc_Code pc_Code_FromHttpStatus(int http_status) {
  switch (http_status) {
  case 400: return kPc_Code_Internal;
  case 401: return kPc_Code_Unauthenticated;
  case 403: return kPc_Code_PermissionDenied;
  case 404: return kPc_Code_Unimplemented;
  case 429:
  case 502:
  case 503:
  case 504: return kPc_Code_Unavailable;
  default: return kPc_Code_Unknown;
  }
}
