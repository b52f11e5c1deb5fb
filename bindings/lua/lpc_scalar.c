/* Scalar field values between Lua and the core: pushing a field value as
 * a Lua value, and the checked conversions (type, integer representation,
 * range, enum names and closed enums) with the error texts the message
 * files share ("demo.M.x: integer expected, got string"). */
#include "lpc_message.h"
#include "base/number.h"
#include "wire/decode.h"
#include "wire/wire.h"

#include <inttypes.h>
#include <lauxlib.h>
#include <math.h>
#include <stdio.h>
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

int lpc_key_is_cdata(const pc_FieldDef *f, pc_Value v) {
  if (!LPC_LUAJIT) return 0;
  const uint64_t limit = (uint64_t)1 << 53;
  switch (f->type) {
  case kPc_Type_Uint64:
  case kPc_Type_Fixed64: return v.u64 > limit;
  case kPc_Type_Int64:
  case kPc_Type_Sint64:
  case kPc_Type_Sfixed64: return v.i64 < -(int64_t)limit || v.i64 > (int64_t)limit;
  default: return 0;
  }
}

void lpc_push_key(lua_State *L, const pc_FieldDef *f, pc_Value v) {
  if (LPC_LUAJIT && !lpc_key_is_cdata(f, v)) {
    if (f->type == kPc_Type_Uint64 || f->type == kPc_Type_Fixed64) {
      lua_pushnumber(L, (lua_Number)v.u64);
      return;
    }
    if (f->type == kPc_Type_Int64 || f->type == kPc_Type_Sint64 || f->type == kPc_Type_Sfixed64) {
      lua_pushnumber(L, (lua_Number)v.i64);
      return;
    }
  }
  lpc_push_scalar(L, f, v);
}

/* -- Checked conversions --------------------------------------------------- */

_Noreturn void lpc_field_type_error(lua_State *L, const char *name, const char *expected, int idx) {
  lpc_msg_error(L, "%s: %s expected, got %s", name, expected, lpc_type_name(L, idx));
}

_Noreturn void lpc_message_type_error(lua_State *L, const char *name, const pc_MessageDef *def,
                                      int idx) {
  const pc_MessageDef *d = NULL;
  if (lpc_to_message(L, idx, &d) != NULL && d != def && strcmp(d->full_name, def->full_name) == 0)
    lpc_msg_error(L, "%s: %s expected, got %s of another pool", name, def->full_name, d->full_name);
  lpc_field_type_error(L, name, def->full_name, idx);
}

/* Raises for the number at 'idx', which integer field 'name' does not
 * take, quoting it: a fraction, NaN or an infinity as "integer expected,
 * got 1.5"; a whole number the runtime gives no integer for (past
 * lua_Integer; with 'past_2_53', a LuaJIT 64-bit field's: past +-2^53)
 * saying so. */
static _Noreturn void integer_error(lua_State *L, const char *name, int idx, int past_2_53) {
  double n = (double)lua_tonumber(L, idx);
  char shown[32]; /* the shortest text that reads back as n: 30.000000000000004, not 30.0 */
  pc_Number_Shortest(n, shown);
  if (n != floor(n) || n - n != 0) lpc_msg_error(L, "%s: integer expected, got %s", name, shown);
  if (past_2_53)
    lpc_msg_error(L,
                  "%s: number %s is not an integer in -2^53..2^53 (LuaJIT takes larger 64-bit "
                  "values as int64_t / uint64_t cdata, 1LL, or decimal strings)",
                  name, shown);
  lpc_msg_error(L, "%s: number %s has no integer representation", name, shown);
}

lua_Integer lpc_check_integer(lua_State *L, const char *name, int idx) {
  uint64_t bits;
  int is_unsigned;
  if (lpc_is_int64_cdata(L, idx, &bits, &is_unsigned)) { /* LuaJIT: 5LL, 5ULL */
    if (is_unsigned && bits > (uint64_t)INT64_MAX) {
      char text[24];
      snprintf(text, sizeof text, "%" PRIu64, bits);
      lpc_msg_error(L, "%s: value %sULL out of range", name, text);
    }
    return (lua_Integer)(int64_t)bits;
  }
  if (lua_type(L, idx) != LUA_TNUMBER) lpc_field_type_error(L, name, "integer", idx);
  int exact;
  lua_Integer i = lua_tointegerx(L, idx, &exact); /* floats only when integral */
  if (!exact) integer_error(L, name, idx, 0);
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
    lpc_msg_error(L, "%s: unknown value '%s' for enum %s", name, lpc_push_shown(L, idx),
                  e->full_name);
  }
  if (lua_type(L, idx) != LUA_TNUMBER)
    lpc_field_type_error(L, name, "enum value name or number", idx);
  lua_Integer i = lpc_check_integer(L, name, idx);
  check_range(L, name, i, INT32_MIN, INT32_MAX, "enum");
  if (e->closed && pc_EnumDef_FindByNumber(e, (int32_t)i) == NULL)
    lpc_msg_error(L, "%s: %I is not a value of closed enum %s", name, i, e->full_name);
  return (int32_t)i;
}

/* A decimal integer string ("-9223372036854775808", "18446744073709551615")
 * as a 64-bit field's value: an optional '-' and digits, nothing else. 1
 * with '*out' its two's-complement bits, 0 when 's' is no decimal integer,
 * -1 when it is one outside the field's range (int64: -2^63..2^63-1,
 * uint64: 0..2^64-1). */
int lpc_parse_decimal(const char *s, size_t len, int is_unsigned, uint64_t *out) {
  size_t i = 0;
  int neg = len > 0 && s[0] == '-';
  if (neg) i = 1;
  if (i == len) return 0;
  uint64_t v = 0;
  int over = 0;
  for (; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return 0;
    unsigned d = (unsigned)(s[i] - '0');
    if (v > (UINT64_MAX - d) / 10) over = 1;
    v = v * 10 + d;
  }
  if (over) return -1;
  if (is_unsigned) {
    if (neg && v != 0) return -1;
  } else if (neg ? v > (uint64_t)1 << 63 : v > (uint64_t)INT64_MAX) {
    return -1;
  }
  *out = neg ? (uint64_t)0 - v : v;
  return 1;
}

/* LuaJIT: the decimal string at 'idx' for 64-bit field 'f' (its bits), or
 * an error naming 'name' (the string shown up to 40 bytes, control bytes
 * as '?'). */
static uint64_t check_decimal(lua_State *L, const pc_FieldDef *f, const char *name, int idx) {
  size_t len;
  const char *s = lua_tolstring(L, idx, &len);
  int is_unsigned = f->type == kPc_Type_Uint64 || f->type == kPc_Type_Fixed64;
  uint64_t v = 0;
  int r = lpc_parse_decimal(s, len, is_unsigned, &v);
  if (r > 0) return v;
  char shown[48];
  size_t n = len < 40 ? len : 40;
  for (size_t i = 0; i < n; i++) /* control bytes (a NUL too) shown as '?' */
    shown[i] = (char)((unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i]);
  memcpy(shown + n, len > n ? "..." : "", len > n ? 4 : 1);
  if (r < 0)
    lpc_msg_error(L, "%s: value \"%s\" out of range for %s", name, shown,
                  pc_FieldType_Name(f->type));
  lpc_msg_error(L, "%s: decimal integer string expected, got \"%s\"", name, shown);
  return 0;
}

_Noreturn void lpc_utf8_error(lua_State *L, const char *name, const char *s, size_t len) {
  size_t at = pc_Wire_InvalidUtf8At((const uint8_t *)s, len);
  lpc_msg_error(L, "%s: invalid UTF-8 at byte %I", name, (lua_Integer)at + 1);
}

/* lpc_check_scalar; 'utf8': whether a proto3 string's bytes are checked. */
static pc_Value check_scalar(lua_State *L, const pc_FieldDef *f, const char *name, int idx,
                             int utf8) {
  pc_Value v;
  memset(&v, 0, sizeof(v));
  switch (f->type) {
  case kPc_Type_Double:
  case kPc_Type_Float: {
    uint64_t bits;
    int is_unsigned;
    double d;
    if (lpc_is_int64_cdata(L, idx, &bits, &is_unsigned)) /* LuaJIT: 5LL, 5ULL */
      d = is_unsigned ? (double)bits : (double)(int64_t)bits;
    else if (lua_type(L, idx) == LUA_TNUMBER)
      d = (double)lua_tonumber(L, idx);
    else
      lpc_field_type_error(L, name, "number", idx);
    if (f->type == kPc_Type_Double)
      v.d = d;
    else
      v.f = (float)d;
    break;
  }
  case kPc_Type_Int64:
  case kPc_Type_Sint64:
  case kPc_Type_Sfixed64:
  case kPc_Type_Uint64:
  case kPc_Type_Fixed64: {
    if (LPC_LUAJIT && lua_type(L, idx) == LUA_TSTRING) {
      v.u64 = check_decimal(L, f, name, idx);
      break;
    }
    int r = lpc_to_int64(L, idx, &v.u64);
    if (r == 0)
      lpc_field_type_error(L, name, LPC_LUAJIT ? "integer or decimal string" : "integer", idx);
    if (r < 0) integer_error(L, name, idx, LPC_LUAJIT);
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
    if (!lua_isboolean(L, idx)) lpc_field_type_error(L, name, "boolean", idx);
    v.b = (uint8_t)lua_toboolean(L, idx);
    break;
  case kPc_Type_String:
  case kPc_Type_Bytes:
    if (lua_type(L, idx) != LUA_TSTRING) lpc_field_type_error(L, name, "string", idx);
    v.s.data = lua_tolstring(L, idx, &v.s.size);
    if (utf8 && pc_Decode_ChecksUtf8(f) && !pc_Wire_ValidUtf8((const uint8_t *)v.s.data, v.s.size))
      lpc_utf8_error(L, name, v.s.data, v.s.size);
    break;
  case kPc_Type_Enum: v.i32 = check_enum(L, f, name, idx); break;
  default: lpc_field_type_error(L, name, "scalar", idx);
  }
  return v;
}

pc_Value lpc_check_scalar(lua_State *L, const pc_FieldDef *f, const char *name, int idx) {
  return check_scalar(L, f, name, idx, 1);
}

pc_Value lpc_check_scalar_lax(lua_State *L, const pc_FieldDef *f, const char *name, int idx) {
  return check_scalar(L, f, name, idx, 0);
}

/* Whether lpc_check_scalar takes the value at 'idx' for 'f' as it is: the
 * common values (a string, UTF-8 for a proto3 string field, a boolean, a
 * number, an integer in range, a known enum name or number). 0 does not
 * mean it raises: a caller that names the value in its error (an element,
 * a map entry) makes that name only then and lets lpc_check_scalar
 * decide. */
int lpc_is_plain_scalar(lua_State *L, const pc_FieldDef *f, int idx) {
  int t = lua_type(L, idx);
  switch (f->type) {
  case kPc_Type_String:
    if (t != LUA_TSTRING) return 0;
    if (pc_Decode_ChecksUtf8(f)) {
      size_t len;
      const char *s = lua_tolstring(L, idx, &len);
      return pc_Wire_ValidUtf8((const uint8_t *)s, len);
    }
    return 1;
  case kPc_Type_Bytes: return t == LUA_TSTRING;
  case kPc_Type_Bool: return t == LUA_TBOOLEAN;
  case kPc_Type_Double:
  case kPc_Type_Float: return t == LUA_TNUMBER;
  case kPc_Type_Enum:
    if (t == LUA_TSTRING) {
      size_t len;
      const char *s = lua_tolstring(L, idx, &len);
      return pc_EnumDef_FindByName(f->enumdef, s, len) != NULL;
    }
    break;
  default: break;
  }
  uint64_t bits;
  if (t != LUA_TNUMBER) {
    /* LuaJIT: a 64-bit field takes any int64_t / uint64_t cdata as it is */
    int is_unsigned;
    return LPC_LUAJIT && pc_FieldDef_ElemSlot(f) == kPc_Slot_64 &&
           lpc_is_int64_cdata(L, idx, &bits, &is_unsigned);
  }
  if (lpc_to_int64(L, idx, &bits) <= 0) return 0;
  int64_t i = (int64_t)bits;
  switch (f->type) {
  case kPc_Type_Enum:
    return i >= INT32_MIN && i <= INT32_MAX &&
           (!f->enumdef->closed || pc_EnumDef_FindByNumber(f->enumdef, (int32_t)i) != NULL);
  case kPc_Type_Int32:
  case kPc_Type_Sint32:
  case kPc_Type_Sfixed32: return i >= INT32_MIN && i <= INT32_MAX;
  case kPc_Type_Uint32:
  case kPc_Type_Fixed32: return i >= 0 && i <= (int64_t)UINT32_MAX;
  case kPc_Type_Int64:
  case kPc_Type_Sint64:
  case kPc_Type_Sfixed64:
  case kPc_Type_Uint64:
  case kPc_Type_Fixed64: return 1;
  default: return 0;
  }
}
