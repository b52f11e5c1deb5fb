/* gRPC over HTTP/2 channels and calls for Lua (core/net/grpc_http2.h).
 *
 * The binding speaks bytes and status tables; lua/protocall/net.lua turns
 * them into the transport object and pc.Error objects. A status table is
 *   { code = "UNAVAILABLE", message = "...", details = bytes or nil,
 *     local = true or nil, retry_delay = seconds or nil,
 *     no_retry = true or nil (then retry_delay = -1),
 *     metadata = {{k, v}, ...} (trailers), headers = {{k, v}, ...} }
 * Every C call lives in a "protocall.GrpcCall" userdata from before it
 * starts, so nothing leaks when Lua raises. */
#include "net/grpc_http2.h"
#include "lpc.h"
#include "protocall.h"

#include <lauxlib.h>

#include <string.h>

#define CHANNEL_MT "protocall.GrpcChannel"
#define CALL_MT    "protocall.GrpcCall"

typedef struct {
  pc_GrpcChannel *ch;
} ChannelBox;

typedef struct {
  pc_GrpcCall *call;
} CallBox;

static ChannelBox *check_channel(lua_State *L, int idx) {
  ChannelBox *b = luaL_checkudata(L, idx, CHANNEL_MT);
  if (b->ch == NULL) luaL_argerror(L, idx, "transport is closed");
  return b;
}

/* -- ch = core.grpc_channel(target, ca_file|nil, max_receive|nil, user_agent|nil,
 *                          max_unread|nil)
 * -- nil, err   when the target is not http://host:port or https://host:port */
static int lpc_grpc_channel(lua_State *L) {
  pc_GrpcChannelOptions o;
  memset(&o, 0, sizeof o);
  o.target = luaL_checkstring(L, 1);
  o.ca_file = luaL_optstring(L, 2, NULL);
  lua_Integer max = luaL_optinteger(L, 3, 0);
  luaL_argcheck(L, max >= 0, 3, "max_receive must be >= 0");
  o.max_receive = (size_t)max;
  o.user_agent = luaL_optstring(L, 4, "protocall/" PROTOCALL_VERSION);
  lua_Integer unread = luaL_optinteger(L, 5, 0);
  luaL_argcheck(L, unread >= 0, 5, "max_unread must be >= 0");
  o.max_unread = (size_t)unread;
  ChannelBox *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->ch = NULL;
  luaL_setmetatable(L, CHANNEL_MT);
  void *ud;
  lua_Alloc alloc = lua_getallocf(L, &ud);
  pc_Error err;
  pc_Error_Init(&err);
  b->ch = pc_GrpcChannel_New(&o, alloc, ud, &err);
  if (b->ch == NULL) {
    lua_pushnil(L);
    lua_pushstring(L, err.msg);
    return 2;
  }
  return 1;
}

/* -- ch:close()   -- idempotent; calls still running keep the connection */
static int lpc_grpcchannel_close(lua_State *L) {
  ChannelBox *b = luaL_checkudata(L, 1, CHANNEL_MT);
  pc_GrpcChannel_Free(b->ch);
  b->ch = NULL;
  return 0;
}

/* Reads settings at 'idx'..: timeout (seconds or nil), metadata (list of
 * {key, value} or nil), gzip (boolean). Pairs go in a scratch userdata
 * pushed on the stack. */
static void read_settings(lua_State *L, int idx, pc_GrpcCallSettings *s) {
  memset(s, 0, sizeof *s);
  if (lua_isnoneornil(L, idx)) {
    s->timeout = -1;
  } else {
    s->timeout = luaL_checknumber(L, idx);
    if (!(s->timeout > 0)) s->timeout = 0; /* already past (NaN too) */
  }
  s->gzip = lua_toboolean(L, idx + 2);
  if (lua_isnoneornil(L, idx + 1)) {
    lua_pushnil(L);
    return;
  }
  luaL_checktype(L, idx + 1, LUA_TTABLE);
  size_t n = (size_t)luaL_len(L, idx + 1);
  pc_GrpcPair *pairs = lua_newuserdatauv(L, (n ? n : 1) * sizeof *pairs, 0);
  for (size_t i = 0; i < n; i++) {
    if (lua_geti(L, idx + 1, (lua_Integer)i + 1) != LUA_TTABLE)
      luaL_error(L, "metadata entry %d: {key, value} expected", (int)i + 1);
    lua_geti(L, -1, 1);
    lua_geti(L, -2, 2);
    if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
      luaL_error(L, "metadata entry %d: {key, value} strings expected", (int)i + 1);
    /* The strings stay anchored in the metadata table. */
    pairs[i].key = lua_tolstring(L, -2, &pairs[i].key_len);
    pairs[i].value = lua_tolstring(L, -1, &pairs[i].value_len);
    lua_pop(L, 3);
  }
  s->metadata = pairs;
  s->metadata_count = n;
}

/* Pushes a new call userdata (which owns the call) holding the channel at
 * 'chidx', started with the arguments from 'idx' (path, request, timeout,
 * metadata, gzip). Raises on invalid metadata or path. */
static CallBox *start_call(lua_State *L, int chidx, int idx) {
  ChannelBox *cb = check_channel(L, chidx);
  const char *path = luaL_checkstring(L, idx);
  size_t len;
  const char *req = luaL_checklstring(L, idx + 1, &len);
  pc_GrpcCallSettings s;
  read_settings(L, idx + 2, &s);
  CallBox *b = lua_newuserdatauv(L, sizeof *b, 1);
  b->call = NULL;
  luaL_setmetatable(L, CALL_MT);
  lua_pushvalue(L, chidx);
  lua_setiuservalue(L, -2, 1);
  pc_Error err;
  pc_Error_Init(&err);
  b->call = pc_GrpcCall_Start(cb->ch, path, req, len, &s, &err);
  if (b->call == NULL) luaL_error(L, "%s", err.msg);
  lua_remove(L, -2); /* the scratch pairs */
  return b;
}

/* Keys the transport consumes; users see the rest (as grpc's libraries). */
static int reserved_key(const pc_GrpcPair *p) {
  static const char *const keys[] = {"content-type", "grpc-status", "grpc-message", "grpc-encoding",
                                     "grpc-accept-encoding"};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
    if (strlen(keys[i]) == p->key_len && memcmp(keys[i], p->key, p->key_len) == 0) return 1;
  }
  return 0;
}

static void push_pairs(lua_State *L, const pc_GrpcCall *call, int trailers) {
  size_t n = pc_GrpcCall_MetadataCount(call, trailers);
  lua_createtable(L, (int)n, 0);
  lua_Integer k = 0;
  for (size_t i = 0; i < n; i++) {
    const pc_GrpcPair *p = pc_GrpcCall_Metadata(call, trailers, i);
    if (reserved_key(p)) continue;
    lua_createtable(L, 2, 0);
    lua_pushlstring(L, p->key, p->key_len);
    lua_rawseti(L, -2, 1);
    lua_pushlstring(L, p->value, p->value_len);
    lua_rawseti(L, -2, 2);
    lua_rawseti(L, -2, ++k);
  }
}

/* Pushes {headers = ..., trailers = ...} without the reserved keys. */
static void push_metadata(lua_State *L, const pc_GrpcCall *call) {
  lua_createtable(L, 0, 2);
  push_pairs(L, call, 0);
  lua_setfield(L, -2, "headers");
  push_pairs(L, call, 1);
  lua_setfield(L, -2, "trailers");
}

static void push_status(lua_State *L, const pc_GrpcCall *call) {
  const pc_GrpcStatus *st = pc_GrpcCall_Status(call);
  lua_createtable(L, 0, 7);
  lua_pushstring(L, pc_Code_Name(st->code));
  lua_setfield(L, -2, "code");
  lua_pushlstring(L, st->message, st->message_len);
  lua_setfield(L, -2, "message");
  if (st->details_len > 0) {
    lua_pushlstring(L, st->details, st->details_len);
    lua_setfield(L, -2, "details");
  }
  if (st->local) {
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "local");
  }
  if (st->has_pushback && st->no_retry) {
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "no_retry");
    lua_pushinteger(L, -1); /* pc.Error: a negative delay means "do not retry" */
    lua_setfield(L, -2, "retry_delay");
  } else if (st->has_pushback) {
    lua_pushnumber(L, st->retry_delay);
    lua_setfield(L, -2, "retry_delay");
  }
  push_pairs(L, call, 1);
  lua_setfield(L, -2, "metadata");
  push_pairs(L, call, 0);
  lua_setfield(L, -2, "headers");
}

/* -- ok, response, md = ch:unary(path, request, timeout, metadata, gzip, want_md)
 * -- false, status   = (on any failure, see the header comment)
 * One request message, exactly one response message and status OK; zero
 * or two response messages make status INTERNAL. 'md' ({headers=,
 * trailers=}) only when 'want_md'. Raises on invalid metadata or path. */
static int lpc_grpcchannel_unary(lua_State *L) {
  int want_md = lua_toboolean(L, 7);
  lua_settop(L, 6);
  CallBox *b = start_call(L, 1, 2); /* at 7 */
  const char *data;
  size_t len;
  int got = pc_GrpcCall_Next(b->call, &data, &len);
  if (got) lua_pushlstring(L, data, len); /* at 8 */
  int extra = 0;
  while (got && pc_GrpcCall_Next(b->call, &data, &len)) extra++;
  const pc_GrpcStatus *st = pc_GrpcCall_Status(b->call);
  int nres;
  if (st->code == kPc_Code_Ok && got && extra == 0) {
    lua_pushboolean(L, 1);
    lua_pushvalue(L, 8);
    nres = 2;
    if (want_md) {
      push_metadata(L, b->call);
      nres = 3;
    }
  } else {
    lua_pushboolean(L, 0);
    push_status(L, b->call);
    nres = 2;
    if (st->code == kPc_Code_Ok) {
      lua_pushliteral(L, "INTERNAL");
      lua_setfield(L, -2, "code");
      if (got)
        lua_pushfstring(L, "unary call received %d response messages", extra + 1);
      else
        lua_pushliteral(L, "unary call received no response message");
      lua_setfield(L, -2, "message");
    }
  }
  /* Release the stream now rather than at the next collection. */
  pc_GrpcCall_Free(b->call);
  b->call = NULL;
  return nres;
}

/* -- call = ch:start(path, request, timeout, metadata, gzip)
 * A streaming call; read it with call:next(). Raises on invalid metadata
 * or path. */
static int lpc_grpcchannel_start(lua_State *L) {
  lua_settop(L, 6);
  start_call(L, 1, 2);
  return 1;
}

static CallBox *check_call(lua_State *L) {
  CallBox *b = luaL_checkudata(L, 1, CALL_MT);
  if (b->call == NULL) luaL_argerror(L, 1, "call is closed");
  return b;
}

/* -- bytes = call:next()   -- the next response message, or nil at the end */
static int lpc_grpccall_next(lua_State *L) {
  CallBox *b = check_call(L);
  const char *data;
  size_t len;
  if (!pc_GrpcCall_Next(b->call, &data, &len)) return 0;
  lua_pushlstring(L, data, len);
  return 1;
}

/* -- n = call:buffered()   -- bytes held for received, unread response data */
static int lpc_grpccall_buffered(lua_State *L) {
  CallBox *b = check_call(L);
  lua_pushinteger(L, (lua_Integer)pc_GrpcCall_Buffered(b->call));
  return 1;
}

/* -- status = call:status()   -- the status table once next() returned nil */
static int lpc_grpccall_status(lua_State *L) {
  CallBox *b = check_call(L);
  if (pc_GrpcCall_Status(b->call) == NULL) return 0;
  push_status(L, b->call);
  return 1;
}

/* Bounds on one metadata list: HTTP/2 peers refuse far less (gRPC servers
 * take 8 KiB of headers by default), and libcurl's header list costs time
 * quadratic in its length, so a huge list would overrun any deadline. */
#define LPC_METADATA_MAX_PAIRS 1000
#define LPC_METADATA_MAX_BYTES ((size_t)64 * 1024)

/* -- nil | message = core.metadata_problem(md)
 * What is wrong with 'md' as call metadata, or nil: it must be a list of
 * {key, value} string pairs (no other keys; a table with a metatable,
 * such as the read-only views calls hand out, is read through __len and
 * __index only) each of which pc_GrpcPair_Check accepts, at most
 * LPC_METADATA_MAX_PAIRS pairs and LPC_METADATA_MAX_BYTES. The one check
 * every place metadata enters uses (pc._metadata_problem). */
static int lpc_grpc_metadata_problem(lua_State *L) {
  if (!lua_istable(L, 1)) {
    lua_pushfstring(L, "metadata: list of {key, value} pairs expected, got %s",
                    luaL_typename(L, 1));
    return 1;
  }
  lua_settop(L, 1);
  lua_Integer n = luaL_len(L, 1);
  if (!lua_getmetatable(L, 1)) {
    lua_pushnil(L);
    while (lua_next(L, 1)) {
      lua_pop(L, 1);
      lua_Integer k = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : 0;
      if (k < 1 || k > n) {
        if (lua_type(L, -1) == LUA_TSTRING)
          lua_pushfstring(
              L, "metadata: list of {key, value} pairs expected, got a table with key \"%s\"",
              lua_tostring(L, -1));
        else
          lua_pushfstring(L,
                          "metadata: list of {key, value} pairs expected, got a table with key %s",
                          luaL_tolstring(L, -1, NULL));
        return 1;
      }
    }
  } else {
    lua_pop(L, 1);
  }
  if (n > LPC_METADATA_MAX_PAIRS) {
    lua_pushfstring(L, "metadata: %I pairs, at most %d", n, LPC_METADATA_MAX_PAIRS);
    return 1;
  }
  size_t total = 0;
  for (lua_Integer i = 1; i <= n; i++) {
    pc_GrpcPair p;
    int ok = lua_geti(L, 1, i) == LUA_TTABLE && luaL_len(L, 2) == 2 &&
             lua_geti(L, 2, 1) == LUA_TSTRING && lua_geti(L, 2, 2) == LUA_TSTRING;
    if (!ok) {
      lua_pushfstring(L, "metadata: pair %I: {key, value} of strings expected", i);
      return 1;
    }
    p.key = lua_tolstring(L, 3, &p.key_len);
    p.value = lua_tolstring(L, 4, &p.value_len);
    total += p.key_len + p.value_len;
    if (total > LPC_METADATA_MAX_BYTES) {
      lua_pushfstring(L, "metadata: more than %d bytes of keys and values",
                      (int)LPC_METADATA_MAX_BYTES);
      return 1;
    }
    pc_Error err;
    pc_Error_Init(&err);
    if (!pc_GrpcPair_Check(&p, &err)) {
      lua_pushstring(L, err.msg);
      return 1;
    }
    lua_settop(L, 1);
  }
  lua_pushnil(L);
  return 1;
}

/* -- md = call:metadata()   -- {headers=, trailers=} received so far */
static int lpc_grpccall_metadata(lua_State *L) {
  CallBox *b = check_call(L);
  push_metadata(L, b->call);
  return 1;
}

/* -- call:close()   -- cancels a running call (RST_STREAM); idempotent */
static int lpc_grpccall_close(lua_State *L) {
  CallBox *b = luaL_checkudata(L, 1, CALL_MT);
  pc_GrpcCall_Free(b->call);
  b->call = NULL;
  return 0;
}

/* -- s = core.grpc_timeout(seconds)   -- the grpc-timeout header value */
static int lpc_grpc_timeout(lua_State *L) {
  lua_Number t = luaL_checknumber(L, 1);
  luaL_argcheck(L, t > 0, 1, "positive number expected");
  char out[16];
  size_t n = pc_Grpc_FormatTimeout(t, out);
  lua_pushlstring(L, out, n);
  return 1;
}

/* -- s = core.grpc_percent_decode(s) */
static int lpc_grpc_percent_decode(lua_State *L) {
  size_t len;
  const char *s = luaL_checklstring(L, 1, &len);
  luaL_Buffer b;
  char *p = luaL_buffinitsize(L, &b, len);
  memcpy(p, s, len);
  luaL_pushresultsize(&b, pc_Grpc_PercentDecode(p, len));
  return 1;
}

void lpc_open_net(lua_State *L) {
  static const luaL_Reg channel_methods[] = {{"unary", lpc_grpcchannel_unary},
                                             {"start", lpc_grpcchannel_start},
                                             {"close", lpc_grpcchannel_close},
                                             {NULL, NULL}};
  static const luaL_Reg call_methods[] = {
      {"next", lpc_grpccall_next},     {"buffered", lpc_grpccall_buffered},
      {"status", lpc_grpccall_status}, {"metadata", lpc_grpccall_metadata},
      {"close", lpc_grpccall_close},   {NULL, NULL}};
  static const luaL_Reg funcs[] = {{"grpc_channel", lpc_grpc_channel},
                                   {"grpc_timeout", lpc_grpc_timeout},
                                   {"grpc_percent_decode", lpc_grpc_percent_decode},
                                   {"metadata_problem", lpc_grpc_metadata_problem},
                                   {NULL, NULL}};
  luaL_newmetatable(L, CHANNEL_MT);
  luaL_newlib(L, channel_methods);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, lpc_grpcchannel_close);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, lpc_grpcchannel_close);
  lua_setfield(L, -2, "__close");
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_pop(L, 1);
  luaL_newmetatable(L, CALL_MT);
  luaL_newlib(L, call_methods);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, lpc_grpccall_close);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, lpc_grpccall_close);
  lua_setfield(L, -2, "__close");
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_pop(L, 1);
  luaL_setfuncs(L, funcs, 0);
}
