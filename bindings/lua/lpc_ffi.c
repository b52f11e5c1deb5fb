/* FFI struct messages (pc.ffi, lua/protocall/ffi/struct.lua; LuaJIT only): the
 * layout a struct declaration is generated from, the codec's function
 * table (bindings/luajit/protocall_ffi.h), copies between a struct and a
 * message object, and the reads and writes the generated accessors leave
 * to the C metamethods. A struct is a message's body: its bytes from
 * offset 8 (core/message/message.h) on. The functions taking a struct
 * take it as a `void *` cdata, whose stored pointer lua_topointer finds. */
#include "lpc.h"

#include "embedded.h"
#include "ffi_codec.h"

#include <lauxlib.h>
#include <string.h>

/* Why a struct cannot hold type 'def' (pushed), or 0 when it can. */
static int push_refusal(lua_State *L, const pc_MessageDef *def) {
  if (def->extension_range_count > 0)
    return lua_pushfstring(L, "%s takes extensions, which an FFI struct cannot hold",
                           def->full_name),
           1;
  for (uint32_t i = 0; i < def->field_count; i++) {
    const pc_FieldDef *f = &def->fields[i];
    const char *what = NULL;
    if (f->is_map)
      what = "a map";
    else if (f->label == kPc_Label_Repeated)
      what = "a repeated field";
    else if (f->slot == kPc_Slot_String)
      what = f->type == kPc_Type_Bytes ? "a bytes field" : "a string field";
    else if (f->slot > kPc_Slot_64)
      what = "a message field";
    if (what != NULL) {
      lua_pushfstring(L,
                      "%s is %s; an FFI struct holds only numbers, bools and enums (use the "
                      "message type)",
                      f->full_name, what);
      return 1;
    }
  }
  return 0;
}

/* The C type of a slot, as the generated declaration names it. */
static const char *ctype_of(const pc_FieldDef *f) {
  switch (f->type) {
  case kPc_Type_Bool: return "uint8_t";
  case kPc_Type_Uint32:
  case kPc_Type_Fixed32: return "uint32_t";
  case kPc_Type_Int32:
  case kPc_Type_Sint32:
  case kPc_Type_Sfixed32:
  case kPc_Type_Enum: return "int32_t";
  case kPc_Type_Uint64:
  case kPc_Type_Fixed64: return "uint64_t";
  case kPc_Type_Float: return "float";
  case kPc_Type_Double: return "double";
  default: return "int64_t"; /* int64, sint64, sfixed64 */
  }
}

static void set_int(lua_State *L, const char *k, lua_Integer v) {
  lua_pushinteger(L, v);
  lua_setfield(L, -2, k);
}

static void set_str(lua_State *L, const char *k, const char *v) {
  lua_pushstring(L, v);
  lua_setfield(L, -2, k);
}

/* The bytes of a body of 'def' (protocall_ffi.h): from offset 8 to the end
 * of the last slot. */
static size_t body_size(const pc_MessageDef *def) {
  size_t end = 8 + (def->hasbit_count + 7) / 8;
  for (uint32_t i = 0; i < def->field_count; i++) {
    const pc_FieldDef *f = &def->fields[i];
    size_t slot_end = f->offset + pc_Slot_Size(f->slot);
    if (slot_end > end) end = slot_end;
    if (f->case_offset != 0 && f->case_offset + 4 > end) end = f->case_offset + 4;
  }
  return end - 8;
}

/* -- layout | nil, reason = core.ffi_layout(T)
 * T's layout for a struct declaration: {def = lightuserdata, size = bytes
 * of the body (body_size), presence = bytes of presence bits, fields =
 * {{name, number, offset (in the body), ctype ("uint32_t", ...), write
 * (lpc_ffi_write_kind), hasbit (-1: none), case_offset (in the body; -1:
 * not in a oneof), oneof (its name), size (the slot's bytes), widest (the
 * slot a oneof's members share), type (the field's protobuf type: "int32",
 * "enum", ...), required (true for a proto2 required field), closed (of a
 * closed enum's field: {[number] = true, ...}, its values)}, ...} in
 * declaration order}; nil and why for a type a struct cannot hold. */
static int lpc_ffi_layout(lua_State *L) {
  const pc_MessageDef *def = lpc_check_type(L, 1);
  if (push_refusal(L, def)) {
    lua_pushnil(L);
    lua_insert(L, -2);
    return 2;
  }
  lua_createtable(L, 0, 4);
  lua_pushlightuserdata(L, (void *)def);
  lua_setfield(L, -2, "def");
  set_int(L, "size", (lua_Integer)body_size(def));
  set_int(L, "presence", (lua_Integer)(def->hasbit_count + 7) / 8);
  lua_createtable(L, (int)def->field_count, 0);
  for (uint32_t i = 0; i < def->field_count; i++) {
    const pc_FieldDef *f = &def->fields[i];
    lua_createtable(L, 0, 14);
    set_str(L, "name", f->name);
    set_int(L, "number", f->number);
    set_int(L, "offset", (lua_Integer)f->offset - 8);
    set_str(L, "ctype", ctype_of(f));
    set_int(L, "write", lpc_ffi_write_kind(f));
    set_int(L, "hasbit", f->hasbit);
    set_int(L, "case_offset", f->case_offset != 0 ? (lua_Integer)f->case_offset - 8 : -1);
    if (f->oneof != NULL) set_str(L, "oneof", f->oneof->name);
    set_int(L, "size", (lua_Integer)pc_Slot_Size(f->slot));
    set_int(L, "widest", f->oneof != NULL ? (lua_Integer)f->oneof->slot_size : 0);
    set_str(L, "type", pc_FieldType_Name(f->type));
    lua_pushboolean(L, f->label == kPc_Label_Required);
    lua_setfield(L, -2, "required");
    if (f->enumdef != NULL && f->enumdef->closed) {
      lua_createtable(L, 0, (int)f->enumdef->value_count);
      for (uint32_t j = 0; j < f->enumdef->value_count; j++) {
        lua_pushboolean(L, 1);
        lua_rawseti(L, -2, f->enumdef->values[j].number);
      }
      lua_setfield(L, -2, "closed");
    }
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "fields");
  return 1;
}

/* lua_type of a cdata under LuaJIT (its lj_obj.h's LUA_TCDATA). */
enum { kLpc_TypeCdata = 10 };

/* The body the `void *` cdata at 'idx' points to (raises for anything
 * but a cdata). */
static void *body_at(lua_State *L, int idx) {
  void *const *p = lua_type(L, idx) == kLpc_TypeCdata ? lua_topointer(L, idx) : NULL;
  if (p == NULL) {
    luaL_argerror(L, idx, "void * cdata expected");
    return NULL;
  }
  return *p;
}

/* The scratch message (upvalue 1) pushed, taken out of upvalue 1 while a
 * call uses it: a call a hook or finalizer makes meanwhile (the C
 * metamethod's call, or a conversion it makes, runs Lua) makes one of its
 * own with T() (upvalue 3). The size of its body in '*size'. */
static char *take_scratch(lua_State *L, size_t *size) {
  if (lua_type(L, lua_upvalueindex(1)) == LUA_TUSERDATA) {
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_pushnil(L);
    lua_replace(L, lua_upvalueindex(1));
  } else {
    lua_pushvalue(L, lua_upvalueindex(3));
    lua_call(L, 0, 1);
  }
  char *scratch = lua_touserdata(L, -1);
  *size = body_size(pc_Message_Def(scratch));
  return scratch;
}

/* Puts the scratch message at 'idx' back into upvalue 1 (a call that
 * raised left it empty: the next one to end fills it). */
static void put_scratch(lua_State *L, int idx) {
  lua_pushvalue(L, idx);
  lua_replace(L, lua_upvalueindex(1));
}

/* Calls the C metamethod at upvalue 2 on the scratch message at 'scratch'
 * and the arguments from 2 on. Its errors name the line of the code that
 * read or wrote the field: the accessor tail-calls here. */
static void call_c_meta(lua_State *L, int scratch, int nargs, int nresults) {
  lua_pushvalue(L, lua_upvalueindex(2));
  lua_pushvalue(L, scratch);
  for (int i = 0; i < nargs; i++) lua_pushvalue(L, 2 + i);
  lua_call(L, nargs + 1, nresults);
}

/* -- v = get(p, k)   (upvalues: a scratch message of the type, its C
 * __index, the Type): m[k] of the message whose body p points to. */
static int lpc_ffi_get(lua_State *L) {
  size_t size;
  lua_settop(L, 2);
  void *body = body_at(L, 1);
  char *scratch = take_scratch(L, &size);
  memcpy(scratch + 8, body, size);
  call_c_meta(L, 3, 1, 1);
  put_scratch(L, 3);
  return 1;
}

/* -- set(p, k, v)   (upvalues: a scratch message of the type, its C
 * __newindex, the Type): m[k] = v into the body p points to, as the C
 * metamethod stores it (the body unchanged when it raises). */
static int lpc_ffi_set(lua_State *L) {
  size_t size;
  lua_settop(L, 3);
  void *body = body_at(L, 1);
  char *scratch = take_scratch(L, &size);
  memcpy(scratch + 8, body, size);
  call_c_meta(L, 4, 2, 0);
  memcpy(body, scratch + 8, size);
  put_scratch(L, 4);
  return 0;
}

/* -- get, set = core.ffi_slow(T, c_index, c_newindex)
 * The reads and writes a struct's accessors leave to the C metamethods
 * c_index / c_newindex of T's standalone messages (lpc_ffi_get, lpc_ffi_set). */
static int lpc_ffi_slow(lua_State *L) {
  lpc_check_type(L, 1);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  luaL_checktype(L, 3, LUA_TFUNCTION);
  lua_settop(L, 3);
  for (int i = 0; i < 2; i++) {
    lua_pushvalue(L, 1);
    lua_call(L, 0, 1); /* T(): the scratch message */
    lua_pushvalue(L, 2 + i);
    lua_pushvalue(L, 1);
    lua_pushcclosure(L, i == 0 ? lpc_ffi_get : lpc_ffi_set, 3);
  }
  return 2;
}

/* -- core.ffi_copy(T, m, p, to_struct)
 * Copies the body of the message m (of type T: raises otherwise) into the
 * struct p points to (to_struct true), or the struct's into m. */
static int lpc_ffi_copy(lua_State *L) {
  const pc_MessageDef *def = lpc_check_type(L, 1), *mdef;
  pc_Message *msg = lpc_check_message(L, 2, "ffi_copy", &mdef);
  if (mdef != def)
    return luaL_error(L, "%s message expected, got %s", def->full_name, mdef->full_name);
  void *body = body_at(L, 3);
  if (lua_toboolean(L, 4))
    memcpy(body, (char *)msg + 8, body_size(def));
  else
    memcpy((char *)msg + 8, body, body_size(def));
  return 0;
}

static int lpc_fficodec_gc(lua_State *L) {
  pc_ffi_CodecFree(lpc_check_self(L, 1, "__gc", "the FFI codec"));
  return 0;
}

/* -- api, codec, cdef = core.ffi_codec()
 * api: a lightuserdata, the pc_ffi_Api; codec: a new pc_ffi_Codec (a
 * userdata that frees its buffers when collected; allocating through this
 * state's allocator); cdef: protocall_ffi.h's text. */
static int lpc_ffi_codec(lua_State *L) {
  lua_pushlightuserdata(L, (void *)&pc_ffi_api);
  pc_ffi_Codec *c = lua_newuserdatauv(L, pc_ffi_CodecSize(), 0);
  void *ud;
  lua_Alloc alloc = lua_getallocf(L, &ud);
  pc_ffi_CodecInit(c, alloc, ud);
  lua_createtable(L, 0, 1);
  lua_pushvalue(L, -1);
  lua_pushcclosure(L, lpc_fficodec_gc, 1); /* upvalue 1: lpc_check_self */
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_pushstring(L, lpc_ffi_cdef);
  return 3;
}

void lpc_open_ffi(lua_State *L) {
  static const luaL_Reg funcs[] = {{"ffi_layout", lpc_ffi_layout},
                                   {"ffi_slow", lpc_ffi_slow},
                                   {"ffi_copy", lpc_ffi_copy},
                                   {"ffi_codec", lpc_ffi_codec},
                                   {NULL, NULL}};
  luaL_setfuncs(L, funcs, 0);
}
