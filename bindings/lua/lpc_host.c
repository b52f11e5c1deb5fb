/* The C host API (protocall.h): pools and messages from C, moving messages
 * and pools into a lua_State, host transports and host time.
 *
 * Everything here without a lua_State is plain C over the core (def.h,
 * message/message.h, wire/encode.h, wire/decode.h, compiler/import.h): it never raises and
 * reports through return values and an 'err' buffer. The functions taking
 * a lua_State keep their state in that state's registry. */
#include "wire/decode.h"
#include "schema/def.h"
#include "wire/descriptor_set.h"
#include "wire/encode.h"
#include "lpc.h"
#include "message/message.h"
#include "base/status.h"
#include "protocall.h"

#include <lauxlib.h>
#include <stdio.h>
#include <string.h>

static void set_err(char *err, size_t errsize, const char *msg) {
  if (err != NULL && errsize > 0) snprintf(err, errsize, "%s", msg);
}

/* -- Pools ------------------------------------------------------------------- */

pc_Pool *protocall_pool_new(void) {
  return pc_Pool_New(NULL, NULL);
}

void protocall_pool_free(pc_Pool *pool) {
  pc_Pool_Free(pool);
}

int protocall_pool_load(pc_Pool *pool, const char *name, const char *source, size_t len,
                        const char *const *import_paths, char *err, size_t errsize) {
  pc_Error e;
  pc_Error_Init(&e);
  pc_ImportCtx c;
  memset(&c, 0, sizeof c);
  if (pc_Pool_IsFrozen(pool)) {
    pc_Error_Set(&e, "%s: pool is frozen", name);
    set_err(err, errsize, e.msg);
    return 0;
  }
  c.arena = pc_Arena_New(NULL, NULL);
  if (c.arena == NULL) {
    set_err(err, errsize, "out of memory");
    return 0;
  }
  if (source != NULL) {
    c.main_name = name;
    c.main_source = source;
    c.main_len = len;
  }
  while (import_paths != NULL && import_paths[c.path_count] != NULL) c.path_count++;
  c.paths = (const char **)import_paths;
  int ok = pc_Import(pool, &c, name, &e);
  pc_Arena_Free(c.arena);
  if (!ok) set_err(err, errsize, e.set ? e.msg : "load failed");
  return ok;
}

long protocall_pool_load_descriptor_set(pc_Pool *pool, const char *bytes, size_t len, char *err,
                                        size_t errsize) {
  pc_Error e;
  pc_Error_Init(&e);
  size_t first;
  long n = pc_Pool_AddDescriptorSet(pool, bytes, len, &first, &e);
  if (n < 0) set_err(err, errsize, e.msg);
  return n;
}

void protocall_pool_freeze(pc_Pool *pool) {
  pc_Pool_Freeze(pool);
}

const pc_MessageDef *protocall_pool_type(const pc_Pool *pool, const char *full_name) {
  return pc_Pool_FindMessage(pool, full_name);
}

const char *protocall_type_name(const pc_MessageDef *type) {
  return type->full_name;
}

/* -- Messages in C --------------------------------------------------------- */

pc_Arena *protocall_arena_new(void) {
  return pc_Arena_New(NULL, NULL);
}

void protocall_arena_free(pc_Arena *arena) {
  pc_Arena_Free(arena);
}

pc_Message *protocall_message_new(const pc_MessageDef *type, pc_Arena *arena) {
  return pc_Message_New(type, arena);
}

/* The regular (non-map) field 'name' of 'type', or NULL. */
static const pc_FieldDef *field_of(const pc_MessageDef *type, const char *name, int *rc) {
  const pc_FieldDef *f = pc_MessageDef_FindFieldByName(type, name, strlen(name));
  *rc = f == NULL ? PROTOCALL_NO_FIELD : f->is_map ? PROTOCALL_WRONG_TYPE : PROTOCALL_OK;
  return *rc == PROTOCALL_OK ? f : NULL;
}

/* Stores 'v' into a singular field, or appends it to a repeated one. */
static int store(pc_Message *msg, const pc_FieldDef *f, pc_Value v, pc_Arena *arena) {
  if (f->label != kPc_Label_Repeated) {
    pc_Message_Set(msg, f, v);
    return PROTOCALL_OK;
  }
  pc_Array *arr = pc_Message_MutableArray(msg, f, arena);
  if (arr == NULL || !pc_Array_Append(arr, &v, pc_FieldDef_ElemSize(f), arena))
    return PROTOCALL_OUT_OF_MEMORY;
  return PROTOCALL_OK;
}

int protocall_set_integer(pc_Message *msg, const pc_MessageDef *type, const char *field,
                          int64_t value, pc_Arena *arena) {
  int rc;
  const pc_FieldDef *f = field_of(type, field, &rc);
  if (f == NULL) return rc;
  pc_Value v;
  memset(&v, 0, sizeof v);
  switch (f->type) {
  case kPc_Type_Int32:
  case kPc_Type_Sint32:
  case kPc_Type_Sfixed32:
  case kPc_Type_Enum:
    if (value < INT32_MIN || value > INT32_MAX) return PROTOCALL_OUT_OF_RANGE;
    if (f->enumdef != NULL && f->enumdef->closed &&
        pc_EnumDef_FindByNumber(f->enumdef, (int32_t)value) == NULL)
      return PROTOCALL_OUT_OF_RANGE;
    v.i32 = (int32_t)value;
    break;
  case kPc_Type_Uint32:
  case kPc_Type_Fixed32:
    if (value < 0 || value > UINT32_MAX) return PROTOCALL_OUT_OF_RANGE;
    v.u32 = (uint32_t)value;
    break;
  case kPc_Type_Int64:
  case kPc_Type_Sint64:
  case kPc_Type_Sfixed64:
  case kPc_Type_Uint64:
  case kPc_Type_Fixed64:
    v.i64 = value; /* unsigned: two's complement, as Lua integers */
    break;
  case kPc_Type_Bool:
    if (value != 0 && value != 1) return PROTOCALL_OUT_OF_RANGE;
    v.b = (uint8_t)value;
    break;
  default: return PROTOCALL_WRONG_TYPE;
  }
  return store(msg, f, v, arena);
}

int protocall_set_number(pc_Message *msg, const pc_MessageDef *type, const char *field,
                         double value, pc_Arena *arena) {
  int rc;
  const pc_FieldDef *f = field_of(type, field, &rc);
  if (f == NULL) return rc;
  pc_Value v;
  memset(&v, 0, sizeof v);
  if (f->type == kPc_Type_Double)
    v.d = value;
  else if (f->type == kPc_Type_Float)
    v.f = (float)value;
  else
    return PROTOCALL_WRONG_TYPE;
  return store(msg, f, v, arena);
}

int protocall_set_string(pc_Message *msg, const pc_MessageDef *type, const char *field,
                         const char *data, size_t len, pc_Arena *arena) {
  int rc;
  const pc_FieldDef *f = field_of(type, field, &rc);
  if (f == NULL) return rc;
  if (f->type != kPc_Type_String && f->type != kPc_Type_Bytes) return PROTOCALL_WRONG_TYPE;
  pc_Value v;
  memset(&v, 0, sizeof v);
  if (!pc_StringView_Copy(&v.s, data, len, arena)) return PROTOCALL_OUT_OF_MEMORY;
  return store(msg, f, v, arena);
}

pc_Message *protocall_mutable_message(pc_Message *msg, const pc_MessageDef *type, const char *field,
                                      pc_Arena *arena, const pc_MessageDef **sub_type) {
  int rc;
  const pc_FieldDef *f = field_of(type, field, &rc);
  if (f == NULL || f->message == NULL) return NULL;
  pc_Message *sub = f->label == kPc_Label_Repeated ? NULL : pc_Message_Get(msg, f).m;
  if (sub == NULL) {
    sub = pc_Message_New(f->message, arena);
    if (sub == NULL) return NULL;
    pc_Value v;
    v.m = sub;
    if (store(msg, f, v, arena) != PROTOCALL_OK) return NULL;
  }
  if (sub_type != NULL) *sub_type = f->message;
  return sub;
}

/* The singular field 'name' for a getter. */
static const pc_FieldDef *singular(const pc_MessageDef *type, const char *name, int *rc) {
  const pc_FieldDef *f = field_of(type, name, rc);
  if (f != NULL && f->label == kPc_Label_Repeated) {
    *rc = PROTOCALL_WRONG_TYPE;
    return NULL;
  }
  return f;
}

int protocall_get_integer(const pc_Message *msg, const pc_MessageDef *type, const char *field,
                          int64_t *value) {
  int rc;
  const pc_FieldDef *f = singular(type, field, &rc);
  if (f == NULL) return rc;
  pc_Value v = pc_Message_Get(msg, f);
  switch (f->type) {
  case kPc_Type_Int32:
  case kPc_Type_Sint32:
  case kPc_Type_Sfixed32:
  case kPc_Type_Enum: *value = v.i32; return PROTOCALL_OK;
  case kPc_Type_Uint32:
  case kPc_Type_Fixed32: *value = v.u32; return PROTOCALL_OK;
  case kPc_Type_Int64:
  case kPc_Type_Sint64:
  case kPc_Type_Sfixed64:
  case kPc_Type_Uint64:
  case kPc_Type_Fixed64: *value = v.i64; return PROTOCALL_OK;
  case kPc_Type_Bool: *value = v.b; return PROTOCALL_OK;
  default: return PROTOCALL_WRONG_TYPE;
  }
}

int protocall_get_number(const pc_Message *msg, const pc_MessageDef *type, const char *field,
                         double *value) {
  int rc;
  const pc_FieldDef *f = singular(type, field, &rc);
  if (f == NULL) return rc;
  pc_Value v = pc_Message_Get(msg, f);
  if (f->type == kPc_Type_Double)
    *value = v.d;
  else if (f->type == kPc_Type_Float)
    *value = v.f;
  else
    return PROTOCALL_WRONG_TYPE;
  return PROTOCALL_OK;
}

int protocall_get_string(const pc_Message *msg, const pc_MessageDef *type, const char *field,
                         const char **data, size_t *len) {
  int rc;
  const pc_FieldDef *f = singular(type, field, &rc);
  if (f == NULL) return rc;
  if (f->type != kPc_Type_String && f->type != kPc_Type_Bytes) return PROTOCALL_WRONG_TYPE;
  pc_Value v = pc_Message_Get(msg, f);
  *data = v.s.data != NULL ? v.s.data : "";
  *len = v.s.size;
  return PROTOCALL_OK;
}

int protocall_get_message(const pc_Message *msg, const pc_MessageDef *type, const char *field,
                          const pc_Message **sub, const pc_MessageDef **sub_type) {
  int rc;
  const pc_FieldDef *f = singular(type, field, &rc);
  if (f == NULL) return rc;
  if (f->message == NULL) return PROTOCALL_WRONG_TYPE;
  pc_Message *m = pc_Message_Get(msg, f).m;
  if (m == NULL) return PROTOCALL_NOT_SET;
  *sub = m;
  if (sub_type != NULL) *sub_type = f->message;
  return PROTOCALL_OK;
}

int protocall_get_size(const pc_Message *msg, const pc_MessageDef *type, const char *field,
                       size_t *size) {
  const pc_FieldDef *f = pc_MessageDef_FindFieldByName(type, field, strlen(field));
  if (f == NULL) return PROTOCALL_NO_FIELD;
  if (f->label != kPc_Label_Repeated) return PROTOCALL_WRONG_TYPE;
  pc_Value v = pc_Message_Get(msg, f);
  if (f->is_map)
    *size = v.map != NULL ? v.map->size : 0;
  else
    *size = v.a != NULL ? v.a->size : 0;
  return PROTOCALL_OK;
}

int protocall_get_message_at(const pc_Message *msg, const pc_MessageDef *type, const char *field,
                             size_t index, const pc_Message **sub, const pc_MessageDef **sub_type) {
  int rc;
  const pc_FieldDef *f = field_of(type, field, &rc);
  if (f == NULL) return rc;
  if (f->label != kPc_Label_Repeated || f->message == NULL) return PROTOCALL_WRONG_TYPE;
  const pc_Array *arr = pc_Message_Get(msg, f).a;
  if (arr == NULL || index >= arr->size) return PROTOCALL_OUT_OF_RANGE;
  *sub = pc_Array_Get(arr, index, kPc_Slot_Message).m;
  if (sub_type != NULL) *sub_type = f->message;
  return PROTOCALL_OK;
}

const char *protocall_encode(const pc_Message *msg, const pc_MessageDef *type, int deterministic,
                             pc_Arena *arena, size_t *len, char *err, size_t errsize) {
  pc_WireWriter w;
  pc_WireWriter_Init(&w, NULL, NULL);
  pc_EncodeOptions opts = {deterministic};
  pc_Error e;
  pc_Error_Init(&e);
  char *out = NULL;
  if (pc_Encode(msg, type, &opts, &w, &e) == kPc_EncodeStatus_Ok) {
    size_t n = pc_WireWriter_Size(&w);
    out = pc_Arena_Malloc(arena, n ? n : 1);
    if (out != NULL) {
      if (n) memcpy(out, pc_WireWriter_Data(&w), n);
      *len = n;
    } else {
      pc_Error_Set(&e, "out of memory");
    }
  }
  pc_WireWriter_Free(&w);
  if (out == NULL) set_err(err, errsize, e.msg);
  return out;
}

pc_Message *protocall_decode(const pc_MessageDef *type, const char *bytes, size_t len,
                             pc_Arena *arena, char *err, size_t errsize) {
  pc_Message *m = pc_Message_New(type, arena);
  if (m == NULL) {
    set_err(err, errsize, "out of memory");
    return NULL;
  }
  pc_Error e;
  pc_Error_Init(&e);
  if (pc_Decode(bytes, len, m, type, arena, NULL, &e) != kPc_DecodeStatus_Ok) {
    set_err(err, errsize, e.set ? e.msg : "out of memory");
    return NULL;
  }
  return m;
}

pc_Message *protocall_clone(const pc_Message *msg, const pc_MessageDef *type, pc_Arena *arena) {
  return pc_Message_Clone(msg, type, arena);
}

/* -- Between C and a lua_State ---------------------------------------------- */

void protocall_pushpool(lua_State *L, pc_Pool *pool) {
  lpc_pushhostpool(L, pool);
}

void protocall_pushmessage(lua_State *L, const pc_MessageDef *type, const pc_Message *msg) {
  lpc_pushpool(L, type->file->pool);
  int known = !lua_isnil(L, -1);
  lua_pop(L, 1);
  if (!known) luaL_error(L, "protocall: %s: its pool is not known to this state", type->full_name);
  pc_Arena *a = lpc_newarena(L); /* owns the copy */
  pc_Message *copy = pc_Message_Clone(msg, type, a);
  if (copy == NULL) luaL_error(L, "not enough memory");
  lpc_pacearena(L, -1);
  lpc_pushview(L, type, copy, -1);
  lua_remove(L, -2);
}

const pc_Message *protocall_tomessage(lua_State *L, int idx, const pc_MessageDef **type) {
  return lpc_tomessage(L, idx, type);
}

/* -- Host transports -------------------------------------------------------- */

#define TRANSPORT_MT "protocall.HostTransportBox"

static char kTransportCtorKey; /* registry: the Lua constructor (host.lua) */

typedef struct {
  protocall_UnaryFn *unary;
  protocall_ReleaseFn *release;
  void *ud;
} TransportBox;

static int lpc_transport_gc(lua_State *L) {
  TransportBox *b = luaL_checkudata(L, 1, TRANSPORT_MT);
  if (b->release != NULL) b->release(b->ud);
  b->release = NULL;
  return 0;
}

void protocall_pushtransport(lua_State *L, protocall_UnaryFn *unary, protocall_ReleaseFn *release,
                             void *ud) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &kTransportCtorKey) != LUA_TFUNCTION)
    luaL_error(L, "protocall_pushtransport: open the module first (luaopen_protocall)");
  TransportBox *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->unary = unary;
  b->release = NULL;
  b->ud = ud;
  luaL_setmetatable(L, TRANSPORT_MT);
  b->release = release; /* from here on the box owns 'ud' */
  lua_call(L, 1, 1);
}

/* -- bytes | false, code_name, message = core.host_unary(box, path, request, settings)
 * One attempt through the host's function (protocall_UnaryFn); settings
 * {timeout = seconds|nil, metadata = {{key, value}, ...}, compression =
 * name|nil} as service.lua passes them. Raises what the host raises, and
 * when the host breaks the contract (no response string pushed, a code
 * outside 1..16). */
static int lpc_host_unary(lua_State *L) {
  TransportBox *b = luaL_checkudata(L, 1, TRANSPORT_MT);
  protocall_Request r;
  memset(&r, 0, sizeof r);
  r.path = luaL_checkstring(L, 2);
  r.request = luaL_checklstring(L, 3, &r.request_len);
  luaL_checktype(L, 4, LUA_TTABLE);
  lua_settop(L, 4);
  lua_getfield(L, 4, "timeout"); /* 5 */
  r.timeout = lua_isnumber(L, 5) ? lua_tonumber(L, 5) : -1;
  lua_getfield(L, 4, "compression"); /* 6 */
  r.compression = lua_tostring(L, 6);
  lua_getfield(L, 4, "metadata");                            /* 7 */
  size_t n = lua_istable(L, 7) ? (size_t)luaL_len(L, 7) : 0; /* may be a read-only view */
  protocall_Metadata *md = lua_newuserdatauv(L, (n ? n : 1) * sizeof *md, 0); /* 8 */
  luaL_checkstack(L, (int)(2 * n) + LUA_MINSTACK, "too much metadata");
  for (size_t i = 0; i < n; i++) { /* the strings stay on the stack during the call */
    lua_geti(L, 7, (lua_Integer)i + 1);
    if (!lua_istable(L, -1))
      return luaL_error(L, "metadata[%d]: {key, value} expected", (int)i + 1);
    lua_geti(L, -1, 1);
    lua_geti(L, -2, 2);
    lua_remove(L, -3);
    md[i].key = lua_tolstring(L, -2, &md[i].key_len);
    md[i].value = lua_tolstring(L, -1, &md[i].value_len);
    if (md[i].key == NULL || md[i].value == NULL)
      return luaL_error(L, "metadata[%d]: string key and value expected", (int)i + 1);
  }
  r.metadata = md;
  r.metadata_count = n;
  int top = lua_gettop(L);
  int code = b->unary(L, b->ud, &r);
  if (code == PROTOCALL_OK) {
    if (lua_gettop(L) != top + 1 || lua_type(L, -1) != LUA_TSTRING)
      return luaL_error(L, "host transport: %s: the response bytes (one string) expected", r.path);
    return 1;
  }
  const char *name = code > 0 ? pc_Code_Name(code) : NULL;
  if (name == NULL)
    return luaL_error(L, "host transport: %s: status code 1..16 expected, got %d", r.path, code);
  const char *message = lua_gettop(L) > top ? lua_tostring(L, top + 1) : NULL;
  lua_pushboolean(L, 0);
  lua_pushstring(L, name);
  lua_pushstring(L, message != NULL ? message : "");
  return 3;
}

/* -- core.set_host_transport(ctor)   (host.lua: ctor(box) -> transport) */
static int lpc_set_host_transport(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_settop(L, 1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &kTransportCtorKey);
  return 0;
}

/* -- Host time ---------------------------------------------------------------- */

void protocall_settime(lua_State *L, protocall_ClockFn *clock, protocall_SleepFn *sleep, void *ud) {
  lpc_Time *t = lpc_gettime(L);
  t->clock = clock;
  t->sleep = sleep;
  t->ud = ud;
}

void lpc_open_host(lua_State *L) {
  luaL_newmetatable(L, TRANSPORT_MT);
  lua_pushcfunction(L, lpc_transport_gc);
  lua_setfield(L, -2, "__gc");
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_pop(L, 1);
  static const luaL_Reg funcs[] = {
      {"host_unary", lpc_host_unary}, {"set_host_transport", lpc_set_host_transport}, {NULL, NULL}};
  luaL_setfuncs(L, funcs, 0);
}
