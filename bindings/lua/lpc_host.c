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
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <math.h>
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

/* 'value' as a value of integer-kind field 'f' (range-checked). */
static int integer_in(const pc_FieldDef *f, int64_t value, pc_Value *v) {
  memset(v, 0, sizeof *v);
  switch (f->type) {
  case kPc_Type_Int32:
  case kPc_Type_Sint32:
  case kPc_Type_Sfixed32:
  case kPc_Type_Enum:
    if (value < INT32_MIN || value > INT32_MAX) return PROTOCALL_OUT_OF_RANGE;
    if (f->enumdef != NULL && f->enumdef->closed &&
        pc_EnumDef_FindByNumber(f->enumdef, (int32_t)value) == NULL)
      return PROTOCALL_OUT_OF_RANGE;
    v->i32 = (int32_t)value;
    return PROTOCALL_OK;
  case kPc_Type_Uint32:
  case kPc_Type_Fixed32:
    if (value < 0 || value > UINT32_MAX) return PROTOCALL_OUT_OF_RANGE;
    v->u32 = (uint32_t)value;
    return PROTOCALL_OK;
  case kPc_Type_Int64:
  case kPc_Type_Sint64:
  case kPc_Type_Sfixed64:
  case kPc_Type_Uint64:
  case kPc_Type_Fixed64:
    v->i64 = value; /* unsigned: two's complement, as Lua integers */
    return PROTOCALL_OK;
  case kPc_Type_Bool:
    if (value != 0 && value != 1) return PROTOCALL_OUT_OF_RANGE;
    v->b = (uint8_t)value;
    return PROTOCALL_OK;
  default: return PROTOCALL_WRONG_TYPE;
  }
}

/* A value of integer-kind field 'f' as an int64; WRONG_TYPE for others. */
static int integer_out(const pc_FieldDef *f, pc_Value v, int64_t *value) {
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

static int is_string(const pc_FieldDef *f) {
  return f->type == kPc_Type_String || f->type == kPc_Type_Bytes;
}

int protocall_set_integer(pc_Message *msg, const pc_MessageDef *type, const char *field,
                          int64_t value, pc_Arena *arena) {
  int rc;
  const pc_FieldDef *f = field_of(type, field, &rc);
  if (f == NULL) return rc;
  pc_Value v;
  rc = integer_in(f, value, &v);
  return rc != PROTOCALL_OK ? rc : store(msg, f, v, arena);
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
  return integer_out(f, pc_Message_Get(msg, f), value);
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

/* Any value of field (or map key / value) 'f' into '*out'. */
static void value_out(const pc_FieldDef *f, pc_Value v, protocall_Value *out) {
  memset(out, 0, sizeof *out);
  if (f->message != NULL) {
    out->message = v.m;
    out->message_type = f->message;
  } else if (is_string(f)) {
    out->data = v.s.data != NULL ? v.s.data : "";
    out->len = v.s.size;
  } else if (f->type == kPc_Type_Double) {
    out->number = v.d;
  } else if (f->type == kPc_Type_Float) {
    out->number = v.f;
  } else {
    integer_out(f, v, &out->integer);
  }
}

/* '*in' as a value of 'f' in 'arena' (strings copied, messages deep-copied
 * when their type is the field's). */
static int value_in(const pc_FieldDef *f, const protocall_Value *in, pc_Value *v, pc_Arena *arena) {
  memset(v, 0, sizeof *v);
  if (f->message != NULL) {
    if (in->message == NULL || in->message_type != f->message) return PROTOCALL_WRONG_TYPE;
    v->m = pc_Message_Clone(in->message, f->message, arena);
    return v->m != NULL ? PROTOCALL_OK : PROTOCALL_OUT_OF_MEMORY;
  }
  if (is_string(f)) {
    return pc_StringView_Copy(&v->s, in->data, in->len, arena) ? PROTOCALL_OK
                                                               : PROTOCALL_OUT_OF_MEMORY;
  }
  if (f->type == kPc_Type_Double) {
    v->d = in->number;
    return PROTOCALL_OK;
  }
  if (f->type == kPc_Type_Float) {
    v->f = (float)in->number;
    return PROTOCALL_OK;
  }
  return integer_in(f, in->integer, v);
}

int protocall_get_at(const pc_Message *msg, const pc_MessageDef *type, const char *field,
                     size_t index, protocall_Value *value) {
  int rc;
  const pc_FieldDef *f = field_of(type, field, &rc);
  if (f == NULL) return rc;
  if (f->label != kPc_Label_Repeated) return PROTOCALL_WRONG_TYPE;
  const pc_Array *arr = pc_Message_Get(msg, f).a;
  if (arr == NULL || index >= arr->size) return PROTOCALL_OUT_OF_RANGE;
  value_out(f, pc_Array_Get(arr, index, pc_FieldDef_ElemSlot(f)), value);
  return PROTOCALL_OK;
}

/* The map field 'name' of 'type' with its key and value fields. */
static const pc_FieldDef *map_of(const pc_MessageDef *type, const char *name,
                                 const pc_FieldDef **kf, const pc_FieldDef **vf, int *rc) {
  const pc_FieldDef *f = pc_MessageDef_FindFieldByName(type, name, strlen(name));
  *rc = f == NULL ? PROTOCALL_NO_FIELD : !f->is_map ? PROTOCALL_WRONG_TYPE : PROTOCALL_OK;
  if (*rc != PROTOCALL_OK) return NULL;
  *kf = pc_FieldDef_MapKey(f);
  *vf = pc_FieldDef_MapValue(f);
  return f;
}

/* A key to look up with: strings are not copied. */
static int key_in(const pc_FieldDef *kf, const protocall_Value *key, pc_Value *k) {
  if (!is_string(kf)) return integer_in(kf, key->integer, k);
  memset(k, 0, sizeof *k);
  k->s.data = key->data;
  k->s.size = key->len;
  return PROTOCALL_OK;
}

int protocall_map_entry(const pc_Message *msg, const pc_MessageDef *type, const char *field,
                        size_t index, protocall_Value *key, protocall_Value *value) {
  int rc;
  const pc_FieldDef *kf, *vf;
  const pc_FieldDef *f = map_of(type, field, &kf, &vf, &rc);
  if (f == NULL) return rc;
  const pc_Map *map = pc_Message_Get(msg, f).map;
  if (map == NULL || index >= map->size) return PROTOCALL_OUT_OF_RANGE;
  if (key != NULL) value_out(kf, map->entries[index].key, key);
  if (value != NULL) value_out(vf, map->entries[index].value, value);
  return PROTOCALL_OK;
}

int protocall_map_get(const pc_Message *msg, const pc_MessageDef *type, const char *field,
                      const protocall_Value *key, protocall_Value *value) {
  int rc;
  const pc_FieldDef *kf, *vf;
  const pc_FieldDef *f = map_of(type, field, &kf, &vf, &rc);
  if (f == NULL) return rc;
  pc_Value k;
  if ((rc = key_in(kf, key, &k)) != PROTOCALL_OK) return rc;
  const pc_Value *v = pc_Map_Find(pc_Message_Get(msg, f).map, pc_FieldDef_ElemSlot(kf), k);
  if (v == NULL) return PROTOCALL_NOT_SET;
  value_out(vf, *v, value);
  return PROTOCALL_OK;
}

/* Stores 'v' under 'key' (the key copied into 'arena' when new). */
static int map_store(pc_Message *msg, const pc_FieldDef *f, const pc_FieldDef *kf, pc_Value k,
                     pc_Value v, pc_Arena *arena) {
  pc_Map *map = pc_Message_MutableMap(msg, f, arena);
  if (map == NULL) return PROTOCALL_OUT_OF_MEMORY;
  pc_SlotKind ks = pc_FieldDef_ElemSlot(kf);
  if (pc_Map_Find(map, ks, k) == NULL && ks == kPc_Slot_String &&
      !pc_StringView_Copy(&k.s, k.s.data, k.s.size, arena))
    return PROTOCALL_OUT_OF_MEMORY;
  return pc_Map_Set(map, ks, k, v, arena) != NULL ? PROTOCALL_OK : PROTOCALL_OUT_OF_MEMORY;
}

int protocall_map_set(pc_Message *msg, const pc_MessageDef *type, const char *field,
                      const protocall_Value *key, const protocall_Value *value, pc_Arena *arena) {
  int rc;
  const pc_FieldDef *kf, *vf;
  const pc_FieldDef *f = map_of(type, field, &kf, &vf, &rc);
  if (f == NULL) return rc;
  pc_Value k, v;
  if ((rc = key_in(kf, key, &k)) != PROTOCALL_OK) return rc;
  if ((rc = value_in(vf, value, &v, arena)) != PROTOCALL_OK) return rc;
  return map_store(msg, f, kf, k, v, arena);
}

pc_Message *protocall_map_mutable_message(pc_Message *msg, const pc_MessageDef *type,
                                          const char *field, const protocall_Value *key,
                                          pc_Arena *arena, const pc_MessageDef **sub_type) {
  int rc;
  const pc_FieldDef *kf, *vf;
  const pc_FieldDef *f = map_of(type, field, &kf, &vf, &rc);
  if (f == NULL || vf->message == NULL) return NULL;
  pc_Value k;
  if (key_in(kf, key, &k) != PROTOCALL_OK) return NULL;
  pc_Value *cell = pc_Map_Find(pc_Message_Get(msg, f).map, pc_FieldDef_ElemSlot(kf), k);
  pc_Message *sub = cell != NULL ? cell->m : NULL;
  if (sub == NULL) {
    pc_Value v;
    v.m = sub = pc_Message_New(vf->message, arena);
    if (sub == NULL || map_store(msg, f, kf, k, v, arena) != PROTOCALL_OK) return NULL;
  }
  if (sub_type != NULL) *sub_type = vf->message;
  return sub;
}

int protocall_map_delete(pc_Message *msg, const pc_MessageDef *type, const char *field,
                         const protocall_Value *key) {
  int rc;
  const pc_FieldDef *kf, *vf;
  const pc_FieldDef *f = map_of(type, field, &kf, &vf, &rc);
  if (f == NULL) return rc;
  pc_Value k;
  if ((rc = key_in(kf, key, &k)) != PROTOCALL_OK) return rc;
  return pc_Map_Delete(pc_Message_Get(msg, f).map, pc_FieldDef_ElemSlot(kf), k) ? PROTOCALL_OK
                                                                                : PROTOCALL_NOT_SET;
}

const char *protocall_encode(const pc_Message *msg, const pc_MessageDef *type, int deterministic,
                             pc_Arena *arena, size_t *len, char *err, size_t errsize) {
  pc_WireWriter w;
  pc_WireWriter_Init(&w, NULL, NULL);
  pc_EncodeOptions opts = {deterministic, 0};
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
  lpc_push_host_pool(L, pool);
}

void protocall_pushmessage(lua_State *L, const pc_MessageDef *type, const pc_Message *msg) {
  lpc_push_pool(L, type->file->pool);
  int known = !lua_isnil(L, -1);
  lua_pop(L, 1);
  if (!known) luaL_error(L, "protocall: %s: its pool is not known to this state", type->full_name);
  pc_Arena *a = lpc_new_arena(L); /* owns the copy */
  pc_Message *copy = pc_Message_Clone(msg, type, a);
  if (copy == NULL) luaL_error(L, "not enough memory");
  lpc_pace_arena(L, -1);
  lpc_push_view(L, type, copy, -1);
  lua_remove(L, -2);
}

const pc_Message *protocall_tomessage(lua_State *L, int idx, const pc_MessageDef **type) {
  return lpc_to_message(L, idx, type);
}

void protocall_setdefaultpool(lua_State *L, pc_Pool *pool) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  if (lua_getfield(L, -1, "protocall") != LUA_TTABLE ||
      lua_getfield(L, -1, "set_default_pool") != LUA_TFUNCTION)
    luaL_error(L, "protocall_setdefaultpool: open the module first (luaopen_protocall)");
  lpc_push_host_pool(L, pool);
  lua_call(L, 1, 0);
  lua_pop(L, 2);
}

/* -- Host transports -------------------------------------------------------- */

#define TRANSPORT_MT "protocall.HostTransportBox"
#define CALL_MT      "protocall.HostCallBox"

static char kTransportCtorKey; /* registry: the Lua constructor (host.lua) */

typedef struct {
  protocall_Transport t; /* the host's functions, fields past its size NULL */
  int released;
} TransportBox;

/* One started streaming call; user values: 1 its TransportBox (kept alive
 * until the call is finished), 2 its path (for errors). */
typedef struct {
  TransportBox *box;
  void *call;
  int finished;
  int ended; /* recv reported the end (OK or not), or an op failed */
} CallBox;

static int lpc_transport_gc(lua_State *L) {
  TransportBox *b = luaL_checkudata(L, 1, TRANSPORT_MT);
  if (!b->released && b->t.release != NULL) b->t.release(b->t.ud);
  b->released = 1;
  return 0;
}

/* Finishes the call once: cancel when it had not ended. */
static void call_finish(CallBox *c) {
  if (c->finished) return;
  c->finished = 1;
  c->box->t.finish(c->box->t.ud, c->call, !c->ended);
}

static int lpc_call_gc(lua_State *L) {
  CallBox *c = luaL_checkudata(L, 1, CALL_MT);
  if (c->box != NULL) call_finish(c);
  return 0;
}

/* The end of field 'f' of a protocall_Transport: within a host's 'size'. */
#define HAS_FIELD(t, f) ((t)->size >= offsetof(protocall_Transport, f) + sizeof((t)->f))

static void push_box(lua_State *L, const protocall_Transport *t) {
  if (t->size < offsetof(protocall_Transport, unary) + sizeof t->unary)
    luaL_error(L, "protocall_pushhosttransport: size %d is below the ABI 1 fields (%d bytes)",
               (int)t->size, (int)(offsetof(protocall_Transport, unary) + sizeof t->unary));
  protocall_Transport copy;
  memset(&copy, 0, sizeof copy);
  memcpy(&copy, t, t->size < sizeof copy ? t->size : sizeof copy);
  copy.size = sizeof copy;
  if (!HAS_FIELD(t, start)) copy.start = NULL;
  if (!HAS_FIELD(t, send)) copy.send = NULL;
  if (!HAS_FIELD(t, close_send)) copy.close_send = NULL;
  if (!HAS_FIELD(t, recv)) copy.recv = NULL;
  if (!HAS_FIELD(t, finish)) copy.finish = NULL;
  if (copy.unary == NULL && copy.start == NULL)
    luaL_error(L, "protocall_pushhosttransport: neither 'unary' nor 'start' is set");
  if (copy.start != NULL &&
      (copy.send == NULL || copy.close_send == NULL || copy.recv == NULL || copy.finish == NULL))
    luaL_error(L, "protocall_pushhosttransport: 'start' needs send, close_send, recv and finish");
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &kTransportCtorKey) != LUA_TFUNCTION)
    luaL_error(L, "protocall_pushtransport: open the module first (luaopen_protocall)");
  TransportBox *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->t = copy;
  b->released = 1;
  luaL_setmetatable(L, TRANSPORT_MT);
  b->released = 0; /* from here on the box owns 'ud' */
  lua_pushboolean(L, copy.unary != NULL);
  lua_pushboolean(L, copy.start != NULL);
  lua_call(L, 3, 1);
}

void protocall_pushtransport(lua_State *L, protocall_UnaryFn *unary, protocall_ReleaseFn *release,
                             void *ud) {
  protocall_Transport t;
  memset(&t, 0, sizeof t);
  t.size = sizeof t;
  t.ud = ud;
  t.release = release;
  t.unary = unary;
  push_box(L, &t);
}

void protocall_pushhosttransport(lua_State *L, const protocall_Transport *t) {
  push_box(L, t);
}

/* Pushes {key, value} pairs as a list. */
static void push_pairs(lua_State *L, const protocall_Metadata *md, size_t n) {
  lua_createtable(L, (int)n, 0);
  for (size_t i = 0; i < n; i++) {
    lua_createtable(L, 2, 0);
    lua_pushlstring(L, md[i].key != NULL ? md[i].key : "", md[i].key != NULL ? md[i].key_len : 0);
    lua_rawseti(L, -2, 1);
    lua_pushlstring(L, md[i].value != NULL ? md[i].value : "",
                    md[i].value != NULL ? md[i].value_len : 0);
    lua_rawseti(L, -2, 2);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
}

/* Pushes what 'st' reports as a table {code = name, message =, details =,
 * headers =, trailers =, retry_delay =, no_retry =} (only what is set;
 * 'message' from 'fallback' when st has none). 'code' 0 is "OK"; a code
 * outside 0..16 raises, naming 'path'. */
static void push_status(lua_State *L, int code, const protocall_Status *st, const char *fallback,
                        const char *path) {
  const char *name = code >= 0 ? pc_Code_Name(code) : NULL;
  if (name == NULL)
    luaL_error(L, "host transport: %s: status code 1..16 expected, got %d", path, code);
  lua_createtable(L, 0, 6);
  lua_pushstring(L, name);
  lua_setfield(L, -2, "code");
  if (st->message != NULL)
    lua_pushlstring(L, st->message, st->message_len);
  else
    lua_pushstring(L, fallback != NULL ? fallback : "");
  lua_setfield(L, -2, "message");
  if (st->details != NULL) {
    lua_pushlstring(L, st->details, st->details_len);
    lua_setfield(L, -2, "details");
  }
  if (st->headers != NULL) {
    push_pairs(L, st->headers, st->header_count);
    lua_setfield(L, -2, "headers");
  }
  if (st->trailers != NULL) {
    push_pairs(L, st->trailers, st->trailer_count);
    lua_setfield(L, -2, "trailers");
  }
  if (st->has_retry_delay) {
    if (st->retry_delay < 0 || st->retry_delay != st->retry_delay) {
      lua_pushboolean(L, 1);
      lua_setfield(L, -2, "no_retry");
      lua_pushinteger(L, -1);
    } else {
      lua_pushnumber(L, st->retry_delay);
    }
    lua_setfield(L, -2, "retry_delay");
  }
}

/* Fills 'r' from path at 'path_idx', request bytes at 'req_idx' (0: none)
 * and the settings table at 'set_idx' {timeout = seconds|nil, metadata =
 * {{key, value}, ...}, compression = name|nil} as service.lua passes them.
 * Pushes the values the request points into (they stay on the stack for
 * the call). */
static void build_request(lua_State *L, protocall_Request *r, protocall_Status *st, int path_idx,
                          int req_idx, int set_idx) {
  memset(r, 0, sizeof *r);
  memset(st, 0, sizeof *st);
  r->status = st;
  r->path = luaL_checkstring(L, path_idx);
  if (req_idx != 0) r->request = luaL_checklstring(L, req_idx, &r->request_len);
  luaL_checktype(L, set_idx, LUA_TTABLE);
  lua_getfield(L, set_idx, "timeout");
  r->timeout = lua_isnumber(L, -1) ? lua_tonumber(L, -1) : -1;
  lua_getfield(L, set_idx, "compression");
  r->compression = lua_tostring(L, -1);
  lua_getfield(L, set_idx, "metadata");
  int mdi = lua_gettop(L);
  size_t n = lua_istable(L, mdi) ? (size_t)luaL_len(L, mdi) : 0; /* may be a read-only view */
  protocall_Metadata *md = lua_newuserdatauv(L, (n ? n : 1) * sizeof *md, 0);
  luaL_checkstack(L, (int)(2 * n) + LUA_MINSTACK, "too much metadata");
  for (size_t i = 0; i < n; i++) { /* the strings stay on the stack during the call */
    lua_geti(L, mdi, (lua_Integer)i + 1);
    if (!lua_istable(L, -1)) luaL_error(L, "metadata[%d]: {key, value} expected", (int)i + 1);
    lua_geti(L, -1, 1);
    lua_geti(L, -2, 2);
    lua_remove(L, -3);
    md[i].key = lua_tolstring(L, -2, &md[i].key_len);
    md[i].value = lua_tolstring(L, -1, &md[i].value_len);
    if (md[i].key == NULL || md[i].value == NULL)
      luaL_error(L, "metadata[%d]: string key and value expected", (int)i + 1);
  }
  r->metadata = md;
  r->metadata_count = n;
}

/* -- bytes, status | false, status = core.host_unary(box, path, request, settings)
 * One attempt through the host's unary function; 'status' as push_status
 * (code "OK" on success, with headers and trailers when reported). Raises
 * what the host raises, and when the host breaks the contract (no response
 * string pushed, a code outside 1..16). */
static int lpc_host_unary(lua_State *L) {
  TransportBox *b = luaL_checkudata(L, 1, TRANSPORT_MT);
  lua_settop(L, 4);
  protocall_Request r;
  protocall_Status st;
  build_request(L, &r, &st, 2, 3, 4);
  int top = lua_gettop(L);
  int code = b->t.unary(L, b->t.ud, &r);
  if (code == PROTOCALL_OK) {
    if (lua_gettop(L) != top + 1 || lua_type(L, -1) != LUA_TSTRING)
      return luaL_error(L, "host transport: %s: the response bytes (one string) expected", r.path);
    push_status(L, 0, &st, NULL, r.path);
    return 2;
  }
  if (code < 0) /* push_status accepts 0 */
    return luaL_error(L, "host transport: %s: status code 1..16 expected, got %d", r.path, code);
  const char *message = lua_gettop(L) > top ? lua_tostring(L, top + 1) : NULL;
  lua_pushboolean(L, 0);
  push_status(L, code, &st, message, r.path);
  return 2;
}

/* -- call | false, status = core.host_start(box, path, settings) */
static int lpc_host_start(lua_State *L) {
  TransportBox *b = luaL_checkudata(L, 1, TRANSPORT_MT);
  lua_settop(L, 3);
  protocall_Request r;
  protocall_Status st;
  build_request(L, &r, &st, 2, 0, 3);
  CallBox *c = lua_newuserdatauv(L, sizeof *c, 2); /* before start: no leak on OOM */
  memset(c, 0, sizeof *c);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1);
  lua_pushvalue(L, 2);
  lua_setiuservalue(L, -2, 2);
  luaL_setmetatable(L, CALL_MT);
  void *call = NULL;
  int code = b->t.start(L, b->t.ud, &r, &call);
  if (code != PROTOCALL_OK) {
    lua_pushboolean(L, 0);
    push_status(L, code, &st, NULL, r.path);
    return 2;
  }
  c->call = call;
  c->box = b; /* from here on __gc finishes the call */
  push_status(L, 0, &st, NULL, r.path);
  return 2;
}

/* The call at index 1, still running; '*path' its path. */
static CallBox *check_call(lua_State *L, const char **path) {
  CallBox *c = luaL_checkudata(L, 1, CALL_MT);
  lua_getiuservalue(L, 1, 2); /* stays on the stack */
  *path = lua_tostring(L, -1);
  if (c->box == NULL || c->finished || c->ended)
    luaL_error(L, "host transport: %s: the call has ended", *path);
  return c;
}

/* Pushes true and the status when 'code' is OK, else false and it (the
 * call ended). */
static int op_result(lua_State *L, CallBox *c, int code, const protocall_Status *st,
                     const char *path) {
  if (code != PROTOCALL_OK) c->ended = 1;
  lua_pushboolean(L, code == PROTOCALL_OK);
  push_status(L, code, st, NULL, path);
  return 2;
}

/* -- true, status | false, status = core.host_send(call, bytes) */
static int lpc_host_send(lua_State *L) {
  const char *path;
  CallBox *c = check_call(L, &path);
  size_t len;
  const char *bytes = luaL_checklstring(L, 2, &len);
  protocall_Status st;
  memset(&st, 0, sizeof st);
  int code = c->box->t.send(L, c->box->t.ud, c->call, bytes, len, &st);
  return op_result(L, c, code, &st, path);
}

/* -- true, status | false, status = core.host_close_send(call) */
static int lpc_host_close_send(lua_State *L) {
  const char *path;
  CallBox *c = check_call(L, &path);
  protocall_Status st;
  memset(&st, 0, sizeof st);
  int code = c->box->t.close_send(L, c->box->t.ud, c->call, &st);
  return op_result(L, c, code, &st, path);
}

/* -- bytes, status | nil, status (ended OK) | false, status (failed)
 *      = core.host_recv(call) */
static int lpc_host_recv(lua_State *L) {
  const char *path;
  CallBox *c = check_call(L, &path);
  protocall_Status st;
  memset(&st, 0, sizeof st);
  const char *bytes = NULL;
  size_t len = 0;
  int code = c->box->t.recv(L, c->box->t.ud, c->call, &bytes, &len, &st);
  if (code == PROTOCALL_OK && bytes != NULL) {
    lua_pushlstring(L, bytes, len);
  } else {
    c->ended = 1;
    if (code == PROTOCALL_OK)
      lua_pushnil(L);
    else
      lua_pushboolean(L, 0);
  }
  push_status(L, code, &st, NULL, path);
  return 2;
}

/* -- core.host_finish(call): done with the call (cancelling it when it had
 * not ended); idempotent. */
static int lpc_host_finish(lua_State *L) {
  CallBox *c = luaL_checkudata(L, 1, CALL_MT);
  if (c->box != NULL) call_finish(c);
  return 0;
}

/* -- core.set_host_transport(ctor)   (host.lua: ctor(box, has_unary, has_start) -> transport) */
static int lpc_set_host_transport(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_settop(L, 1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &kTransportCtorKey);
  return 0;
}

/* -- Host time ---------------------------------------------------------------- */

void protocall_settime(lua_State *L, protocall_ClockFn *clock, protocall_SleepFn *sleep, void *ud) {
  lpc_Time *t = lpc_get_time(L);
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
  luaL_newmetatable(L, CALL_MT);
  lua_pushcfunction(L, lpc_call_gc);
  lua_setfield(L, -2, "__gc");
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_pop(L, 1);
  static const luaL_Reg funcs[] = {{"host_unary", lpc_host_unary},
                                   {"host_start", lpc_host_start},
                                   {"host_send", lpc_host_send},
                                   {"host_close_send", lpc_host_close_send},
                                   {"host_recv", lpc_host_recv},
                                   {"host_finish", lpc_host_finish},
                                   {"set_host_transport", lpc_set_host_transport},
                                   {NULL, NULL}};
  luaL_setfuncs(L, funcs, 0);
}

/* -- Host loops ------------------------------------------------------------ */

/* Pushes protocall.NAME (a function) of the opened module. */
static void push_module_function(lua_State *L, const char *name, const char *who) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  if (lua_getfield(L, -1, "protocall") != LUA_TTABLE || lua_getfield(L, -1, name) != LUA_TFUNCTION)
    luaL_error(L, "%s: open the module first (luaopen_protocall)", who);
  lua_replace(L, -3);
  lua_pop(L, 1);
}

int protocall_step(lua_State *L, double seconds) {
  push_module_function(L, "step", "protocall_step");
  lua_pushnumber(L, seconds);
  lua_call(L, 1, 1);
  int n = (int)lua_tointeger(L, -1);
  lua_pop(L, 1);
  return n;
}

int protocall_pollfds(lua_State *L, struct pollfd *fds, int max, double *timeout) {
  push_module_function(L, "poll_fds", "protocall_pollfds");
  lua_call(L, 0, 2);
  double t = lua_isnil(L, -1) ? -1 : lua_tonumber(L, -1);
  if (timeout != NULL) *timeout = t >= 0 && t < HUGE_VAL ? t : -1;
  int n = (int)luaL_len(L, -2);
  for (int i = 0; i < n && i < max; i++) {
    lua_geti(L, -2, i + 1);
    lua_geti(L, -1, 1);
    lua_geti(L, -2, 2);
    const char *ev = lua_tostring(L, -1);
    fds[i].fd = (int)lua_tointeger(L, -2);
    fds[i].events =
        (short)((ev && strchr(ev, 'r') ? POLLIN : 0) | (ev && strchr(ev, 'w') ? POLLOUT : 0));
    fds[i].revents = 0;
    lua_pop(L, 3);
  }
  lua_pop(L, 2);
  return n;
}
