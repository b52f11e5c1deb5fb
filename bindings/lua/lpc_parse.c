/* core.parse_proto: the .proto parser and resolver (core/compiler/load.h)
 * from Lua, INTERNAL: for specs and benchmarks until pc.load / pc.load_file
 * feed the schema pool. Descriptions come back as plain Lua tables shaped
 * like descriptor.proto's FileDescriptorProto (field names as there, enums
 * as numbers, options as their serialized bytes). */
#include "base/arena.h"
#include "lpc.h"
#include "compiler/load.h"

#include <lauxlib.h>
#include <string.h>

#define ARENA_MT "protocall.ProtoArena"

typedef struct {
  pc_Arena *a;
} Box;

static int lpc_protoarena_gc(lua_State *L) {
  Box *b = luaL_checkudata(L, 1, ARENA_MT);
  pc_Arena_Free(b->a);
  b->a = NULL;
  return 0;
}

typedef struct {
  lua_State *L;
  int sources; /* stack index of the sources table, or 0 */
} Src;

static int lua_source(void *ud, const char *name, const char **src, size_t *len, pc_Error *err) {
  Src *s = ud;
  (void)err;
  if (s->sources == 0) return 0;
  lua_pushstring(s->L, name);
  lua_rawget(s->L, s->sources);
  if (lua_type(s->L, -1) != LUA_TSTRING) {
    lua_pop(s->L, 1);
    return 0;
  }
  *src = lua_tolstring(s->L, -1, len);
  lua_pop(s->L, 1); /* the sources table keeps the string alive */
  return 1;
}

static void set_str(lua_State *L, const char *k, const char *v) {
  if (v == NULL) return;
  lua_pushstring(L, v);
  lua_setfield(L, -2, k);
}

static void set_int(lua_State *L, const char *k, lua_Integer v) {
  lua_pushinteger(L, v);
  lua_setfield(L, -2, k);
}

static void set_opts(lua_State *L, const pc_OptionsDesc *o) {
  if (!o->present) return;
  lua_pushlstring(L, (const char *)o->data, o->size);
  lua_setfield(L, -2, "options");
}

static void push_field(lua_State *L, const pc_FieldDesc *f) {
  lua_createtable(L, 0, 8);
  set_str(L, "name", f->name);
  set_int(L, "number", f->number);
  set_int(L, "label", f->label);
  if (f->type) set_int(L, "type", f->type);
  set_str(L, "type_name", f->type_name);
  set_str(L, "extendee", f->extendee);
  if (f->default_value) {
    lua_pushlstring(L, f->default_value,
                    f->default_value_len ? f->default_value_len : strlen(f->default_value));
    lua_setfield(L, -2, "default_value");
  }
  if (f->oneof_index >= 0) set_int(L, "oneof_index", f->oneof_index);
  set_str(L, "json_name", f->json_name);
  if (f->proto3_optional) {
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "proto3_optional");
  }
  set_opts(L, &f->options);
}

static void push_fields(lua_State *L, const char *k, const pc_FieldDesc *fs, size_t n) {
  lua_createtable(L, (int)n, 0);
  for (size_t i = 0; i < n; i++) {
    push_field(L, &fs[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, k);
}

static void push_ranges(lua_State *L, const char *k, const pc_RangeDesc *r, size_t n) {
  lua_createtable(L, (int)n, 0);
  for (size_t i = 0; i < n; i++) {
    lua_createtable(L, 0, 2);
    set_int(L, "start", r[i].start);
    set_int(L, "end", r[i].end);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, k);
}

static void push_names(lua_State *L, const char *k, const char *const *s, size_t n) {
  lua_createtable(L, (int)n, 0);
  for (size_t i = 0; i < n; i++) {
    lua_pushstring(L, s[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, k);
}

static void push_enums(lua_State *L, const pc_EnumDesc *es, size_t n) {
  lua_createtable(L, (int)n, 0);
  for (size_t i = 0; i < n; i++) {
    const pc_EnumDesc *e = &es[i];
    lua_createtable(L, 0, 4);
    set_str(L, "name", e->name);
    lua_createtable(L, (int)e->value_count, 0);
    for (size_t k = 0; k < e->value_count; k++) {
      lua_createtable(L, 0, 2);
      set_str(L, "name", e->values[k].name);
      set_int(L, "number", e->values[k].number);
      set_opts(L, &e->values[k].options);
      lua_rawseti(L, -2, (lua_Integer)k + 1);
    }
    lua_setfield(L, -2, "value");
    set_opts(L, &e->options);
    push_ranges(L, "reserved_range", e->reserved_ranges, e->reserved_range_count);
    push_names(L, "reserved_name", e->reserved_names, e->reserved_name_count);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "enum_type");
}

static void push_message(lua_State *L, const pc_MessageDesc *m) {
  luaL_checkstack(L, 8, "message nesting");
  lua_createtable(L, 0, 10);
  set_str(L, "name", m->name);
  push_fields(L, "field", m->fields, m->field_count);
  push_fields(L, "extension", m->extensions, m->extension_count);
  lua_createtable(L, (int)m->nested_count, 0);
  for (size_t i = 0; i < m->nested_count; i++) {
    push_message(L, &m->nested[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "nested_type");
  push_enums(L, m->enums, m->enum_count);
  lua_createtable(L, (int)m->extension_range_count, 0);
  for (size_t i = 0; i < m->extension_range_count; i++) {
    lua_createtable(L, 0, 3);
    set_int(L, "start", m->extension_ranges[i].range.start);
    set_int(L, "end", m->extension_ranges[i].range.end);
    set_opts(L, &m->extension_ranges[i].options);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "extension_range");
  lua_createtable(L, (int)m->oneof_count, 0);
  for (size_t i = 0; i < m->oneof_count; i++) {
    lua_createtable(L, 0, 2);
    set_str(L, "name", m->oneofs[i].name);
    set_opts(L, &m->oneofs[i].options);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "oneof_decl");
  set_opts(L, &m->options);
  push_ranges(L, "reserved_range", m->reserved_ranges, m->reserved_range_count);
  push_names(L, "reserved_name", m->reserved_names, m->reserved_name_count);
}

static void push_file(lua_State *L, const pc_FileDesc *f) {
  lua_createtable(L, 0, 10);
  set_str(L, "name", f->name);
  set_str(L, "package", f->package);
  push_names(L, "dependency", f->dependencies, f->dependency_count);
  lua_createtable(L, (int)f->public_dependency_count, 0);
  for (size_t i = 0; i < f->public_dependency_count; i++) {
    lua_pushinteger(L, f->public_dependencies[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "public_dependency");
  lua_createtable(L, (int)f->message_count, 0);
  for (size_t i = 0; i < f->message_count; i++) {
    push_message(L, &f->messages[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "message_type");
  push_enums(L, f->enums, f->enum_count);
  lua_createtable(L, (int)f->service_count, 0);
  for (size_t i = 0; i < f->service_count; i++) {
    const pc_ServiceDesc *s = &f->services[i];
    lua_createtable(L, 0, 3);
    set_str(L, "name", s->name);
    lua_createtable(L, (int)s->method_count, 0);
    for (size_t k = 0; k < s->method_count; k++) {
      const pc_MethodDesc *md = &s->methods[k];
      lua_createtable(L, 0, 6);
      set_str(L, "name", md->name);
      set_str(L, "input_type", md->input_type);
      set_str(L, "output_type", md->output_type);
      set_opts(L, &md->options);
      lua_pushboolean(L, md->client_streaming);
      lua_setfield(L, -2, "client_streaming");
      lua_pushboolean(L, md->server_streaming);
      lua_setfield(L, -2, "server_streaming");
      lua_rawseti(L, -2, (lua_Integer)k + 1);
    }
    lua_setfield(L, -2, "method");
    set_opts(L, &s->options);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "service");
  push_fields(L, "extension", f->extensions, f->extension_count);
  set_opts(L, &f->options);
  lua_pushstring(L, f->syntax == kPc_Syntax_Proto3 ? "proto3" : "proto2");
  lua_setfield(L, -2, "syntax");
}

/* -- files | count = core.parse_proto(names, sources [, count_only])
 *    -- nil, err
 * INTERNAL (specs, benchmarks). Loads each import name in 'names' (a string
 * or an array of strings) with its imports, resolved; .proto text comes
 * from 'sources' (a table import name -> text; nil for none), the
 * well-known types are built in. Returns the array of file descriptions
 * (imports first, each file once), or their number when 'count_only' is
 * true; nil and "file.proto:line:column: what is wrong" on an error.
 * Raises only on bad argument types or out of memory. */
static int lpc_parse_proto(lua_State *L) {
  int many = lua_istable(L, 1);
  if (!many) luaL_checkstring(L, 1);
  if (!lua_isnoneornil(L, 2)) luaL_checktype(L, 2, LUA_TTABLE);
  int count_only = lua_toboolean(L, 3);
  lua_settop(L, 3); /* the arena's box at 4, never where the sources table may be */
  void *aud;
  lua_Alloc alloc = lua_getallocf(L, &aud);
  Box *box = lua_newuserdatauv(L, sizeof *box, 0);
  box->a = NULL;
  luaL_setmetatable(L, ARENA_MT);
  box->a = pc_Arena_New(alloc, aud);
  if (box->a == NULL) return luaL_error(L, "out of memory");
  Src src = {L, lua_isnoneornil(L, 2) ? 0 : 2};
  pc_ProtoSet set = {0};
  pc_Error err;
  pc_Error_Init(&err);
  lua_Integer n = many ? luaL_len(L, 1) : 1;
  for (lua_Integer i = 1; i <= n; i++) {
    const char *name;
    if (many) {
      lua_rawgeti(L, 1, i);
      name = lua_tostring(L, -1);
      if (name == NULL) return luaL_error(L, "names[%d]: string expected", (int)i);
    } else {
      name = lua_tostring(L, 1);
    }
    pc_FileDesc *f = pc_LoadProto(box->a, &set, name, lua_source, &src, &err);
    if (many) lua_pop(L, 1);
    if (f == NULL) {
      luaL_pushfail(L);
      lua_pushstring(L, err.msg);
      return 2;
    }
  }
  if (count_only) {
    lua_pushinteger(L, (lua_Integer)set.count);
  } else {
    lua_createtable(L, (int)set.count, 0);
    for (size_t i = 0; i < set.count; i++) {
      push_file(L, set.files[i]);
      lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
  }
  pc_Arena_Free(box->a); /* now, not at the next collection */
  box->a = NULL;
  return 1;
}

void lpc_open_parse(lua_State *L) {
  if (luaL_newmetatable(L, ARENA_MT)) {
    lua_pushcfunction(L, lpc_protoarena_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  lua_pushcfunction(L, lpc_parse_proto);
  lua_setfield(L, -2, "parse_proto");
}
