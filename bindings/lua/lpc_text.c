/* Text format: core.from_text over core/text/text.h (pc.from_text in
 * lua/protocall/text.lua), and core.text_extensions, which lists the
 * extensions set on a message for the printer there (the values are read
 * with pc.get_extension). from_text makes its "protocall.Arena" userdata
 * first, so everything the parser allocates has an owner before anything
 * can raise; the result is a view anchored to it. */
#include "lpc_options.h"
#include "text/text.h"

#include <lauxlib.h>
#include <string.h>

/* -- list = core.text_extensions(m)
 * The extensions set on 'm' in field-number order, each {name = full name,
 * number =, type = "int32" | "message" | "group" | ..., type_name = the
 * message or enum type's full name (or nil), label = "optional" |
 * "repeated"}. Raises on a non-message. */
static int lpc_text_extensions(lua_State *L) {
  pc_Message *msg = lpc_check_message(L, 1, "text_extensions", NULL);
  size_t n;
  const pc_Extension *ext = pc_Message_Extensions(msg, &n);
  lua_createtable(L, (int)n, 0);
  for (size_t i = 0; i < n; i++) {
    const pc_FieldDef *f = ext[i].field;
    lua_createtable(L, 0, 5);
    lua_pushstring(L, f->full_name);
    lua_setfield(L, -2, "name");
    lua_pushinteger(L, f->number);
    lua_setfield(L, -2, "number");
    lua_pushstring(L, pc_FieldType_Name(f->type));
    lua_setfield(L, -2, "type");
    if (f->message != NULL || f->enumdef != NULL) {
      lua_pushstring(L, f->message != NULL ? f->message->full_name : f->enumdef->full_name);
      lua_setfield(L, -2, "type_name");
    }
    lua_pushstring(L, f->label == kPc_Label_Repeated ? "repeated" : "optional");
    lua_setfield(L, -2, "label");
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  return 1;
}

/* -- m | nil, err = pc.from_text(T, s [, opts])   (the contract:
 * lua/protocall/text.lua; the grammar: core/text/text.h) */
static int lpc_from_text(lua_State *L) {
  static const char *const names[] = {"max_depth", "pool", NULL};
  size_t len;
  const char *s;
  const pc_MessageDef *def = lpc_check_parse_args(L, "from_text", &s, &len);
  lpc_check_options(L, 3, "from_text", names);
  pc_TextParseOptions o;
  memset(&o, 0, sizeof o);
  o.max_depth =
      lpc_opt_int(L, 3, "from_text", "max_depth", 1, PC_TEXT_MAX_DEPTH, PC_TEXT_DEFAULT_DEPTH);
  o.pool = lpc_opt_pool(L, 3, "from_text");
  pc_Arena *a = lpc_new_arena(L);
  int arena_idx = lua_gettop(L);
  pc_Message *msg = pc_Message_New(def, a);
  if (msg == NULL) return luaL_error(L, "not enough memory");
  pc_Error err;
  pc_Error_Init(&err);
  pc_TextStatus st = pc_Text_Parse(s, len, msg, def, a, &o, &err);
  lpc_pace_arena(L, arena_idx);
  if (st == kPc_TextStatus_OutOfMemory) return luaL_error(L, "not enough memory");
  if (st != kPc_TextStatus_Ok) {
    lua_pushnil(L);
    lua_pushstring(L, err.msg);
    return 2;
  }
  lpc_push_view(L, def, msg, arena_idx);
  return 1;
}

void lpc_open_text(lua_State *L) {
  lua_pushcfunction(L, lpc_text_extensions);
  lua_setfield(L, -2, "text_extensions");
  lua_pushcfunction(L, lpc_from_text);
  lua_setfield(L, -2, "from_text");
}
