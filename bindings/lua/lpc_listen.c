/* gRPC listeners and their calls for Lua (core/net/listener.h).
 *
 * The binding speaks bytes, numbers and {key, value} lists and never
 * blocks (core.grpc_pump, lpc_net.c, polls listeners with channels);
 * lua/protocall/rpc/listen.lua builds pc.listen, the handler tasks and their
 * contexts on top. Every C call lives in a "protocall.ServerCall" userdata
 * from the moment it is taken, so nothing leaks when Lua raises. */
#include "lpc_options.h"
#include "net/listener.h"

#include <lauxlib.h>

#include <string.h>

#define LISTENER_MT "protocall.GrpcListener"
#define SCALL_MT    "protocall.ServerCall"

typedef struct {
  pc_GrpcListener *l;
} ListenerBox;

typedef struct {
  pc_GrpcServerCall *call;
} SCallBox;

pc_GrpcListener *lpc_to_listener(lua_State *L, int idx) {
  ListenerBox *b = luaL_testudata(L, idx, LISTENER_MT);
  return b ? b->l : NULL;
}

int lpc_is_listener(lua_State *L, int idx) {
  return luaL_testudata(L, idx, LISTENER_MT) != NULL;
}

static pc_GrpcListener *check_listener(lua_State *L) {
  ListenerBox *b = luaL_checkudata(L, 1, LISTENER_MT);
  if (b->l == NULL) luaL_argerror(L, 1, "listener is closed");
  return b->l;
}

static pc_GrpcServerCall *check_call(lua_State *L) {
  SCallBox *b = luaL_checkudata(L, 1, SCALL_MT);
  if (b->call == NULL) luaL_argerror(L, 1, "call is closed");
  return b->call;
}

static double opt_number(lua_State *L, const char *k) {
  lua_getfield(L, 1, k);
  double v = lua_isnil(L, -1) ? 0 : (double)luaL_checknumber(L, -1);
  lua_pop(L, 1);
  return v;
}

/* Reads the cors table at stack index 't' (core.grpc_listen's `cors`)
 * into 'cors', whose strings are the table's (keep it on the stack while
 * they are used). Raises on a value of the wrong type. */
static void cors_option(lua_State *L, int t, pc_WebCors *cors) {
  luaL_checktype(L, t, LUA_TTABLE);
  memset(cors, 0, sizeof *cors);
  cors->origins = lpc_opt_string(L, t, "origins");
  cors->headers = lpc_opt_string(L, t, "headers");
  cors->expose = lpc_opt_string(L, t, "expose");
  cors->methods = lpc_opt_string(L, t, "methods");
  cors->header_prefix = lpc_opt_string(L, t, "header_prefix");
  cors->max_age = (unsigned)lpc_opt_size(L, t, "max_age", 0x7fffffff);
  lua_getfield(L, t, "credentials");
  cors->credentials = lua_toboolean(L, -1);
  lua_pop(L, 1);
}

/* -- l = core.grpc_listen{host=, port=, cert_file=, key_file=,
 *                         client_ca_file=, max_connections=,
 *                         handshake_timeout=, idle_timeout=,
 *                         max_connection_age=, max_connection_age_grace= (seconds),
 *                         max_concurrent_streams=, max_receive=,
 *                         max_header_list=, stream_window=,
 *                         connection_window=, reset_burst=, reset_rate=,
 *                         control_burst=, control_rate=, incomplete_budget=,
 *                         stall_timeout= (seconds), plain_http = boolean,
 *                         queue_unknown_types = boolean,
 *                         unix_path=, unix_abstract = boolean,
 *                         unix_mode = integer (permission bits),
 *                         cors = {origins = "o1\no2\n" (each line an
 *                           origin, "*" any), headers = "a, b" | nil,
 *                           expose = "a, b" | nil, methods = "PUT, DELETE"
 *                           | nil, header_prefix = "grpc-metadata-" | nil,
 *                           max_age = seconds, credentials = boolean} | nil}
 * Binds and listens (listener.h; 0 or nil: the defaults there). Raises
 * with the reason when it cannot. */
static int lpc_grpc_listen(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  pc_GrpcListenerOptions o;
  memset(&o, 0, sizeof o);
  o.host = lpc_opt_string(L, 1, "host");
  o.port = lpc_opt_string(L, 1, "port");
  o.unix_path = lpc_opt_string(L, 1, "unix_path");
  luaL_argcheck(L, o.port != NULL || o.unix_path != NULL, 1, "port expected");
  lua_getfield(L, 1, "unix_abstract");
  o.unix_abstract = lua_toboolean(L, -1);
  lua_pop(L, 1);
  o.unix_mode = (unsigned)lpc_opt_size(L, 1, "unix_mode", 07777);
  o.cert_file = lpc_opt_string(L, 1, "cert_file");
  o.key_file = lpc_opt_string(L, 1, "key_file");
  o.client_ca_file = lpc_opt_string(L, 1, "client_ca_file");
  o.max_connections = (size_t)lpc_opt_size(L, 1, "max_connections", 0x7fffffff);
  o.handshake_timeout = opt_number(L, "handshake_timeout");
  o.idle_timeout = opt_number(L, "idle_timeout");
  o.max_connection_age = opt_number(L, "max_connection_age");
  o.max_connection_age_grace = opt_number(L, "max_connection_age_grace");
  o.engine.max_concurrent_streams =
      (uint32_t)lpc_opt_size(L, 1, "max_concurrent_streams", 0x7fffffff);
  o.engine.max_receive = (size_t)lpc_opt_size(L, 1, "max_receive", 0x7fffffff);
  o.engine.max_header_list = (size_t)lpc_opt_size(L, 1, "max_header_list", 0x7fffffff);
  o.engine.stream_window = (uint32_t)lpc_opt_size(L, 1, "stream_window", 0x7fffffff);
  o.engine.connection_window = (uint32_t)lpc_opt_size(L, 1, "connection_window", 0x7fffffff);
  o.engine.reset_burst = (uint32_t)lpc_opt_size(L, 1, "reset_burst", 0x7fffffff);
  o.engine.reset_rate = (uint32_t)lpc_opt_size(L, 1, "reset_rate", 0x7fffffff);
  o.engine.control_burst = (uint32_t)lpc_opt_size(L, 1, "control_burst", 0x7fffffff);
  o.engine.control_rate = (uint32_t)lpc_opt_size(L, 1, "control_rate", 0x7fffffff);
  o.engine.incomplete_budget = (size_t)lpc_opt_size(L, 1, "incomplete_budget", 0x7fffffff);
  o.engine.stall_timeout = opt_number(L, "stall_timeout");
  pc_WebCors cors;
  lua_getfield(L, 1, "cors"); /* stays on the stack: its strings live until New copied them */
  if (!lua_isnil(L, -1)) {
    cors_option(L, lua_gettop(L), &cors);
    o.engine.cors = &cors;
  }
  lua_getfield(L, 1, "plain_http");
  o.engine.plain_http = lua_toboolean(L, -1);
  lua_pop(L, 1);
  lua_getfield(L, 1, "queue_unknown_types");
  o.engine.queue_unknown_types = lua_toboolean(L, -1);
  lua_pop(L, 1);
  ListenerBox *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->l = NULL;
  luaL_setmetatable(L, LISTENER_MT);
  pc_Error err;
  pc_Error_Init(&err);
  b->l = pc_GrpcListener_New(&o, NULL, NULL, &err);
  if (b->l == NULL) return luaL_error(L, "%s", err.msg);
  return 1;
}

/* -- l:port() -> the port bound */
static int lpc_listener_port(lua_State *L) {
  lua_pushinteger(L, pc_GrpcListener_Port(check_listener(L)));
  return 1;
}

/* -- l:accept() -> the next new call (a ServerCall), or nil */
static int lpc_listener_accept(lua_State *L) {
  pc_GrpcListener *l = check_listener(L);
  SCallBox *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->call = NULL;
  luaL_setmetatable(L, SCALL_MT);
  b->call = pc_GrpcListener_Accept(l);
  if (b->call == NULL) lua_pushnil(L);
  return 1;
}

/* -- l:shutdown(): stop listening, GOAWAY to every connection */
static int lpc_listener_shutdown(lua_State *L) {
  pc_GrpcListener_Shutdown(check_listener(L));
  return 0;
}

/* -- l:close_all(): close every connection now (calls cancelled) */
static int lpc_listener_close_all(lua_State *L) {
  pc_GrpcListener_CloseAll(check_listener(L));
  return 0;
}

/* -- l:set_cors(cors): the CORS options from now on (core.grpc_listen's
 * `cors` table) of a listener made with some; raises when it has none */
static int lpc_listener_set_cors(lua_State *L) {
  pc_GrpcListener *l = check_listener(L);
  pc_WebCors cors;
  cors_option(L, 2, &cors);
  pc_Error err;
  pc_Error_Init(&err);
  if (!pc_GrpcListener_SetCors(l, &cors, &err)) return luaL_error(L, "%s", err.msg);
  return 0;
}

/* -- l:connections() -> connections open */
static int lpc_listener_connections(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)pc_GrpcListener_Connections(check_listener(L)));
  return 1;
}

/* -- l:close(): frees the listener (idempotent; also __gc) */
static int lpc_listener_close(lua_State *L) {
  ListenerBox *b = luaL_checkudata(L, 1, LISTENER_MT);
  pc_GrpcListener_Free(b->l);
  b->l = NULL;
  return 0;
}

/* -- call:path() -> ":path" */
static int lpc_scall_path(lua_State *L) {
  lua_pushstring(L, pc_GrpcServerCall_Path(check_call(L)));
  return 1;
}

/* -- call:timeout() -> seconds, deadline (monotonic seconds); nil, nil */
static int lpc_scall_timeout(lua_State *L) {
  pc_GrpcServerCall *c = check_call(L);
  double t = pc_GrpcServerCall_Timeout(c);
  if (t < 0) return 0;
  lua_pushnumber(L, t);
  lua_pushnumber(L, pc_GrpcServerCall_Deadline(c));
  return 2;
}

/* -- call:metadata() -> {{key, value}, ...} (the request's) */
static int lpc_scall_metadata(lua_State *L) {
  pc_GrpcServerCall *c = check_call(L);
  size_t n = pc_GrpcServerCall_MetadataCount(c);
  lua_createtable(L, (int)n, 0);
  for (size_t i = 0; i < n; i++) {
    const pc_GrpcPair *p = pc_GrpcServerCall_Metadata(c, i);
    lua_createtable(L, 2, 0);
    lua_pushlstring(L, p->key, p->key_len);
    lua_rawseti(L, -2, 1);
    lua_pushlstring(L, p->value, p->value_len);
    lua_rawseti(L, -2, 2);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  return 1;
}

/* -- call:next() -> bytes (a request message), false (none yet), nil (end) */
static int lpc_scall_next(lua_State *L) {
  const char *d;
  size_t n;
  pc_GrpcServerCall *c = check_call(L);
  int r = pc_GrpcServerCall_Next(c, &d, &n);
  if (r == 1) {
    lua_pushlstring(L, d, n);
    pc_GrpcServerCall_Release(c); /* the string is a copy */
  } else if (r == 0)
    lua_pushboolean(L, 0);
  else
    lua_pushnil(L);
  return 1;
}

/* -- call:protocol() -> "grpc", "grpc-web", "grpc-web-text", "connect" or
 * "http", and whether it is Connect's streaming protocol (not its unary
 * one, a Connect GET included); call:codec() -> "proto" or "json": what
 * the request and response messages are written in (core/net/web.h) */
static int lpc_scall_protocol(lua_State *L) {
  pc_WebProtocol p = pc_GrpcServerCall_Protocol(check_call(L));
  lua_pushstring(L, pc_WebProtocol_Name(p));
  lua_pushboolean(L, p == kPc_WebProtocol_ConnectStream);
  return 2;
}

/* -- call:http_method() -> the request's :method ("POST"; "GET" for a
 * Connect GET or a REST request, "HEAD" for their HEAD, ...) */
static int lpc_scall_http_method(lua_State *L) {
  lua_pushstring(L, pc_GrpcServerCall_HttpMethod(check_call(L)));
  return 1;
}

/* -- call:not_allowed(options, get): answers HTTP 405 "Allow: POST" (a
 * Connect GET of a method with side effects, as connect-go answers;
 * another method than POST of gRPC, gRPC-Web or Connect, unary or
 * streaming), OPTIONS listed too when `options` is true (the listener
 * answers CORS preflights), GET when `get` is true (the method takes a
 * Connect GET): "GET, OPTIONS, POST" at most, sorted as connect-go's */
static int lpc_scall_not_allowed(lua_State *L) {
  static const char *const allow[] = {"POST", "OPTIONS, POST", "GET, POST", "GET, OPTIONS, POST"};
  int i = (lua_toboolean(L, 2) ? 1 : 0) + (lua_toboolean(L, 3) ? 2 : 0);
  pc_GrpcServerCall_NotAllowed(check_call(L), allow[i]);
  return 0;
}

/* -- call:answer_options(get): answers an OPTIONS request to a method's
 * path HTTP 204 "Allow: OPTIONS, POST" ("GET, OPTIONS, POST" when `get`
 * is true: the method takes a Connect GET), RFC 9110 9.3.7; a listener
 * with cors answers a plain OPTIONS (no Access-Control-Request-Method) so */
static int lpc_scall_answer_options(lua_State *L) {
  pc_GrpcServerCall_AnswerOptions(check_call(L),
                                  lua_toboolean(L, 2) ? "GET, OPTIONS, POST" : "OPTIONS, POST");
  return 0;
}

/* -- call:read_query() -> whether the call goes on: reads a Connect GET's
 * query into its request (codec, compression, message, deadline) once its
 * path and method are known to take it; false when the query was bad (the
 * engine answered it, invalid_argument) or the call is over */
static int lpc_scall_read_query(lua_State *L) {
  lua_pushboolean(L, pc_GrpcServerCall_ReadQuery(check_call(L)));
  return 1;
}

/* -- call:http_version() -> 2, or 1 over HTTP/1.x */
static int lpc_scall_http_version(lua_State *L) {
  lua_pushinteger(L, pc_GrpcServerCall_HttpVersion(check_call(L)));
  return 1;
}

/* -- call:content_type() -> the request's content-type, or nil */
static int lpc_scall_content_type(lua_State *L) {
  lua_pushstring(L, pc_GrpcServerCall_ContentType(check_call(L)));
  return 1;
}

/* -- call:set_http() -> whether the call is plain HTTP now (a Connect
 * unary call whose response has not started becomes one) */
static int lpc_scall_set_http(lua_State *L) {
  lua_pushboolean(L, pc_GrpcServerCall_SetHttp(check_call(L)));
  return 1;
}

/* -- call:respond(status, {{name, value}, ...}) -> true, or nil and why:
 * the response head of a plain HTTP call (server.h) */
static int lpc_scall_respond(lua_State *L) {
  pc_GrpcServerCall *c = check_call(L);
  lua_Integer status = luaL_checkinteger(L, 2);
  luaL_checktype(L, 3, LUA_TTABLE);
  size_t n = (size_t)lua_rawlen(L, 3);
  luaL_argcheck(L, n <= 1000, 3, "at most 1000 headers");
  pc_GrpcPair *h =
      lua_newuserdatauv(L, (n ? n : 1) * sizeof *h, 0); /* the strings stay on the stack */
  for (size_t i = 0; i < n; i++) {
    lua_rawgeti(L, 3, (lua_Integer)i + 1);
    luaL_argcheck(L, lua_type(L, -1) == LUA_TTABLE, 3, "{name, value} pairs expected");
    lua_rawgeti(L, -1, 1);
    lua_rawgeti(L, -2, 2);
    /* strings held by the table (a number converted here would not be) */
    luaL_argcheck(L, lua_type(L, -2) == LUA_TSTRING && lua_type(L, -1) == LUA_TSTRING, 3,
                  "{name, value} pairs of strings expected");
    h[i].key = lua_tolstring(L, -2, &h[i].key_len);
    h[i].value = lua_tolstring(L, -1, &h[i].value_len);
    lua_pop(L, 2);
    lua_pop(L, 1);
  }
  pc_Error err;
  pc_Error_Init(&err);
  if (!pc_GrpcServerCall_Respond(c, (int)(status < 0 || status > 999 ? 0 : status), h, n, &err)) {
    lua_pushnil(L);
    lua_pushstring(L, err.msg);
    return 2;
  }
  lua_pushboolean(L, 1);
  return 1;
}

static int lpc_scall_codec(lua_State *L) {
  int json = pc_GrpcServerCall_Codec(check_call(L)) == kPc_WebCodec_Json;
  lua_pushstring(L, json ? "json" : "proto");
  return 1;
}

/* -- call:cancelled() -> boolean */
static int lpc_scall_cancelled(lua_State *L) {
  lua_pushboolean(L, pc_GrpcServerCall_Cancelled(check_call(L)));
  return 1;
}

/* -- call:add_metadata(trailers, key, value) -> true, or nil and why */
static int lpc_scall_add_metadata(lua_State *L) {
  pc_GrpcServerCall *c = check_call(L);
  int trailers = lua_toboolean(L, 2);
  pc_GrpcPair p;
  p.key = luaL_checklstring(L, 3, &p.key_len);
  p.value = luaL_checklstring(L, 4, &p.value_len);
  pc_Error err;
  pc_Error_Init(&err);
  if (!pc_GrpcServerCall_AddMetadata(c, trailers, &p, &err)) {
    lua_pushnil(L);
    lua_pushstring(L, err.msg);
    return 2;
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* -- call:set_pushback(ms) -> whether the grpc-retry-pushback-ms trailer
 * was queued (ms < 0: "-1", do not retry) */
static int lpc_scall_set_pushback(lua_State *L) {
  pc_GrpcServerCall *c = check_call(L);
  lua_pushboolean(L, pc_GrpcServerCall_SetPushback(c, (long long)luaL_checkinteger(L, 2)));
  return 1;
}

/* -- call:send(bytes) -> whether it was queued (false: the call is over) */
static int lpc_scall_send(lua_State *L) {
  pc_GrpcServerCall *c = check_call(L);
  size_t n;
  const char *s = luaL_checklstring(L, 2, &n);
  lua_pushboolean(L, pc_GrpcServerCall_Send(c, s, n));
  return 1;
}

/* -- call:compressed() -> whether the last request message read came
 * with the compressed flag set */
static int lpc_scall_compressed(lua_State *L) {
  lua_pushboolean(L, pc_GrpcServerCall_Compressed(check_call(L)));
  return 1;
}

/* -- call:set_compression(gzip) -> whether later responses go gzipped
 * (false: the client does not accept gzip, or the headers went out
 * without it) */
static int lpc_scall_set_compression(lua_State *L) {
  pc_GrpcServerCall *c = check_call(L);
  lua_pushboolean(L, pc_GrpcServerCall_SetCompression(c, lua_toboolean(L, 2)));
  return 1;
}

/* -- call:unsent() -> bytes queued, not yet taken by HTTP/2 */
static int lpc_scall_unsent(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)pc_GrpcServerCall_Unsent(check_call(L)));
  return 1;
}

/* -- call:finish(code, message, details): code a number 0..16, message a
 * string, details bytes or nil */
static int lpc_scall_finish(lua_State *L) {
  pc_GrpcServerCall *c = check_call(L);
  lua_Integer code = luaL_checkinteger(L, 2);
  luaL_argcheck(L, code >= 0 && code < PC_CODE_COUNT, 2, "status code 0..16 expected");
  size_t n = 0, dn = 0;
  const char *m = luaL_optlstring(L, 3, "", &n);
  const char *d = luaL_optlstring(L, 4, NULL, &dn);
  pc_GrpcServerCall_Finish(c, (pc_Code)code, m, n, d, dn);
  return 0;
}

/* -- call:not_found(message): finishes an unknown method's call
 * UNIMPLEMENTED with `message` (a string), HTTP 404 over Connect and
 * gRPC-Web (pc_GrpcServerCall_NotFound) */
static int lpc_scall_not_found(lua_State *L) {
  pc_GrpcServerCall *c = check_call(L);
  size_t n = 0;
  const char *m = luaL_checklstring(L, 2, &n);
  pc_GrpcServerCall_NotFound(c, m, n);
  return 0;
}

/* -- token = call:wake_token(): the call's wake token (an integer, the
 * same each time); from the first ask on, core.grpc_pump lists it when
 * something happened to the call (lpc_net.c, core/net/wake.h) */
static int lpc_scall_wake_token(lua_State *L) {
  pc_GrpcServerCall *c = check_call(L);
  uint64_t token = (uint64_t)(uintptr_t)c;
  pc_GrpcServerCall_SetWakeToken(c, token);
  lua_pushinteger(L, (lua_Integer)token);
  return 1;
}

/* -- call:close(): frees the call (a finished one's response still goes
 * out; any other open stream is reset; idempotent; also __gc) */
static int lpc_scall_close(lua_State *L) {
  SCallBox *b = luaL_checkudata(L, 1, SCALL_MT);
  pc_GrpcServerCall_Free(b->call);
  b->call = NULL;
  return 0;
}

void lpc_open_listen(lua_State *L) {
  static const luaL_Reg listener[] = {{"port", lpc_listener_port},
                                      {"accept", lpc_listener_accept},
                                      {"shutdown", lpc_listener_shutdown},
                                      {"close_all", lpc_listener_close_all},
                                      {"connections", lpc_listener_connections},
                                      {"set_cors", lpc_listener_set_cors},
                                      {"close", lpc_listener_close},
                                      {NULL, NULL}};
  static const luaL_Reg call[] = {{"path", lpc_scall_path},
                                  {"timeout", lpc_scall_timeout},
                                  {"metadata", lpc_scall_metadata},
                                  {"next", lpc_scall_next},
                                  {"protocol", lpc_scall_protocol},
                                  {"codec", lpc_scall_codec},
                                  {"http_version", lpc_scall_http_version},
                                  {"http_method", lpc_scall_http_method},
                                  {"not_allowed", lpc_scall_not_allowed},
                                  {"answer_options", lpc_scall_answer_options},
                                  {"read_query", lpc_scall_read_query},
                                  {"content_type", lpc_scall_content_type},
                                  {"set_http", lpc_scall_set_http},
                                  {"respond", lpc_scall_respond},
                                  {"cancelled", lpc_scall_cancelled},
                                  {"add_metadata", lpc_scall_add_metadata},
                                  {"set_pushback", lpc_scall_set_pushback},
                                  {"send", lpc_scall_send},
                                  {"unsent", lpc_scall_unsent},
                                  {"compressed", lpc_scall_compressed},
                                  {"set_compression", lpc_scall_set_compression},
                                  {"finish", lpc_scall_finish},
                                  {"not_found", lpc_scall_not_found},
                                  {"wake_token", lpc_scall_wake_token},
                                  {"close", lpc_scall_close},
                                  {NULL, NULL}};
  luaL_newmetatable(L, LISTENER_MT);
  luaL_newlib(L, listener);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, lpc_listener_close);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  luaL_newmetatable(L, SCALL_MT);
  luaL_newlib(L, call);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, lpc_scall_close);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  lua_pushcfunction(L, lpc_grpc_listen);
  lua_setfield(L, -2, "grpc_listen");
}
