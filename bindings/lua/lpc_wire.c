/* The wire codec as Lua functions: core.encode, core.decode and
 * core.load_descriptor_set (lua/protocall/wire.lua makes them pc.*).
 *
 * Decoding makes one "protocall.Arena" userdata first, so everything the
 * decoder allocates has an owner before anything can raise; the result is
 * a view of the root message anchored to that arena (no Lua object per
 * sub-message until Lua reads one). A message type whose fields are all
 * singular numbers, strings and bytes decodes straight into a standalone
 * message (one userdata, no arena; its strings point into the input
 * string, which it keeps), unless the input carries unknown fields. Encoding writes into a
 * per-state reusable buffer held by a userdata (an upvalue), so an error
 * raised by lua_pushlstring leaks nothing and small encodes allocate
 * nothing (an encode a finalizer runs while that buffer is being copied
 * makes one of its own). */
#include "wire/decode.h"
#include "wire/descriptor_set.h"
#include "wire/encode.h"
#include "lpc_options.h"
#include "wire/wire.h"

#include <lauxlib.h>
#include <stddef.h>
#include <string.h>

#define LPC_CODECSTATE     "protocall.CodecState"
/* A buffer grown past this is freed after use rather than kept. */
#define LPC_ENCODEBUF_KEEP ((size_t)64 * 1024)

/* Per-state scratch, the upvalue of encode and decode. */
typedef struct {
  pc_WireWriter w;       /* the encode buffer */
  pc_Arena *scratch;     /* decode's arena for all-number types; stays empty
                            (no block) unless the input had unknown fields */
  pc_Arena *tables;      /* decode's arena for {table = true}: the tree lives only
                            until it is copied, then the arena is reset */
  uintptr_t tables_busy; /* 'tables' holds a tree being copied (a decode
                            that runs meanwhile, from a finalizer, uses its
                            own): a busy mark (LPC_BUSY_MARK, lpc.h) */
  uintptr_t w_busy;      /* LuaJIT: 'w' holds bytes being copied into a
                            string (its lua_pushlstring steps the collector
                            first), and an encode a finalizer runs then takes
                            a buffer of its own (encode_aside): a busy mark,
                            so one the copy's error left is taken back */
  /* The last message metatable encode met and what it means, and the last
   * Type decode met. Saves the generic checks on the common loop of one
   * type. Slots 1 and 2 of the table in upvalue 2 of encode and decode hold
   * them, so an address cannot be reused while it is cached; a finalizer
   * that runs once per collection cycle (lpc_sentinel_gc) empties the cache, so
   * it never keeps a dropped type or its pool alive past the next cycle. */
  const void *mt;
  const pc_MessageDef *mt_def;
  int mt_standalone;
  const void *type;
  const pc_MessageDef *type_def;
  int type_flat;    /* flat_kind of type_def */
  void *type_plain; /* {table = true}'s plan of type_plain_def (lpc_plain_plan),
                       its names table in slot 3, or NULL before the first */
  const pc_MessageDef *type_plain_def;
} CodecState;

#define CODEC_STATE lua_upvalueindex(1)
#define CODEC_CACHE lua_upvalueindex(2)

/* Pops the value on top into cache slot 'slot' (see CodecState). */
static void cache(lua_State *L, int slot) {
  lua_rawseti(L, CODEC_CACHE, slot);
}

/* __gc of a sentinel userdata made once per collection cycle: forgets the cached
 * types (upvalue 1 the CodecState, 2 the cache table, 3 the sentinel's
 * metatable), then leaves a new sentinel for the next cycle. */
static int lpc_sentinel_gc(lua_State *L) {
  lpc_check_self(L, 3, "__gc", "the codec's sentinel");
  CodecState *cs = lua_touserdata(L, lua_upvalueindex(1));
  cs->mt = cs->type = NULL;
  cs->mt_def = cs->type_def = NULL;
  cs->type_plain = NULL;
  for (int slot = 1; slot <= 3; slot++) {
    lua_pushnil(L);
    lua_rawseti(L, lua_upvalueindex(2), slot);
  }
  lua_newuserdatauv(L, 0, 0);
  lua_pushvalue(L, lua_upvalueindex(3));
  lua_setmetatable(L, -2);
  return 0;
}

static int flat_kind(const pc_MessageDef *def);

/* The Type at 1 through the cache, or NULL when it is no Type. */
LPC_INLINE const pc_MessageDef *test_type(lua_State *L, CodecState *cs) {
  if (lua_type(L, 1) == LUA_TUSERDATA && lua_touserdata(L, 1) == cs->type) return cs->type_def;
  if (luaL_testudata(L, 1, LPC_TYPE_MT) == NULL) return NULL;
  const pc_MessageDef *def = lpc_check_type(L, 1);
  cs->type = lua_touserdata(L, 1);
  lua_pushvalue(L, 1);
  cache(L, 2);
  cs->type_def = def;
  cs->type_flat = flat_kind(def);
  cs->type_plain = NULL;
  return def;
}

/* The options pc.encode and pc.decode take (another key raises: a misspelt
 * option is not silently ignored). */
static const char *const kEncodeOptions[] = {"deterministic", "partial", NULL};
static const char *const kDecodeOptions[] = {"table", "extensions", "max_depth", "partial", NULL};

/* Reads pc.encode's options, the table at 'idx' (argument #idx), into
 * '*opts'; raises on an option it does not know. */
static void encode_options(lua_State *L, int idx, pc_EncodeOptions *opts) {
  if (!lua_istable(L, idx)) lpc_arg_type_error(L, idx, "encode", "table");
  lpc_check_options(L, idx, "encode", kEncodeOptions);
  opts->deterministic = lpc_opt_bool(L, idx, "encode", "deterministic");
  opts->partial = lpc_opt_bool(L, idx, "encode", "partial");
}

/* Reads pc.decode's options, the table at 'idx' (argument #idx), into
 * '*opts' and '*as_table'; raises on an option it does not know and on a
 * max_depth out of 1..PC_MESSAGE_MAX_DEPTH. */
static void decode_options(lua_State *L, int idx, pc_DecodeOptions *opts, int *as_table) {
  if (!lua_istable(L, idx)) lpc_arg_type_error(L, idx, "decode", "table");
  lpc_check_options(L, idx, "decode", kDecodeOptions);
  *as_table = lpc_opt_bool(L, idx, "decode", "table");
  opts->no_extensions = lua_getfield(L, idx, "extensions") != LUA_TNIL && !lua_toboolean(L, -1);
  lua_pop(L, 1);
  if (lpc_test_opt_int(L, idx, "max_depth", 1, PC_MESSAGE_MAX_DEPTH, &opts->max_depth) < 0)
    lpc_arg_error(L, idx, "decode",
                  lua_pushfstring(L, "max_depth must be in 1..%d", PC_MESSAGE_MAX_DEPTH));
  opts->partial = lpc_opt_bool(L, idx, "decode", "partial");
}

/* pc.encode(T, table [, opts]): the table's encoding pushed by the direct
 * path (lpc_table.c) and 1; else T{...} replaces the Type at 1 (raising
 * T{...}'s error for a table it refuses) and 0, and the caller encodes
 * that message with the options at 3. */
static int encode_table(lua_State *L) {
  if (lua_type(L, 2) != LUA_TTABLE) lpc_arg_type_error(L, 2, "encode", "table");
  pc_EncodeOptions opts = {0};
  if (!lua_isnoneornil(L, 3)) encode_options(L, 3, &opts);
  if (!opts.deterministic && lpc_encode_table(L, 1, 2)) return 1;
  lua_pushcfunction(L, lpc_type_call);
  lua_pushvalue(L, 1);
  lua_pushvalue(L, 2);
  lua_call(L, 2, 1);
  lua_replace(L, 1);
  lua_remove(L, 2);
  return 0;
}

/* The message at 1 and its type, as lpc_check_message, through the cache. */
static pc_Message *check_message(lua_State *L, CodecState *cs, const pc_MessageDef **def) {
  if (lua_type(L, 1) == LUA_TUSERDATA && lua_getmetatable(L, 1)) {
    int hit = lua_topointer(L, -1) == cs->mt;
    lua_pop(L, 1);
    if (hit) {
      void *p = lua_touserdata(L, 1);
      *def = cs->mt_def;
      return cs->mt_standalone ? p : *(pc_Message **)p;
    }
  }
  if (test_type(L, cs) != NULL && encode_table(L)) return NULL;
  pc_Message *msg = lpc_to_message(L, 1, def);
  if (msg == NULL) lpc_arg_type_error(L, 1, "encode", "message");
  lua_getmetatable(L, 1);
  cs->mt = lua_topointer(L, -1);
  cache(L, 1);
  cs->mt_def = *def;
  cs->mt_standalone = msg == lua_touserdata(L, 1);
  return msg;
}

/* The Type at 1, as lpc_check_type, through the cache. */
static const pc_MessageDef *check_type(lua_State *L, CodecState *cs) {
  const pc_MessageDef *def = test_type(L, cs);
  if (def == NULL) lpc_arg_type_error(L, 1, "decode", "protocall.Type");
  return def;
}

static int lpc_codecstate_gc(lua_State *L) {
  CodecState *cs = luaL_checkudata(L, 1, LPC_CODECSTATE);
  pc_WireWriter_Free(&cs->w);
  pc_Arena_Free(cs->scratch);
  pc_Arena_Free(cs->tables);
  cs->scratch = cs->tables = NULL;
  return 0;
}

/* __close of the CodecState, marked to be closed by a {table = true}
 * decode: the tables arena is free again, whether the copy returned or
 * raised. */
static void tables_done(CodecState *cs) {
  if (cs->tables != NULL) pc_Arena_Reset(cs->tables);
  cs->tables_busy = 0;
}

static int lpc_codecstate_close(lua_State *L) {
  /* closed on every {table = true} decode: the size check (lpc_check_self's
   * metatable compare costs 4% of a small one), which refuses what the
   * debug library can hand it but a userdata of this very size */
  CodecState *cs = lua_touserdata(L, 1);
  if (cs == NULL || lua_rawlen(L, 1) != sizeof(CodecState))
    lpc_arg_type_error(L, 1, "__close", LPC_CODECSTATE);
  tables_done(cs);
  return 0;
}

/* {table = true}: decodes into the reusable arena and pushes the plain
 * tables (1), or nil and the reason (2). 0 when the arena is in use. */
static int decode_to_table(lua_State *L, CodecState *cs, const pc_MessageDef *def,
                           const char *bytes, size_t len, const pc_DecodeOptions *opts) {
  if (LPC_IS_BUSY(cs->tables_busy)) return 0;
  if (cs->tables == NULL && (cs->tables = pc_Arena_New(NULL, NULL)) == NULL)
    return luaL_error(L, "not enough memory");
  cs->tables_busy = LPC_BUSY_MARK();
  lua_pushvalue(L, CODEC_STATE);
  lua_toclose(L, -1);
  pc_Error err;
  pc_Error_Init(&err);
  pc_Message *msg = pc_Message_New(def, cs->tables);
  pc_DecodeOptions table_opts = *opts;
  table_opts.alias = 1; /* the strings point into 'bytes', alive until the copy is made */
  pc_DecodeStatus st = msg == NULL ? kPc_DecodeStatus_OutOfMemory
                                   : pc_Decode(bytes, len, msg, def, cs->tables, &table_opts, &err);
  if (st == kPc_DecodeStatus_OutOfMemory) return luaL_error(L, "not enough memory");
  if (st != kPc_DecodeStatus_Ok) {
    lua_pushnil(L);
    lua_pushstring(L, err.msg);
    tables_done(cs); /* also on the normal returns: LuaJIT has no lua_toclose */
    return 2;
  }
  lpc_push_plain(L, 1, msg, def);
  tables_done(cs);
  return 1;
}

/* How a decoded message of type 'def' can be one standalone userdata (no
 * arena unless the input has unknown fields): kFlat_Numbers when every
 * field is a singular number; kFlat_Strings when the fields are singular
 * numbers, strings and bytes (the strings then point into the input
 * string, kept as the message's user value until it has a refs table, then
 * in it: lpc_push_refs); kFlat_No otherwise, or when the type
 * takes extensions. */
enum { kFlat_No, kFlat_Numbers, kFlat_Strings };

static int flat_kind(const pc_MessageDef *def) {
  if (def->extension_range_count > 0) return kFlat_No;
  int kind = kFlat_Numbers;
  for (uint32_t i = 0; i < def->field_count; i++) {
    pc_SlotKind slot = def->fields[i].slot;
    if (slot == kPc_Slot_String)
      kind = kFlat_Strings;
    else if (slot > kPc_Slot_64)
      return kFlat_No;
  }
  return kind;
}

/* pc.encode(msg) run while the state's writer is busy (LuaJIT: see
 * w_busy): into a writer of its own, owned by a CodecState userdata
 * pushed (its __gc frees it if lua_pushlstring raises). */
static int encode_aside(lua_State *L, pc_Message *msg, const pc_MessageDef *def,
                        const pc_EncodeOptions *opts) {
  CodecState *t = lua_newuserdatauv(L, sizeof *t, 0);
  memset(t, 0, sizeof *t);
  pc_WireWriter_Init(&t->w, NULL, NULL);
  luaL_setmetatable(L, LPC_CODECSTATE);
  pc_Error err;
  pc_Error_Init(&err);
  if (pc_Encode(msg, def, opts, &t->w, &err) != kPc_EncodeStatus_Ok) {
    pc_WireWriter_Free(&t->w);
    return luaL_error(L, "%s", err.msg);
  }
  lua_pushlstring(L, (const char *)pc_WireWriter_Data(&t->w), pc_WireWriter_Size(&t->w));
  pc_WireWriter_Free(&t->w);
  return 1;
}

/* -- bytes = pc.encode(m [, opts]) / pc.encode(T, table [, opts])
 * (the contract: lua/protocall/wire.lua). A table goes through
 * encode_table (lpc_table.c) unless deterministic; the nesting limit is
 * PC_ENCODE_MAX_DEPTH. */
static int lpc_codec_encode(lua_State *L) {
  const pc_MessageDef *def;
  CodecState *cs = lua_touserdata(L, CODEC_STATE);
  pc_Message *msg = check_message(L, cs, &def);
  if (msg == NULL) return 1; /* pc.encode(T, table): the direct path's bytes */
  pc_EncodeOptions opts = {0};
  if (!lua_isnoneornil(L, 2)) encode_options(L, 2, &opts);
  /* Lua 5.4's lua_pushlstring copies before its collector step, LuaJIT's
   * steps first: only there may 'w' be busy (w_busy) */
  if (LPC_LUAJIT && LPC_IS_BUSY(cs->w_busy)) return encode_aside(L, msg, def, &opts);
  pc_WireWriter *w = &cs->w;
  pc_Error err;
  pc_Error_Init(&err);
  pc_WireWriter_Reset(w);
  pc_EncodeStatus st = pc_Encode(msg, def, &opts, w, &err);
  if (st != kPc_EncodeStatus_Ok) {
    pc_WireWriter_Free(w);
    return luaL_error(L, "%s", err.msg);
  }
  if (LPC_LUAJIT) cs->w_busy = LPC_BUSY_MARK();
  lua_pushlstring(L, (const char *)pc_WireWriter_Data(w), pc_WireWriter_Size(w));
  if (LPC_LUAJIT) cs->w_busy = 0;
  if (w->cap > LPC_ENCODEBUF_KEEP) pc_WireWriter_Free(w);
  return 1;
}

/* -- m | nil, err = pc.decode(T, bytes [, opts])
 * (the contract: lua/protocall/wire.lua; max_depth at most
 * PC_MESSAGE_MAX_DEPTH). `table` reads with lpc_decode_plain
 * (lpc_plain.c). */
static int lpc_codec_decode(lua_State *L) {
  CodecState *cs = lua_touserdata(L, CODEC_STATE);
  const pc_MessageDef *def = check_type(L, cs);
  /* What the cache says of the type, read before anything allocates: an
   * allocation may run a finalizer whose own decode caches another type. */
  int type_flat = cs->type_flat;
  void *plain = cs->type_plain_def == def ? cs->type_plain : NULL;
  size_t len;
  if (lua_type(L, 2) != LUA_TSTRING) lpc_arg_type_error(L, 2, "decode", "string");
  const char *bytes = lua_tolstring(L, 2, &len);
  pc_DecodeOptions opts = {0};
  int as_table = 0;
  if (!lua_isnoneornil(L, 3)) decode_options(L, 3, &opts, &as_table);
  if (as_table) {
    if (plain != NULL && cs->type_plain == plain) { /* still cached: its names in slot 3 */
      lua_rawgeti(L, CODEC_CACHE, 3);
    } else {
      plain = lpc_plain_plan(L, 1, def); /* pushes its names */
      if (cs->type_def == def) {         /* cache them with the type */
        lua_pushvalue(L, -1);
        cache(L, 3);
        cs->type_plain = plain;
        cs->type_plain_def = def;
      }
    }
    int n = lpc_decode_plain(L, lua_gettop(L), plain, def, bytes, len, &opts);
    if (n == 0) n = decode_to_table(L, cs, def, bytes, len, &opts);
    if (n > 0) return n;
  }
  pc_Error err;
  pc_Error_Init(&err);
  pc_DecodeStatus st;
  int flat = as_table ? kFlat_No : type_flat; /* flat_kind(def), cached with the type */
  if (flat != kFlat_No) {
    pc_Message *msg = lua_newuserdatauv(L, def->size, flat == kFlat_Strings);
    pc_Message_Init(def, msg);
    lua_getiuservalue(L, 1, 2); /* the Type's metatable of standalone instances */
    lua_setmetatable(L, -2);
    /* The scratch arena is taken only now: the allocations above may run a
     * finalizer whose own decode frees it (unknown fields, below). */
    if (cs->scratch == NULL && (cs->scratch = pc_Arena_New(NULL, NULL)) == NULL)
      return luaL_error(L, "not enough memory");
    size_t empty = pc_Arena_SpaceAllocated(cs->scratch);
    pc_DecodeOptions flat_opts = opts;
    flat_opts.alias = 1; /* strings point into 'bytes', kept by the user value */
    st = pc_Decode(bytes, len, msg, def, cs->scratch, &flat_opts, &err);
    if (pc_Arena_SpaceAllocated(cs->scratch) == empty) {
      if (st == kPc_DecodeStatus_Ok) {
        if (flat == kFlat_Strings) { /* the input, where the refs table goes (lpc_message.h) */
          lua_pushvalue(L, 2);
          lua_setiuservalue(L, -2, 1);
        }
        return 1;
      }
      lua_pushnil(L);
      lua_pushstring(L, err.msg);
      return 2;
    }
    /* Unknown fields went to the scratch arena: drop it, decode again below. */
    pc_Arena_Free(cs->scratch);
    cs->scratch = NULL;
    lua_pop(L, 1);
    pc_Error_Init(&err);
  }
  pc_Arena *a = lpc_new_arena(L);
  int arena_idx = lua_gettop(L);
  pc_Message *msg = pc_Message_New(def, a);
  if (msg == NULL) return luaL_error(L, "not enough memory");
  st = pc_Decode(bytes, len, msg, def, a, &opts, &err);
  if (as_table) { /* the tables arena was in use: this tree's own arena */
    /* The tree lives only until it is copied: freed here (or by the Arena's
     * __gc if copying raises), so the collector is not told about it. */
    if (st == kPc_DecodeStatus_Ok) lpc_push_plain(L, 1, msg, def);
    lpc_free_arena(L, arena_idx);
    if (st == kPc_DecodeStatus_Ok) return 1;
  } else {
    lpc_pace_arena(L, arena_idx);
  }
  if (st == kPc_DecodeStatus_OutOfMemory) return luaL_error(L, "not enough memory");
  if (st != kPc_DecodeStatus_Ok) {
    lua_pushnil(L);
    lua_pushstring(L, err.msg);
    return 2;
  }
  lpc_push_view(L, def, msg, arena_idx);
  return 1;
}

/* -- names | nil, err = core.load_descriptor_set(pool, bytes)
 * Adds every file of a serialized FileDescriptorSet to 'pool' (files the
 * pool already has by name are skipped). Returns the list of the added
 * files' names in order, or nil and the reason. */
/* A set made without --include_imports names well-known types it does not
 * carry: add the built-in files it imports and lacks first (as pc.load
 * does for an import). A set that does not read is left to
 * pc_Pool_AddDescriptorSet to report. */
static void load_builtin_imports(lua_State *L, pc_Pool *pool, const char *bytes, size_t len) {
  pc_Arena *a = lpc_new_arena(L);
  pc_FileDesc *files;
  size_t count;
  if (pc_DescriptorSet_Read(bytes, len, a, &files, &count, NULL)) {
    for (size_t i = 0; i < count; i++) {
      for (size_t d = 0; d < files[i].dependency_count; d++) {
        const char *dep = files[i].dependencies[d];
        size_t k = 0;
        while (k < count && strcmp(files[k].name, dep) != 0) k++;
        if (k == count) lpc_load_builtin(L, pool, dep);
      }
    }
  }
  lua_pop(L, 1); /* the arena, to the collector */
}

/* -- ok [, why] = pc.is_initialized(m)   (lua/protocall/wire.lua) */
static int lpc_codec_is_initialized(lua_State *L) {
  const pc_MessageDef *def;
  pc_Message *msg = lpc_to_message(L, 1, &def);
  if (msg == NULL) lpc_arg_type_error(L, 1, "is_initialized", "message");
  if (pc_Message_CheckRequired(msg, def, NULL) == 0) {
    lua_pushboolean(L, 1);
    return 1;
  }
  /* the words only once a field is known missing: a second walk */
  pc_Error err;
  pc_Error_Init(&err);
  pc_Message_CheckRequired(msg, def, &err);
  lua_pushboolean(L, 0);
  lua_pushstring(L, err.msg);
  return 2;
}

static int lpc_codec_load_descriptor_set(lua_State *L) {
  pc_Pool *pool = lpc_check_pool(L, 1);
  size_t len;
  if (lua_type(L, 2) != LUA_TSTRING) luaL_typeerror(L, 2, "string");
  const char *bytes = lua_tolstring(L, 2, &len);
  pc_Error err;
  pc_Error_Init(&err);
  load_builtin_imports(L, pool, bytes, len);
  size_t first;
  long added = pc_Pool_AddDescriptorSet(pool, bytes, len, &first, &err);
  if (added < 0) {
    lua_pushnil(L);
    lua_pushstring(L, err.msg);
    return 2;
  }
  lua_createtable(L, (int)added, 0);
  for (long i = 0; i < added; i++) {
    lua_pushstring(L, pc_Pool_File(pool, first + (size_t)i)->name);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* -- core.check_codec_options(opts, fname, arg)   (lua/protocall/ffi/struct.lua)
 * Raises what pc.encode (fname "encode") or pc.decode ("decode") raises
 * for 'opts' given as its argument #arg (2 or 3): not a table, an option
 * it does not know, a bad max_depth. pc.ffi structs' encode and decode
 * check their options so. */
static int lpc_codec_check_options(lua_State *L) {
  int decode = strcmp(luaL_checkstring(L, 2), "decode") == 0;
  int arg = (int)luaL_checkinteger(L, 3);
  luaL_argcheck(L, arg == 2 || arg == 3, 3, "2 or 3 expected");
  lua_pushvalue(L, 1);
  lua_replace(L, arg); /* the table at its argument's index, as the codec reads it */
  if (decode) {
    pc_DecodeOptions opts = {0};
    int as_table;
    decode_options(L, arg, &opts, &as_table);
  } else {
    pc_EncodeOptions opts = {0};
    encode_options(L, arg, &opts);
  }
  return 0;
}

void lpc_open_wire(lua_State *L) {
  CodecState *cs = lua_newuserdatauv(L, sizeof *cs, 0);
  pc_WireWriter_Init(&cs->w, NULL, NULL);
  cs->scratch = cs->tables = NULL;
  cs->tables_busy = cs->w_busy = 0;
  cs->mt = cs->type = NULL;
  cs->mt_def = cs->type_def = NULL;
  cs->type_flat = 0;
  cs->type_plain = NULL;
  cs->type_plain_def = NULL;
  cs->mt_standalone = 0;
  if (luaL_newmetatable(L, LPC_CODECSTATE)) {
    lua_pushcfunction(L, lpc_codecstate_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, lpc_codecstate_close);
    lua_setfield(L, -2, "__close");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
  }
  lua_setmetatable(L, -2);
  lua_createtable(L, 3, 0); /* the cache: storing into it allocates nothing */
  /* The first sentinel: a garbage userdata (a table's __gc is Lua 5.4's,
   * not LuaJIT's) whose __gc (lpc_sentinel_gc) runs at the end of the next
   * cycle and leaves the next sentinel. */
  lua_createtable(L, 0, 1); /* its metatable */
  lua_pushvalue(L, -3);
  lua_pushvalue(L, -3);
  lua_pushvalue(L, -3);
  lua_pushcclosure(L, lpc_sentinel_gc, 3);
  lua_setfield(L, -2, "__gc");
  lua_newuserdatauv(L, 0, 0);
  lua_insert(L, -2);
  lua_setmetatable(L, -2);
  lua_pop(L, 1);
  lua_pushvalue(L, -2);
  lua_pushvalue(L, -2);
  lua_pushcclosure(L, lpc_codec_encode, 2);
  lua_setfield(L, -4, "encode");
  lua_pushcclosure(L, lpc_codec_decode, 2);
  lua_setfield(L, -2, "decode");
  lua_pushcfunction(L, lpc_codec_is_initialized);
  lua_setfield(L, -2, "is_initialized");
  lua_pushcfunction(L, lpc_codec_check_options);
  lua_setfield(L, -2, "check_codec_options");
  lua_pushcfunction(L, lpc_codec_load_descriptor_set);
  lua_setfield(L, -2, "load_descriptor_set");
}
