/* Text format: what lua/protocall/text.lua needs from C. core.text_extensions
 * lists the extensions set on a message, for the printer (the values are
 * read with pc.get_extension). */
#include "lpc.h"

#include <lauxlib.h>

/* -- list = core.text_extensions(m)
 * The extensions set on 'm' in field-number order, each {name = full name,
 * number =, type = "int32" | "message" | "group" | ..., type_name = the
 * message or enum type's full name (or nil), label = "optional" |
 * "repeated"}. Raises on a non-message. */
static int lpc_text_extensions(lua_State *L) {
  pc_Message *msg = lpc_checkmessage(L, 1, NULL);
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

void lpc_open_text(lua_State *L) {
  lua_pushcfunction(L, lpc_text_extensions);
  lua_setfield(L, -2, "text_extensions");
}
