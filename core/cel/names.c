/* Names: the functions and operators (one table, cel_internal.h), the
 * statuses, the kinds of values. */
#include "cel/cel_internal.h"

const cel_FnInfo cel_fn_info[kCelFn_Count] = {
#define CEL_FN_INFO(id, name, how, min, max) {name, how, min, max},
    CEL_FUNCTIONS(CEL_FN_INFO)
#undef CEL_FN_INFO
};

const char *pc_CelStatus_String(pc_CelStatus s) {
  switch (s) {
  case kPc_CelStatus_Ok: return "ok";
  case kPc_CelStatus_Syntax: return "syntax error";
  case kPc_CelStatus_Compile: return "compile error";
  case kPc_CelStatus_Error: return "evaluation error";
  case kPc_CelStatus_Limit: return "limit reached";
  case kPc_CelStatus_NoMemory: return "out of memory";
  }
  return "unknown status";
}

const char *cel_kind_name(pc_CelKind k) {
  switch (k) {
  case kPc_Cel_Unbound: return "unbound";
  case kPc_Cel_Null: return "null_type";
  case kPc_Cel_Bool: return "bool";
  case kPc_Cel_Int: return "int";
  case kPc_Cel_Uint: return "uint";
  case kPc_Cel_Double: return "double";
  case kPc_Cel_String: return "string";
  case kPc_Cel_Bytes: return "bytes";
  case kPc_Cel_List: return "list";
  case kPc_Cel_Map: return "map";
  case kPc_Cel_Message: return "message";
  case kPc_Cel_Timestamp: return "google.protobuf.Timestamp";
  case kPc_Cel_Duration: return "google.protobuf.Duration";
  case kPc_Cel_Type: return "type";
  }
  return "?";
}
