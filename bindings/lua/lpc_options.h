/* Private to bindings/lua: options tables (lpc_options.c), for the files
 * that take one: the checks of their keys and the readers of their fields.
 * Errors about a function's argument go through lpc_arg_error (lpc.h). */
#ifndef LPC_OPTIONS_H
#define LPC_OPTIONS_H

#include "lpc.h"

/* The table at 'idx' (nil or none allowed: argument #idx of 'fname') has
 * only keys among 'names' (NULL-terminated; whole keys compared, a NUL in
 * one too); else raises "bad argument #idx to 'fname' (unknown option
 * 'key')", a key that is not a string named as tostring shows it. */
void lpc_check_options(lua_State *L, int idx, const char *fname, const char *const *names);

/* The keys of the declaration table at 't' are 1..npos and names among
 * 'allowed'; else raises "<where>: unknown option 'k' (expected
 * <expected>)" (pc.message, pc.extend). */
void lpc_check_keys(lua_State *L, int t, const char *where, lua_Integer npos,
                    const char *const *allowed, const char *expected);

/* Field 'name' of the table at 'idx' is true (0 when there is no table or
 * the field is nil); another value than a boolean raises "bad argument #idx
 * to 'fname' (name: boolean expected, got string)". */
int lpc_opt_bool(lua_State *L, int idx, const char *fname, const char *name);

/* Field 'name' of the table at 'idx': 1 with '*v' set when it is a number
 * with an integer value in lo..hi, 0 when absent (or no table), -1 when it
 * is anything else (the caller words the error). */
int lpc_test_opt_int(lua_State *L, int idx, const char *name, int lo, int hi, int *v);

/* As lpc_test_opt_int: the value, 'dflt' when absent; raises "bad argument
 * #idx to 'fname' (<name> must be an integer in lo..hi)". */
int lpc_opt_int(lua_State *L, int idx, const char *fname, const char *name, int lo, int hi,
                int dflt);

/* The pool of field "pool" of the table at 'idx' (a Pool userdata), or NULL;
 * raises "bad argument #idx to 'fname' (pool: protocall.Pool expected, ...)". */
pc_Pool *lpc_opt_pool(lua_State *L, int idx, const char *fname);

/* String field 'k' of the table at 't', or NULL when nil (luaL_checkstring
 * on the field otherwise). */
const char *lpc_opt_string(lua_State *L, int t, const char *k);

/* Integer field 'k' of the table at 't' in 0..max, 0 when nil; raises "<k>
 * must be in 0..<max>". */
lua_Integer lpc_opt_size(lua_State *L, int t, const char *k, lua_Integer max);

#endif
