/* Loading .proto source into a pool, and services as Lua values.
 *
 *   pool:load(source, opts), pool:load_file(path, opts)   (lua/protocall/schema/init.lua)
 *   pool:service(full_name)
 *
 * Parsing, resolving and importing are the core's (compiler/import.h:
 * file text from a string or the import paths, the load seeded with the
 * files the pool already holds); this file turns Lua arguments into an
 * import and services into Lua tables. */
#include "compiler/import.h"
#include "lpc.h"
#include "schema/def.h"
#include "schema/wkt.h"
#include "wire/descriptor_write.h"
#include "wire/wire.h"

#include <lauxlib.h>
#include <stdio.h>
#include <string.h>

/* -- name | nil, err = core.load_proto(pool, name, source|nil, {import_path, ...})
 * Loads the file 'name' (its text is 'source', or read through the import
 * paths when 'source' is nil) with everything it imports into 'pool'.
 * Returns the file's name; nil and "file.proto:line:col: ..." on a parse,
 * resolve or pool error. Files the pool already holds are reused, not read;
 * nothing is added unless the whole file set resolved. */
static int lpc_load_proto(lua_State *L) {
  pc_Pool *pool = lpc_check_pool(L, 1);
  const char *name = luaL_checkstring(L, 2);
  pc_ImportCtx c;
  memset(&c, 0, sizeof c);
  if (!lua_isnil(L, 3)) {
    c.main_name = name;
    c.main_source = luaL_checklstring(L, 3, &c.main_len);
  }
  luaL_checktype(L, 4, LUA_TTABLE);
  if (pc_Pool_IsFrozen(pool)) {
    lua_pushnil(L);
    lua_pushfstring(L, "%s: pool is frozen", name);
    return 2;
  }
  c.arena = lpc_new_arena(L); /* scratch, freed by the collector */
  int arena_idx = lua_gettop(L);
  c.path_count = lua_rawlen(L, 4);
  c.paths = pc_Arena_Malloc(c.arena, (c.path_count + 1) * sizeof(char *));
  if (c.paths == NULL) return luaL_error(L, "out of memory");
  for (size_t i = 0; i < c.path_count; i++) {
    lua_rawgeti(L, 4, (lua_Integer)i + 1);
    size_t len;
    const char *p = lua_tolstring(L, -1, &len);
    if (p == NULL) return luaL_error(L, "import_paths[%d]: string expected", (int)i + 1);
    c.paths[i] = pc_Arena_StrDup(c.arena, p, len);
    if (c.paths[i] == NULL) return luaL_error(L, "out of memory");
    lua_pop(L, 1);
  }
  pc_Error err;
  pc_Error_Init(&err);
  if (!pc_Import(pool, &c, name, &err)) {
    lua_pushnil(L);
    lua_pushstring(L, err.set ? err.msg : "load failed");
    return 2;
  }
  lpc_pace_arena(L, arena_idx);
  lua_pushstring(L, name);
  return 1;
}

/* -- info | nil = core.file_info(pool, name)
 * {name=, package=, syntax="proto2"|"proto3", messages={full names},
 *  enums={full names}, services={full names}, dependencies={names}} */
static int lpc_file_info(lua_State *L) {
  pc_Pool *pool = lpc_check_pool(L, 1);
  const char *name = luaL_checkstring(L, 2);
  const pc_FileDef *f = lpc_has_nul(L, 2) ? NULL : pc_Pool_FindFile(pool, name);
  if (f == NULL) return 0;
  lua_createtable(L, 0, 7);
  lua_pushstring(L, f->name);
  lua_setfield(L, -2, "name");
  lua_pushstring(L, f->package);
  lua_setfield(L, -2, "package");
  lua_pushstring(L, f->syntax == kPc_Syntax_Proto3 ? "proto3" : "proto2");
  lua_setfield(L, -2, "syntax");
  lua_createtable(L, (int)f->message_count, 0);
  for (uint32_t i = 0; i < f->message_count; i++) {
    lua_pushstring(L, f->messages[i].full_name);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "messages");
  lua_createtable(L, (int)f->enum_count, 0);
  for (uint32_t i = 0; i < f->enum_count; i++) {
    lua_pushstring(L, f->enums[i].full_name);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "enums");
  lua_createtable(L, (int)f->service_count, 0);
  for (uint32_t i = 0; i < f->service_count; i++) {
    lua_pushstring(L, f->services[i].full_name);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "services");
  lua_createtable(L, (int)f->desc->dependency_count, 0);
  for (size_t i = 0; i < f->desc->dependency_count; i++) {
    lua_pushstring(L, f->desc->dependencies[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "dependencies");
  return 1;
}

/* The description of the method 'i' of service 's' in its file's
 * description; NULL when there is none. */
static const pc_MethodDesc *method_desc(const pc_ServiceDef *s, uint32_t i) {
  const pc_FileDesc *fd = s->file ? s->file->desc : NULL;
  if (fd == NULL) return NULL;
  for (size_t k = 0; k < fd->service_count; k++) {
    const pc_ServiceDesc *sd = &fd->services[k];
    if (strcmp(sd->name, s->name) == 0 && i < sd->method_count) return &sd->methods[i];
  }
  return NULL;
}

/* The idempotency_level (MethodOptions field 34) of the method described
 * by 'md' (NULL: none) as written: 1 NO_SIDE_EFFECTS, 2 IDEMPOTENT, 0
 * unknown or not given. */
static int method_idempotency(const pc_MethodDesc *md) {
  if (md == NULL) return 0;
  const pc_OptionsDesc *o = &md->options;
  const uint8_t *p = o->data, *end = o->data + o->size;
  int level = 0;
  while (p != NULL && p < end) {
    uint32_t field;
    pc_WireType wt;
    pc_WireStatus st;
    const uint8_t *at;
    p = pc_Wire_ReadTag(p, end, &field, &wt, &st);
    if (p == NULL) break;
    if (field == 34 && wt == kPc_Wire_Varint) {
      uint64_t v;
      p = pc_Wire_ReadVarint(p, end, &v, &st);
      if (p != NULL) level = v <= 2 ? (int)v : 0;
    } else {
      p = pc_Wire_SkipField(p, end, field, wt, 64, &st, &at);
    }
  }
  return level;
}

/* -- info | nil = core.service_info(pool, full_name)
 * {name=, full_name=, methods={{name=, full_name=, path="/pkg.Svc/M",
 *  input=Type, output=Type, client_streaming=bool, server_streaming=bool,
 *  idempotency_level = "NO_SIDE_EFFECTS" | "IDEMPOTENT" | nil (the
 *  method option; nil when unknown), file = the file's name, line =,
 *  column = (from 1) where its .proto source declares it (its name; nil
 *  when the file came from a descriptor set, reflection or Lua
 *  declarations), option_positions = {[field number] = {line =, column
 *  =}, ...}: where the source sets each custom option of the method (an
 *  extension's number, the option's name; nil when none or unknown)},
 *  ...}} with methods also indexed by name. */
static int lpc_service_info(lua_State *L) {
  pc_Pool *pool = lpc_check_pool(L, 1);
  const char *name = luaL_checkstring(L, 2);
  const pc_ServiceDef *s = lpc_has_nul(L, 2) ? NULL : pc_Pool_FindService(pool, name);
  if (s == NULL) return 0;
  lua_createtable(L, 0, 3);
  lua_pushstring(L, s->name);
  lua_setfield(L, -2, "name");
  lua_pushstring(L, s->full_name);
  lua_setfield(L, -2, "full_name");
  lua_createtable(L, (int)s->method_count, (int)s->method_count);
  for (uint32_t i = 0; i < s->method_count; i++) {
    const pc_MethodDef *m = &s->methods[i];
    lua_createtable(L, 0, 10);
    lua_pushstring(L, m->name);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, m->full_name);
    lua_setfield(L, -2, "full_name");
    lua_pushfstring(L, "/%s/%s", s->full_name, m->name);
    lua_setfield(L, -2, "path");
    lpc_push_type(L, m->input);
    lua_setfield(L, -2, "input");
    lpc_push_type(L, m->output);
    lua_setfield(L, -2, "output");
    lua_pushboolean(L, m->client_streaming);
    lua_setfield(L, -2, "client_streaming");
    lua_pushboolean(L, m->server_streaming);
    lua_setfield(L, -2, "server_streaming");
    if (s->file != NULL) {
      lua_pushstring(L, s->file->name);
      lua_setfield(L, -2, "file");
    }
    const pc_MethodDesc *md = method_desc(s, i);
    if (md != NULL && md->line > 0) {
      lua_pushinteger(L, md->line);
      lua_setfield(L, -2, "line");
      lua_pushinteger(L, md->column);
      lua_setfield(L, -2, "column");
    }
    if (md != NULL && md->option_position_count > 0) {
      lua_createtable(L, 0, (int)md->option_position_count);
      for (size_t k = 0; k < md->option_position_count; k++) {
        const pc_OptionPos *at = &md->option_positions[k];
        lua_createtable(L, 0, 2);
        lua_pushinteger(L, at->line);
        lua_setfield(L, -2, "line");
        lua_pushinteger(L, at->column);
        lua_setfield(L, -2, "column");
        lua_rawseti(L, -2, at->number);
      }
      lua_setfield(L, -2, "option_positions");
    }
    int level = method_idempotency(md);
    if (level) {
      lua_pushstring(L, level == 1 ? "NO_SIDE_EFFECTS" : "IDEMPOTENT");
      lua_setfield(L, -2, "idempotency_level");
    }
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, m->name);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "methods");
  return 1;
}

/* -- names = core.file_names(pool)
 * The names of the files the pool holds, in the order they were added
 * (a file's imports before it). */
static int lpc_file_names(lua_State *L) {
  const pc_Pool *pool = lpc_check_pool(L, 1);
  size_t n = pc_Pool_FileCount(pool);
  lua_createtable(L, (int)n, 0);
  for (size_t i = 0; i < n; i++) {
    lua_pushstring(L, pc_Pool_File(pool, i)->name);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  return 1;
}

/* -- text | nil = core.builtin_source(name)
 * The .proto text of the built-in file 'name' (schema/wkt.h: the
 * well-known types, gRPC's health and reflection); nil for another name. */
static int lpc_builtin_source(lua_State *L) {
  size_t len;
  const char *name = luaL_checkstring(L, 1);
  const char *src = lpc_has_nul(L, 1) ? NULL : pc_Wkt_Source(name, &len);
  if (src == NULL) return 0;
  lua_pushlstring(L, src, len);
  return 1;
}

#define WRITER_MT "protocall.DescriptorWriter"

static int lpc_writer_gc(lua_State *L) {
  pc_WireWriter_Free(luaL_checkudata(L, 1, WRITER_MT));
  return 0;
}

/* -- bytes | nil = core.file_descriptor_bytes(pool, name)
 * The loaded file 'name' serialized as a google.protobuf.FileDescriptorProto
 * (core/wire/descriptor_write.h: protoc's bytes); nil when the pool has no file
 * of that name. Raises when memory runs out. */
static int lpc_file_descriptor_bytes(lua_State *L) {
  pc_Pool *pool = lpc_check_pool(L, 1);
  const char *name = luaL_checkstring(L, 2);
  const pc_FileDesc *fd = lpc_has_nul(L, 2) ? NULL : pc_Pool_FileDesc(pool, name);
  if (fd == NULL) return 0;
  /* The buffer belongs to a userdata, so a raising push cannot leak it. */
  pc_WireWriter *w = lua_newuserdatauv(L, sizeof *w, 0);
  void *ud;
  lua_Alloc alloc = lua_getallocf(L, &ud);
  pc_WireWriter_Init(w, alloc, ud);
  luaL_setmetatable(L, WRITER_MT);
  pc_Error err;
  pc_Error_Init(&err);
  if (!pc_FileDesc_Write(fd, w, &err)) return luaL_error(L, "%s", err.msg);
  lua_pushlstring(L, (const char *)pc_WireWriter_Data(w), pc_WireWriter_Size(w));
  pc_WireWriter_Free(w);
  return 1;
}

void lpc_open_compiler(lua_State *L) {
  luaL_newmetatable(L, WRITER_MT);
  lua_pushcfunction(L, lpc_writer_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  static const luaL_Reg funcs[] = {{"load_proto", lpc_load_proto},
                                   {"file_info", lpc_file_info},
                                   {"file_names", lpc_file_names},
                                   {"builtin_source", lpc_builtin_source},
                                   {"file_descriptor_bytes", lpc_file_descriptor_bytes},
                                   {"service_info", lpc_service_info},
                                   {NULL, NULL}};
  luaL_setfuncs(L, funcs, 0);
}
