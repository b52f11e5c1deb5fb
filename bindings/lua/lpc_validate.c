/* protovalidate's rules as a Lua function: core.validate (made pc.validate
 * and pc.check by lua/protocall/validate.lua), over core/validate/validate.h.
 *
 * One validator per pool and state: a "protocall.Validator" userdata in a
 * registry table with weak keys, keyed by the Pool userdata, so its plans
 * (keyed by the pool's message types) go with the pool. */
#include "lpc.h"
#include "validate/validate.h"

#include <lauxlib.h>
#include <string.h>

#define LPC_VALIDATOR_MT "protocall.Validator"

static char kValidatorsKey;

typedef struct {
  pc_Validator *v; /* NULL while a validation holds it (below) */
  unsigned gen;    /* validations run with it: a finalizer may run one in between */
} ValidatorBox;

static int lpc_validator_gc(lua_State *L) {
  ValidatorBox *b = luaL_checkudata(L, 1, LPC_VALIDATOR_MT);
  pc_Validator_Free(b->v);
  b->v = NULL;
  return 0;
}

/* The validator box of the pool of 'def' (made on first use), with a
 * validator in it (a new one when a validation higher up holds the
 * pool's). The box stays reachable from the registry while 'def' is. */
static ValidatorBox *validator_of(lua_State *L, const pc_MessageDef *def) {
  lpc_registry_table(L, &kValidatorsKey, "k");
  lpc_push_type(L, def);
  lua_getiuservalue(L, -1, 1); /* the Type's Pool */
  lua_remove(L, -2);
  lua_pushvalue(L, -1);
  ValidatorBox *b;
  if (lua_rawget(L, -3) != LUA_TNIL) {
    b = lua_touserdata(L, -1); /* the table is ours: only boxes in it */
    lua_pop(L, 3);
  } else {
    lua_pop(L, 1);
    b = lua_newuserdatauv(L, sizeof(*b), 0);
    b->v = NULL;
    b->gen = 0;
    luaL_setmetatable(L, LPC_VALIDATOR_MT);
    lua_rawset(L, -3); /* validators[pool] = box */
    lua_pop(L, 1);
  }
  if (b->v == NULL && (b->v = pc_Validator_New(NULL, NULL)) == NULL)
    luaL_error(L, "not enough memory");
  return b;
}

static pc_ValidateStatus run(ValidatorBox *b, const pc_Message *msg, const pc_MessageDef *def,
                             int fail_fast, int legacy, size_t max, pc_Error *err) {
  b->gen++;
  pc_Validator_SetLegacyRequired(b->v, legacy);
  pc_Validator_SetMaxViolations(b->v, max);
  pc_Error_Init(err);
  return pc_Validator_Validate(b->v, msg, def, fail_fast, NULL, err);
}

/* -- list, truncated | true | nil, err = core.validate(m [, fail_fast [, quiet
 *      [, legacy_required [, max_violations]]]])
 * The violations of message 'm' as a list of {field =, rule =, message =
 * [, for_key = true]} (empty when valid; with 'quiet', true instead of an
 * empty list: nothing made for a valid message), or nil and the error of
 * a rule that does not compile or evaluate ("compile" / "runtime" as a
 * third result). 'legacy_required': pc_Validator_SetLegacyRequired;
 * 'max_violations' (an integer, 0 or nil: all): pc_Validator_SetMaxViolations,
 * 'truncated' true when the list stopped there. */
static int lpc_validate(lua_State *L) {
  const pc_MessageDef *def;
  const pc_Message *msg = lpc_check_message(L, 1, "validate", &def);
  int fail_fast = lua_toboolean(L, 2), quiet = lua_toboolean(L, 3), legacy = lua_toboolean(L, 4);
  lua_Integer maxi = luaL_optinteger(L, 5, 0);
  size_t max = maxi > 0 ? (size_t)maxi : 0;
  ValidatorBox *b = validator_of(L, def);
  pc_Error err;
  pc_ValidateStatus st = run(b, msg, def, fail_fast, legacy, max, &err);
  if (st == kPc_Validate_NoMemory) return luaL_error(L, "not enough memory");
  if (st == kPc_Validate_Compile || st == kPc_Validate_Runtime) {
    lua_pushnil(L);
    lua_pushstring(L, err.msg);
    lua_pushstring(L, st == kPc_Validate_Compile ? "compile" : "runtime");
    return 3;
  }
  if (pc_Validator_ViolationCount(b->v) == 0) {
    if (quiet)
      lua_pushboolean(L, 1);
    else
      lua_createtable(L, 0, 0);
    lua_pushboolean(L, 0);
    return 2;
  }
  /* The violations live in the validator until its next validation, which
     a finalizer run by any allocation below may start: the validator goes
     to a holder of this call while they are read (a validation meanwhile
     gets a new one), and back to the box after. */
  unsigned gen = b->gen;
  ValidatorBox *hold = lua_newuserdatauv(L, sizeof(*hold), 0);
  hold->v = NULL;
  hold->gen = 0;
  luaL_setmetatable(L, LPC_VALIDATOR_MT);
  if (b->v == NULL && (b->v = pc_Validator_New(NULL, NULL)) == NULL)
    return luaL_error(L, "not enough memory");
  if (b->gen != gen) { /* a finalizer validated with it meanwhile: again */
    st = run(b, msg, def, fail_fast, legacy, max, &err);
    if (st != kPc_Validate_Valid && st != kPc_Validate_Invalid)
      return luaL_error(L, "validate: %s",
                        st == kPc_Validate_NoMemory ? "not enough memory" : err.msg);
  }
  pc_Validator *v = hold->v = b->v;
  b->v = NULL;
  size_t n = pc_Validator_ViolationCount(v);
  lua_createtable(L, (int)n, 0);
  for (size_t i = 0; i < n; i++) {
    lua_createtable(L, 0, 4);
    const pc_Violation *x = pc_Validator_Violation(v, i);
    lua_pushstring(L, x->field);
    lua_setfield(L, -2, "field");
    lua_pushstring(L, x->rule);
    lua_setfield(L, -2, "rule");
    lua_pushstring(L, x->message);
    lua_setfield(L, -2, "message");
    if (x->for_key) {
      lua_pushboolean(L, 1);
      lua_setfield(L, -2, "for_key");
    }
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_pushboolean(L, pc_Validator_Truncated(v));
  if (b->v == NULL) { /* back to the box (else the holder frees it) */
    b->v = v;
    hold->v = NULL;
  }
  return 2;
}

void lpc_open_validate(lua_State *L) {
  if (luaL_newmetatable(L, LPC_VALIDATOR_MT)) {
    lua_pushcfunction(L, lpc_validator_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  lua_pushcfunction(L, lpc_validate);
  lua_setfield(L, -2, "validate");
}
