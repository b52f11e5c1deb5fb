#include "schema/descriptor.h"

#include <string.h>

/* ORDER TYPE: index = pc_FieldType */
static const char *const kTypeNames[19] = {NULL,       "double",   "float",   "int64",  "uint64",
                                           "int32",    "fixed64",  "fixed32", "bool",   "string",
                                           "group",    "message",  "bytes",   "uint32", "enum",
                                           "sfixed32", "sfixed64", "sint32",  "sint64"};

const char *pc_FieldType_Name(int type) {
  if (type < 1 || type > 18) return NULL;
  return kTypeNames[type];
}

pc_FieldType pc_FieldType_FromName(const char *name, size_t len) {
  for (int t = 1; t <= 18; t++) {
    if (t == kPc_Type_Group || t == kPc_Type_Message || t == kPc_Type_Enum) continue;
    if (strlen(kTypeNames[t]) == len && memcmp(kTypeNames[t], name, len) == 0)
      return (pc_FieldType)t;
  }
  return (pc_FieldType)0;
}

size_t pc_JsonName(const char *name, char *out, size_t cap) {
  size_t n = 0;
  int upper = 0;
  for (const char *p = name; *p; p++) {
    char c = *p;
    if (c == '_') {
      upper = 1;
      continue;
    }
    if (upper && c >= 'a' && c <= 'z') c = (char)(c - 'a' + 'A');
    upper = 0;
    if (n + 1 < cap) out[n] = c;
    n++;
  }
  if (cap > 0) out[n < cap ? n : cap - 1] = '\0';
  return n;
}
