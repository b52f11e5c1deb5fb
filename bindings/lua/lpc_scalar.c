/* Scalar field values between Lua and the core: pushing a field value as
 * a Lua value, and the checked conversions (type, integer representation,
 * range, enum names and closed enums) with the error texts the message
 * files share ("demo.M.x: integer expected, got string"). */
#include "lpc.h"

#include <lauxlib.h>
#include <string.h>

void lpc_push_scalar(lua_State *L, const pc_FieldDef *f, pc_Value v) {
  switch (f->type) {
  case kPc_Type_Double: lua_pushnumber(L, v.d); break;
  case kPc_Type_Float: lua_pushnumber(L, (lua_Number)v.f); break;
  case kPc_Type_Int64:
  case kPc_Type_Sint64:
  case kPc_Type_Sfixed64: lpc_push_int64(L, v.u64, 0); break;
  case kPc_Type_Uint64:
  case kPc_Type_Fixed64: lpc_push_int64(L, v.u64, 1); break;
  case kPc_Type_Uint32:
  case kPc_Type_Fixed32: lua_pushinteger(L, (lua_Integer)v.u32); break;
  case kPc_Type_Bool: lua_pushboolean(L, v.b); break;
  case kPc_Type_String:
  case kPc_Type_Bytes: lua_pushlstring(L, v.s.size ? v.s.data : "", v.s.size); break;
  default: lua_pushinteger(L, (lua_Integer)v.i32); break;
  }
}

void lpc_push_key(lua_State *L, const pc_FieldDef *f, pc_Value v) {
  if (LPC_LUAJIT) {
    int is_unsigned = f->type == kPc_Type_Uint64 || f->type == kPc_Type_Fixed64;
    int is_signed =
        f->type == kPc_Type_Int64 || f->type == kPc_Type_Sint64 || f->type == kPc_Type_Sfixed64;
    const uint64_t limit = (uint64_t)1 << 53;
    if ((is_unsigned && v.u64 <= limit) ||
        (is_signed && v.i64 >= -(int64_t)limit && v.i64 <= (int64_t)limit)) {
      lua_pushnumber(L, is_unsigned ? (lua_Number)v.u64 : (lua_Number)v.i64);
      return;
    }
  }
  lpc_push_scalar(L, f, v);
}

/* -- Checked conversions --------------------------------------------------- */

_Noreturn void lpc_type_error(lua_State *L, const char *name, const char *expected, int idx) {
  lpc_msg_error(L, "%s: %s expected, got %s", name, expected, lpc_tname(L, idx));
}

lua_Integer lpc_check_integer(lua_State *L, const char *name, int idx) {
  if (lua_type(L, idx) != LUA_TNUMBER) lpc_type_error(L, name, "integer", idx);
  int exact;
  lua_Integer i = lua_tointegerx(L, idx, &exact); /* floats only when integral */
  if (!exact) lpc_msg_error(L, "%s: number has no integer representation", name);
  return i;
}

static void check_range(lua_State *L, const char *name, lua_Integer i, lua_Integer lo,
                        lua_Integer hi, const char *type) {
  if (i < lo || i > hi) lpc_msg_error(L, "%s: value %I out of range for %s", name, i, type);
}

static int32_t check_enum(lua_State *L, const pc_FieldDef *f, const char *name, int idx) {
  const pc_EnumDef *e = f->enumdef;
  if (lua_type(L, idx) == LUA_TSTRING) {
    size_t len;
    const char *s = lua_tolstring(L, idx, &len);
    const pc_EnumValueDef *v = pc_EnumDef_FindByName(e, s, len);
    if (v != NULL) return v->number;
    lpc_msg_error(L, "%s: unknown value '%s' for enum %s", name, s, e->full_name);
  }
  if (lua_type(L, idx) != LUA_TNUMBER) lpc_type_error(L, name, "enum value name or number", idx);
  lua_Integer i = lpc_check_integer(L, name, idx);
  check_range(L, name, i, INT32_MIN, INT32_MAX, "enum");
  if (e->closed && pc_EnumDef_FindByNumber(e, (int32_t)i) == NULL)
    lpc_msg_error(L, "%s: %I is not a value of closed enum %s", name, i, e->full_name);
  return (int32_t)i;
}

/* The scalar (or string, as a view into the Lua string) at 'idx' for a
 * field of f's type; raises naming 'name'. */
pc_Value lpc_check_scalar(lua_State *L, const pc_FieldDef *f, const char *name, int idx) {
  pc_Value v;
  memset(&v, 0, sizeof(v));
  switch (f->type) {
  case kPc_Type_Double:
  case kPc_Type_Float:
    if (lua_type(L, idx) != LUA_TNUMBER) lpc_type_error(L, name, "number", idx);
    if (f->type == kPc_Type_Double)
      v.d = (double)lua_tonumber(L, idx);
    else
      v.f = (float)lua_tonumber(L, idx);
    break;
  case kPc_Type_Int64:
  case kPc_Type_Sint64:
  case kPc_Type_Sfixed64:
  case kPc_Type_Uint64:
  case kPc_Type_Fixed64: {
    int r = lpc_to_int64(L, idx, &v.u64);
    if (r == 0) lpc_type_error(L, name, "integer", idx);
    if (r < 0)
      lpc_msg_error(L,
                    LPC_LUAJIT ? "%s: number has no exact 64-bit integer value (LuaJIT takes "
                                 "numbers within 2^53; beyond, int64_t / uint64_t cdata: 1LL)"
                               : "%s: number has no integer representation",
                    name);
    break;
  }
  case kPc_Type_Int32:
  case kPc_Type_Sint32:
  case kPc_Type_Sfixed32: {
    lua_Integer i = lpc_check_integer(L, name, idx);
    check_range(L, name, i, INT32_MIN, INT32_MAX, pc_FieldType_Name(f->type));
    v.i32 = (int32_t)i;
    break;
  }
  case kPc_Type_Uint32:
  case kPc_Type_Fixed32: {
    lua_Integer i = lpc_check_integer(L, name, idx);
    check_range(L, name, i, 0, UINT32_MAX, pc_FieldType_Name(f->type));
    v.u32 = (uint32_t)i;
    break;
  }
  case kPc_Type_Bool:
    if (!lua_isboolean(L, idx)) lpc_type_error(L, name, "boolean", idx);
    v.b = (uint8_t)lua_toboolean(L, idx);
    break;
  case kPc_Type_String:
  case kPc_Type_Bytes:
    if (lua_type(L, idx) != LUA_TSTRING) lpc_type_error(L, name, "string", idx);
    v.s.data = lua_tolstring(L, idx, &v.s.size);
    break;
  case kPc_Type_Enum: v.i32 = check_enum(L, f, name, idx); break;
  default: lpc_type_error(L, name, "scalar", idx);
  }
  return v;
}
