/* gRPC channels and calls for Lua (core/net/channel.h).
 *
 * The binding speaks bytes and status tables and never blocks but in
 * core.grpc_pump; lua/protocall/transport/grpc.lua builds the transport object, the
 * waiting (alone or under the pc.spawn scheduler) and pc.Error objects on
 * top. A status table is
 *   { code = "UNAVAILABLE", message = "...", details = bytes or nil,
 *     local = true or nil, retry_delay = seconds or nil,
 *     no_retry = true or nil (then retry_delay = -1),
 *     metadata = {{k, v}, ...} (trailers), headers = {{k, v}, ...} }
 * Every C call lives in a "protocall.GrpcCall" userdata from before it
 * starts, so nothing leaks when Lua raises. */
#include "net/channel.h"
#include "net/listener.h"
#include "net/resolve.h"
#include "net/web.h"
#include "lpc_options.h"
#include "protocall.h"

#include <lauxlib.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <net/if.h>
#include <poll.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHANNEL_MT  "protocall.GrpcChannel"
#define RESOLVER_MT "protocall.Resolver"
#define CALL_MT     "protocall.GrpcCall"
#define FIFO_MT     "protocall.Fifo"

/* The tags of the boxes below: a box's first member is its kind's tag
 * (check_box). Not const, so each has an address of its own. */
static char channel_tag, call_tag, closed_call_tag;

typedef struct {
  const char *tag;    /* &channel_tag once its metatable is set; NULL once collected */
  pc_GrpcChannel *ch; /* NULL once collected */
  int closed;         /* ch:close(): no new call; the calls in flight go on */
} ChannelBox;

typedef struct {
  const char *tag; /* &call_tag once its metatable is set, &closed_call_tag once
                    * closed, NULL once collected */
  pc_GrpcCall *call;
  int reading;     /* a method builds tables from the call (begin_read) */
  int close_asked; /* call:close() while it did: end_read frees the call */
  int web;         /* its answer's head is plain HTTP, whose fields are not metadata
                    * (reserved_key): 1 gRPC-Web, 2 Connect; 0 gRPC */
} CallBox;

/* luaL_checkudata(L, idx, tname) for the methods of channels and calls
 * (some 15 checks a unary call): a full userdata of the box's size whose
 * first member is the kind's tag is one, without the metatable compare
 * (lua_getmetatable, lua_rawequal: ~180 instructions under LuaJIT, against
 * ~60). Only this file writes the tags' addresses, once the metatable is
 * set, and __gc clears them before the box is freed, so no other userdata
 * holds one, nor the memory of a box freed. A box without its tag (a
 * closed call, whose tag is &closed_call_tag; a collected channel) or
 * anything else goes through luaL_checkudata, which raises as before or
 * returns the closed box. */
static void *check_box(lua_State *L, int idx, const char *tag, size_t size, const char *tname) {
  const char **p = lua_touserdata(L, idx);
  if (p != NULL && lua_rawlen(L, idx) == size && *p == tag) return p;
  return luaL_checkudata(L, idx, tname);
}

static ChannelBox *check_channel(lua_State *L, int idx) {
  ChannelBox *b = check_box(L, idx, &channel_tag, sizeof(ChannelBox), CHANNEL_MT);
  if (b->ch == NULL) luaL_argerror(L, idx, "transport is closed");
  return b;
}

/* A non-negative number of seconds, 0 when absent. */
static double opt_seconds(lua_State *L, int t, const char *k) {
  lua_getfield(L, t, k);
  double v = lua_isnil(L, -1) ? 0 : (double)luaL_checknumber(L, -1);
  lua_pop(L, 1);
  if (!(v >= 0 && v <= 1e9)) luaL_error(L, "%s must be a number of seconds >= 0", k);
  return v;
}

/* -- ch = core.grpc_channel{host=, port=, tls=, ca_file=, cert_file=,
 *                           key_file=, server_name=, user_agent=,
 *                           max_receive=, max_header_list=,
 *                           stream_window=, connection_window=,
 *                           keepalive_time=, keepalive_timeout=,
 *                           insecure = boolean (TLS without verification),
 *                           connect_timeout = seconds (0 or nil: none),
 *                           unix_path = path, unix_abstract = boolean
 *                                     (a Unix-domain socket, channel.h),
 *                           host_io = boolean (a host driver moves the
 *                                     bytes: ch:host_* below),
 *                           wait_for_ready = true (calls wait through
 *                                     failed connection attempts until
 *                                     their deadline) or "backoff" (wait
 *                                     out the reconnection backoff only:
 *                                     a balancer's backend; channel.h's
 *                                     pc_GrpcWaitForReady),
 *                           http1 = boolean (gRPC-Web and Connect over
 *                                     HTTP/1.1: channel.h),
 *                           backoff = {initial=, multiplier=, jitter=,
 *                                      maximum=, min_connect_timeout=}}
 * Strings and integers (bytes; 0 or nil: the defaults of engine.h), times
 * in seconds; without `backoff`, gRPC's reconnection backoff (channel.h).
 * No connection is made until the first call. */
static int lpc_grpc_channel(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  pc_GrpcChannelOptions o;
  memset(&o, 0, sizeof o);
  o.host = lpc_opt_string(L, 1, "host");
  o.port = lpc_opt_string(L, 1, "port");
  luaL_argcheck(L, o.host != NULL && o.port != NULL, 1, "host and port expected");
  lua_getfield(L, 1, "tls");
  o.tls = lua_toboolean(L, -1);
  lua_pop(L, 1);
  o.ca_file = lpc_opt_string(L, 1, "ca_file");
  o.cert_file = lpc_opt_string(L, 1, "cert_file");
  o.key_file = lpc_opt_string(L, 1, "key_file");
  o.server_name = lpc_opt_string(L, 1, "server_name");
  lua_getfield(L, 1, "insecure");
  o.insecure = lua_toboolean(L, -1);
  lua_getfield(L, 1, "connect_timeout");
  o.connect_timeout = lua_isnumber(L, -1) ? lua_tonumber(L, -1) : 0;
  lua_getfield(L, 1, "host_io");
  o.host_io = lua_toboolean(L, -1);
  lua_getfield(L, 1, "wait_for_ready");
  if (lua_type(L, -1) == LUA_TSTRING && strcmp(lua_tostring(L, -1), "backoff") == 0)
    o.wait_for_ready = kPc_GrpcWaitForReady_Backoff;
  else
    o.wait_for_ready =
        lua_toboolean(L, -1) ? kPc_GrpcWaitForReady_Deadline : kPc_GrpcWaitForReady_No;
  lua_getfield(L, 1, "unix_abstract");
  o.unix_abstract = lua_toboolean(L, -1);
  lua_getfield(L, 1, "http1");
  o.http1 = lua_toboolean(L, -1);
  lua_pop(L, 6);
  o.unix_path = lpc_opt_string(L, 1, "unix_path");
  o.user_agent = lpc_opt_string(L, 1, "user_agent");
  if (o.user_agent == NULL) o.user_agent = "protocall/" PROTOCALL_VERSION;
  o.max_receive = (size_t)lpc_opt_size(L, 1, "max_receive", 0x7fffffff);
  o.max_header_list = (size_t)lpc_opt_size(L, 1, "max_header_list", 0x7fffffff);
  o.stream_window = (uint32_t)lpc_opt_size(L, 1, "stream_window", 0x7fffffff);
  o.connection_window = (uint32_t)lpc_opt_size(L, 1, "connection_window", 0x7fffffff);
  o.keepalive_time = opt_seconds(L, 1, "keepalive_time");
  o.keepalive_timeout = opt_seconds(L, 1, "keepalive_timeout");
  lua_getfield(L, 1, "backoff");
  if (!lua_isnil(L, -1)) {
    luaL_checktype(L, -1, LUA_TTABLE);
    int t = lua_gettop(L);
    o.backoff_set = 1;
    o.backoff_initial = opt_seconds(L, t, "initial");
    o.backoff_multiplier = opt_seconds(L, t, "multiplier");
    o.backoff_jitter = opt_seconds(L, t, "jitter");
    o.backoff_max = opt_seconds(L, t, "maximum");
    o.min_connect_timeout = opt_seconds(L, t, "min_connect_timeout");
  }
  lua_pop(L, 1);
  ChannelBox *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->tag = NULL;
  b->ch = NULL;
  b->closed = 0;
  luaL_setmetatable(L, CHANNEL_MT);
  b->tag = &channel_tag;
  void *ud;
  lua_Alloc alloc = lua_getallocf(L, &ud);
  pc_Error err;
  pc_Error_Init(&err);
  b->ch = pc_GrpcChannel_New(&o, alloc, ud, &err);
  if (b->ch == NULL) return luaL_error(L, "%s", err.msg);
  return 1;
}

/* -- ch:close()   -- idempotent; calls still alive keep their connection
 * and go on to their end (pumped as before, deadlines included): the
 * channel stays until it is collected, after its calls (they hold it). */
static int lpc_grpcchannel_close(lua_State *L) {
  ChannelBox *b = luaL_checkudata(L, 1, CHANNEL_MT);
  if (b->ch && !b->closed) pc_GrpcChannel_Close(b->ch);
  b->closed = 1;
  return 0;
}

static int lpc_grpcchannel_gc(lua_State *L) {
  ChannelBox *b = luaL_checkudata(L, 1, CHANNEL_MT);
  pc_GrpcChannel_Free(b->ch); /* with calls alive, the last one frees it */
  b->tag = NULL;
  b->ch = NULL;
  b->closed = 1;
  return 0;
}

/* -- call = ch:start(path, timeout, metadata, gzip, previous_attempts,
 *                   protocol, json, get, request)
 * Starts a call with the settings lua/protocall/transport/grpc.lua
 * checked once (settings_of), as arguments (no table to read by names):
 * timeout = seconds | nil (<= 0: ends at once DEADLINE_EXCEEDED),
 * metadata = {{key, value}, ...} | nil, gzip = boolean,
 * previous_attempts = 0..100 | nil (sent as grpc-previous-rpc-attempts
 * when positive), protocol = "grpc" | "grpc-web" | "grpc-web-text" |
 * "connect" | "connect-stream" | nil (the protocol of the call; Connect's
 * unary form for unary methods), json = boolean (gRPC-Web and Connect: the
 * messages are JSON), get = boolean (Connect unary: sent as Connect's
 * GET, the request message in the query); request = bytes | nil: the one
 * request message, sent and the sending side closed (call:send then
 * call:close_send), else they follow with call:send. Raises on metadata
 * entries that are not string pairs or an invalid path or metadata
 * (pc_GrpcChannel_Start's error). */
static int lpc_grpcchannel_start(lua_State *L) {
  ChannelBox *cb = check_channel(L, 1);
  if (cb->closed) luaL_argerror(L, 1, "transport is closed");
  const char *path = luaL_checkstring(L, 2);
  pc_GrpcCallSettings s;
  memset(&s, 0, sizeof s);
  if (lua_isnoneornil(L, 3)) {
    s.timeout = -1;
  } else {
    s.timeout = luaL_checknumber(L, 3);
    if (!(s.timeout > 0)) s.timeout = 0; /* already past (NaN too) */
  }
  s.gzip = lua_toboolean(L, 5);
  lua_Integer previous = lua_isnumber(L, 6) ? lua_tointeger(L, 6) : 0;
  s.previous_attempts = previous > 0 && previous <= 100 ? (unsigned)previous : 0;
  const char *proto = lua_type(L, 7) == LUA_TSTRING ? lua_tostring(L, 7) : NULL;
  s.protocol = proto == NULL                          ? kPc_WebProtocol_Grpc
               : strcmp(proto, "grpc-web") == 0       ? kPc_WebProtocol_GrpcWeb
               : strcmp(proto, "grpc-web-text") == 0  ? kPc_WebProtocol_GrpcWebText
               : strcmp(proto, "connect") == 0        ? kPc_WebProtocol_ConnectUnary
               : strcmp(proto, "connect-stream") == 0 ? kPc_WebProtocol_ConnectStream
                                                      : kPc_WebProtocol_Grpc;
  s.json = lua_toboolean(L, 8);
  s.get = lua_toboolean(L, 9);
  size_t request_len = 0;
  const char *request = lua_isnoneornil(L, 10) ? NULL : luaL_checklstring(L, 10, &request_len);
  lua_settop(L, 10);
  /* up to 8 metadata pairs on the C stack, more in a userdata kept on the
   * stack (nothing to free when a check below raises) */
  pc_GrpcPair few[8], *pairs = NULL;
  if (lua_type(L, 4) == LUA_TTABLE) {
    size_t n = (size_t)luaL_len(L, 4);
    pairs = n <= sizeof few / sizeof few[0] ? few : lua_newuserdatauv(L, n * sizeof *pairs, 0);
    if (n > (size_t)INT_MAX / 2 - LUA_MINSTACK) luaL_error(L, "too much metadata");
    luaL_checkstack(L, (int)(2 * n) + LUA_MINSTACK, "too much metadata");
    for (size_t i = 0; i < n; i++) {
      if (lua_geti(L, 4, (lua_Integer)i + 1) != LUA_TTABLE)
        luaL_error(L, "metadata entry %d: {key, value} expected", (int)i + 1);
      lua_geti(L, -1, 1);
      lua_geti(L, -2, 2);
      if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
        luaL_error(L, "metadata entry %d: {key, value} strings expected", (int)i + 1);
      /* The strings stay on the stack until the call is made: a list read
       * through __index (a view, a proxy) may hand out strings nothing
       * else holds, which a collection in a later __index would free. */
      lua_remove(L, -3);
      pairs[i].key = lua_tolstring(L, -2, &pairs[i].key_len);
      pairs[i].value = lua_tolstring(L, -1, &pairs[i].value_len);
    }
    s.metadata = pairs;
    s.metadata_count = n;
  }
  /* No user value holds the channel: a channel collected before its calls
   * stays in C until the last one is freed (pc_GrpcChannel_Free), and the
   * transport that waits for a call holds the channel it pumps. */
  CallBox *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->tag = NULL;
  b->call = NULL;
  b->reading = b->close_asked = 0;
  b->web = s.protocol == kPc_WebProtocol_ConnectUnary || s.protocol == kPc_WebProtocol_ConnectStream
               ? 2
               : s.protocol == kPc_WebProtocol_GrpcWeb || s.protocol == kPc_WebProtocol_GrpcWebText;
  lua_pushvalue(L, lua_upvalueindex(1)); /* the calls' metatable (lpc_open_net) */
  lua_setmetatable(L, -2);
  b->tag = &call_tag;
  pc_Error err;
  pc_Error_Init(&err);
  b->call = pc_GrpcChannel_Start(cb->ch, path, &s, &err);
  if (b->call == NULL) return luaL_error(L, "%s", err.msg);
  if (request != NULL) pc_GrpcCall_SendLast(b->call, request, request_len);
  return 1;
}

/* -- Host I/O (channel.h), for a channel made with host_io = true; ids
 * name connections, an id no longer listed is ignored.
 * conns, calls = ch:host_conns()     -- the open ones: {[id] = ready (boolean)},
 *                                       {[id] = calls on it}
 * v = ch:host_version()               -- an integer that changes when host_conns'
 *                                       list does (the calls counts aside)
 * secs | nil, v = ch:host_tick()     -- timers; seconds to the next, nil: none;
 *                                       v: host_version() after them
 * ch:host_connected(id, ok, why|nil)  -- the driver connected, or failed ('why')
 * bytes | nil = ch:host_output(id)    -- bytes to send, nil: none
 * true | nil = ch:host_output(id, true) -- whether there are (they stay queued)
 * ch:host_wrote(id, n)                -- n of them were sent
 * ok = ch:host_recv(id, bytes)        -- bytes received; false: they broke it
 * ch:host_lost(id, why)               -- the connection is gone */
#define HOST_CONNS_MAX 64

static unsigned check_conn_id(lua_State *L, int idx) {
  lua_Integer id = luaL_checkinteger(L, idx);
  luaL_argcheck(L, id > 0 && id <= 0xffffffff, idx, "connection id expected");
  return (unsigned)id;
}

static int lpc_grpcchannel_host_conns(lua_State *L) {
  ChannelBox *b = check_channel(L, 1);
  pc_GrpcHostConn conns[HOST_CONNS_MAX];
  size_t n = pc_GrpcChannel_HostConns(b->ch, conns, HOST_CONNS_MAX);
  if (n > HOST_CONNS_MAX) n = HOST_CONNS_MAX;
  lua_createtable(L, 0, (int)n);
  lua_createtable(L, 0, (int)n);
  for (size_t i = 0; i < n; i++) {
    lua_pushboolean(L, conns[i].ready);
    lua_rawseti(L, -3, conns[i].id);
    lua_pushinteger(L, (lua_Integer)conns[i].calls);
    lua_rawseti(L, -2, conns[i].id);
  }
  return 2;
}

static int lpc_grpcchannel_host_version(lua_State *L) {
  ChannelBox *b = check_channel(L, 1);
  lua_pushinteger(L, (lua_Integer)pc_GrpcChannel_HostVersion(b->ch));
  return 1;
}

static int lpc_grpcchannel_host_tick(lua_State *L) {
  ChannelBox *b = check_channel(L, 1);
  double d = pc_GrpcChannel_HostTick(b->ch);
  if (d < 0)
    lua_pushnil(L);
  else
    lua_pushnumber(L, d);
  lua_pushinteger(L, (lua_Integer)pc_GrpcChannel_HostVersion(b->ch));
  return 2;
}

static int lpc_grpcchannel_host_connected(lua_State *L) {
  ChannelBox *b = check_channel(L, 1);
  unsigned id = check_conn_id(L, 2);
  int ok = lua_toboolean(L, 3);
  const char *why = luaL_optstring(L, 4, "connection failed");
  pc_GrpcChannel_HostConnected(b->ch, id, ok, why);
  return 0;
}

static int lpc_grpcchannel_host_output(lua_State *L) {
  ChannelBox *b = check_channel(L, 1);
  unsigned id = check_conn_id(L, 2);
  if (lua_toboolean(L, 3)) { /* a peek: no string made of bytes that stay queued */
    if (!pc_GrpcChannel_HostHasOutput(b->ch, id)) return 0;
    lua_pushboolean(L, 1);
    return 1;
  }
  const char *p;
  size_t n = pc_GrpcChannel_HostOutput(b->ch, id, &p);
  if (n == 0) return 0;
  lua_pushlstring(L, p, n);
  return 1;
}

static int lpc_grpcchannel_host_wrote(lua_State *L) {
  ChannelBox *b = check_channel(L, 1);
  unsigned id = check_conn_id(L, 2);
  lua_Integer n = luaL_checkinteger(L, 3);
  luaL_argcheck(L, n >= 0, 3, "byte count >= 0 expected");
  pc_GrpcChannel_HostWrote(b->ch, id, (size_t)n);
  return 0;
}

static int lpc_grpcchannel_host_recv(lua_State *L) {
  ChannelBox *b = check_channel(L, 1);
  unsigned id = check_conn_id(L, 2);
  size_t len;
  const char *data = luaL_checklstring(L, 3, &len);
  lua_pushboolean(L, pc_GrpcChannel_HostRecv(b->ch, id, data, len));
  return 1;
}

static int lpc_grpcchannel_host_lost(lua_State *L) {
  ChannelBox *b = check_channel(L, 1);
  unsigned id = check_conn_id(L, 2);
  pc_GrpcChannel_HostLost(b->ch, id, luaL_checkstring(L, 3));
  return 0;
}

/* -- n, all = ch:host_woken(tokens)
 * The wake tokens (call:wake_token()) of the calls something happened to
 * since the last look, into 'tokens' at 1..n (the entries after n are
 * stale), the channel's wake list cleared; 'all' is true when the list
 * overflowed (every waiter must look). A host driver's waits use it to
 * wake the waiters of those calls alone (lua/protocall/transport/driver.lua). */
static int lpc_grpcchannel_host_woken(lua_State *L) {
  ChannelBox *b = check_channel(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  pc_GrpcWakeList *w = pc_GrpcChannel_Wake(b->ch);
  int all = pc_GrpcWakeList_Overflow(w);
  const uint64_t *items;
  lua_Integer n = 0;
  for (size_t k = 0; k < pc_GrpcWakeList_Items(w, &items); k++) {
    lua_pushinteger(L, (lua_Integer)items[k]);
    lua_rawseti(L, 2, ++n);
  }
  pc_GrpcWakeList_Clear(w);
  lua_pushinteger(L, n);
  lua_pushboolean(L, all);
  return 2;
}

/* -- connected = ch:connected()   -- a connection is open or opening
 * (pc_GrpcChannel_Connected) */
static int lpc_grpcchannel_connected(lua_State *L) {
  ChannelBox *cb = check_channel(L, 1);
  lua_pushboolean(L, pc_GrpcChannel_Connected(cb->ch));
  return 1;
}

/* -- busy = ch:busy()   -- a call on it is not freed yet (pc_GrpcChannel_Busy);
 * false once the channel is collected */
static int lpc_grpcchannel_busy(lua_State *L) {
  ChannelBox *cb = check_box(L, 1, &channel_tag, sizeof(ChannelBox), CHANNEL_MT);
  lua_pushboolean(L, cb->ch != NULL && pc_GrpcChannel_Busy(cb->ch));
  return 1;
}

/* -- n = ch:goaways()   -- GOAWAY frames received (pc_GrpcChannel_Goaways) */
static int lpc_grpcchannel_goaways(lua_State *L) {
  ChannelBox *cb = check_channel(L, 1);
  lua_pushinteger(L, pc_GrpcChannel_Goaways(cb->ch));
  return 1;
}

/* -- seconds | nil = ch:next_attempt()   -- seconds until the reconnection
 * backoff allows the next connection attempt, nil when one may be made now
 * (pc_GrpcChannel_NextAttempt); raises on a closed channel */
static int lpc_grpcchannel_next_attempt(lua_State *L) {
  ChannelBox *cb = check_channel(L, 1);
  double in = pc_GrpcChannel_NextAttempt(cb->ch);
  if (in > 0)
    lua_pushnumber(L, (lua_Number)in);
  else
    lua_pushnil(L);
  return 1;
}

#define RESOLVE_MAX 64

typedef struct {
  pc_NetResolver *r; /* NULL once closed */
} ResolverBox;

/* -- r | nil, message = core.resolver(name, port, server, min_interval, query_timeout)
 * A resolver (core/net/resolve.h) of 'name' for TCP 'port' (A and AAAA
 * records), or of its SRV records when 'port' is 0; 'server' "IP:PORT" or
 * nil (the system's), the intervals in seconds or nil. Nothing is sent
 * before its first step. */
static int lpc_resolver_new(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  lua_Integer port = luaL_checkinteger(L, 2);
  luaL_argcheck(L, port >= 0 && port <= 65535, 2, "port in 0..65535 expected");
  pc_NetResolverOptions o = {luaL_optstring(L, 3, NULL), luaL_optnumber(L, 4, 0),
                             luaL_optnumber(L, 5, 0)};
  ResolverBox *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->r = NULL;
  luaL_setmetatable(L, RESOLVER_MT);
  pc_Error err;
  pc_Error_Init(&err);
  b->r = pc_NetResolver_New(name, (unsigned)port, &o, NULL, NULL, &err);
  if (b->r == NULL) {
    lua_pushnil(L);
    lua_pushstring(L, err.msg);
    return 2;
  }
  return 1;
}

static ResolverBox *check_resolver(lua_State *L) {
  ResolverBox *b = luaL_checkudata(L, 1, RESOLVER_MT);
  if (b->r == NULL) luaL_error(L, "resolver is closed");
  return b;
}

/* -- version = r:step()
 * A round that does not wait (pc_NetResolver_Step): starts a resolution
 * that is due, reads what came; the count of resolutions ended. */
static int lpc_resolver_step(lua_State *L) {
  lua_pushinteger(L, pc_NetResolver_Step(check_resolver(L)->r));
  return 1;
}

/* -- {{host=, port=, weight=}, ...}, message | nil = r:result()
 * The addresses of the last good resolution (empty before one) and why
 * the last one failed (nil when it did not). */
static int lpc_resolver_result(lua_State *L) {
  pc_NetResolver *r = check_resolver(L)->r;
  const pc_NetAddress *a;
  size_t n = pc_NetResolver_Addresses(r, &a);
  lua_createtable(L, (int)n, 0);
  for (size_t i = 0; i < n; i++) {
    lua_createtable(L, 0, 3);
    lua_pushstring(L, a[i].host);
    lua_setfield(L, -2, "host");
    lua_pushinteger(L, a[i].port);
    lua_setfield(L, -2, "port");
    lua_pushinteger(L, a[i].weight);
    lua_setfield(L, -2, "weight");
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  const char *why = pc_NetResolver_Error(r);
  if (why)
    lua_pushstring(L, why);
  else
    lua_pushnil(L);
  return 2;
}

/* -- r:refresh()   -- a resolution as soon as the minimum interval allows */
static int lpc_resolver_refresh(lua_State *L) {
  pc_NetResolver_Refresh(check_resolver(L)->r);
  return 0;
}

/* -- r:close()   -- frees it (what is under way is dropped); idempotent */
static int lpc_resolver_close(lua_State *L) {
  ResolverBox *b = luaL_checkudata(L, 1, RESOLVER_MT);
  pc_NetResolver_Free(b->r);
  b->r = NULL;
  return 0;
}

/* -- {address, ...} | nil, message = core.resolve(host, port)
 * Every numeric address of 'host' (at most 64; pc_Net_Resolve). */
static int lpc_resolve(lua_State *L) {
  const char *host = luaL_checkstring(L, 1);
  const char *port = luaL_checkstring(L, 2);
  char(*out)[PC_NET_ADDRESS_MAX] = lua_newuserdatauv(L, RESOLVE_MAX * sizeof *out, 0);
  pc_Error err;
  pc_Error_Init(&err);
  size_t n = pc_Net_Resolve(host, port, out, RESOLVE_MAX, &err);
  if (n == 0) {
    lua_pushnil(L);
    lua_pushstring(L, err.msg);
    return 2;
  }
  lua_createtable(L, (int)n, 0);
  for (size_t i = 0; i < n; i++) {
    lua_pushstring(L, out[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  return 1;
}

/* A method about to build Lua values from the call: each allocation may
 * run finalizers, and one may call call:close(), which then waits for
 * end_read (the call's memory stays while the method reads it). */
static void begin_read(CallBox *b) {
  b->reading = 1;
}

static void end_read(CallBox *b) {
  b->reading = 0;
  if (!b->close_asked) return;
  pc_GrpcCall_Free(b->call);
  b->call = NULL;
  b->tag = &closed_call_tag;
}

static CallBox *check_call(lua_State *L) {
  CallBox *b = check_box(L, 1, &call_tag, sizeof(CallBox), CALL_MT);
  if (b->call == NULL) luaL_argerror(L, 1, "call is closed");
  return b;
}

/* -- ok = call:send(bytes)   -- queues one request message; false once the
 * call has ended or its sending side is closed */
static int lpc_grpccall_send(lua_State *L) {
  CallBox *b = check_call(L);
  size_t len;
  const char *msg = luaL_checklstring(L, 2, &len);
  lua_pushboolean(L, pc_GrpcCall_Send(b->call, msg, len));
  return 1;
}

/* -- n = call:unsent()   -- request bytes queued, not yet sent (flow control) */
static int lpc_grpccall_unsent(lua_State *L) {
  CallBox *b = check_call(L);
  lua_pushinteger(L, (lua_Integer)pc_GrpcCall_Unsent(b->call));
  return 1;
}

/* -- ok = call:peer_settings() -- its connection received the server's first
 * SETTINGS (pc_GrpcCall_PeerSettings) */
static int lpc_grpccall_peer_settings(lua_State *L) {
  CallBox *b = check_call(L);
  lua_pushboolean(L, pc_GrpcCall_PeerSettings(b->call));
  return 1;
}

/* -- call:close_send()   -- no more request messages */
static int lpc_grpccall_close_send(lua_State *L) {
  CallBox *b = check_call(L);
  pc_GrpcCall_CloseSend(b->call);
  return 0;
}

static void push_metadata(lua_State *L, const CallBox *b);
static int has_pairs(const CallBox *b);

/* -- bytes, last, md | false | nil = call:next(with_metadata, close_at_end)
 * The next response message; false when none is ready yet (pump and ask
 * again); nil once the call has ended (call:status()). With a message,
 * 'last' is true when the call has ended OK and no message follows (the
 * next call:next() gives nil and call:ok() true: a unary call's usual end
 * read in one call), else false; 'md' is then, with 'with_metadata' true,
 * call:metadata(), with 'with_metadata' "present", call:metadata(true)
 * (else nil). With 'close_at_end' true and 'last' true, the call is
 * closed too (call:close(): one method call less at a unary call's end). */
static int lpc_grpccall_next(lua_State *L) {
  CallBox *b = check_call(L);
  lua_settop(L, 3); /* the arguments stay at 2 and 3 under the results */
  const char *data;
  size_t len;
  int r = pc_GrpcCall_Next(b->call, &data, &len);
  if (r == 1) {
    begin_read(b);
    lua_pushlstring(L, data, len);
    const pc_GrpcStatus *st = pc_GrpcCall_Drained(b->call) ? pc_GrpcCall_Status(b->call) : NULL;
    int last = st != NULL && st->code == kPc_Code_Ok;
    lua_pushboolean(L, last);
    int n = 2;
    if (last && lua_toboolean(L, 2) && (lua_type(L, 2) != LUA_TSTRING || has_pairs(b))) {
      push_metadata(L, b); /* "present": only when there is a pair */
      n = 3;
    }
    if (last && lua_toboolean(L, 3)) b->close_asked = 1; /* end_read frees it */
    end_read(b);
    return n;
  }
  if (r == 0)
    lua_pushboolean(L, 0);
  else
    lua_pushnil(L);
  return 1;
}

/* -- done = call:headers_done()   -- response headers arrived or the call ended */
static int lpc_grpccall_headers_done(lua_State *L) {
  CallBox *b = check_call(L);
  lua_pushboolean(L, pc_GrpcCall_HeadersDone(b->call));
  return 1;
}

/* -- n = call:buffered()   -- bytes held for received, unread response data */
static int lpc_grpccall_buffered(lua_State *L) {
  CallBox *b = check_call(L);
  lua_pushinteger(L, (lua_Integer)pc_GrpcCall_Buffered(b->call));
  return 1;
}

/* Keys the transport consumes; users see the rest (as grpc's libraries).
 * A Connect or gRPC-Web call's answer is plain HTTP: its protocol and
 * transport fields are not metadata either (connect-go's rule), so such a
 * call made {with_metadata = "present"} gives nil as a gRPC one does, over
 * HTTP/1.1 (Date, Server, ...) as over HTTP/2. Those are fields of the
 * answer's head: trailers (a unary answer's "trailer-date", an
 * EndStream's metadata, gRPC-Web's trailers message) keep them, but
 * "connect-" is Connect's on both sides (the Connect spec). 'web' is
 * CallBox's. */
static int reserved_key(const pc_GrpcPair *p, int web, int trailers) {
  typedef struct {
    const char *s;
    size_t n; /* strlen(s): no strlen a compare */
  } Key;
  static const Key grpc[] = {{"content-type", 12},
                             {"grpc-status", 11},
                             {"grpc-message", 12},
                             {"grpc-encoding", 13},
                             {"grpc-accept-encoding", 20}};
  static const Key http[] = {{"content-length", 14},
                             {"content-encoding", 16},
                             {"accept-encoding", 15},
                             {"transfer-encoding", 17},
                             {"date", 4},
                             {"server", 6},
                             {"vary", 4}};
  for (size_t i = 0; i < sizeof grpc / sizeof grpc[0]; i++) {
    if (grpc[i].n == p->key_len && memcmp(grpc[i].s, p->key, p->key_len) == 0) return 1;
  }
  if (!web) return 0;
  if (web == 2 && p->key_len >= 8 && memcmp(p->key, "connect-", 8) == 0) return 1;
  if (trailers) return 0;
  for (size_t i = 0; i < sizeof http / sizeof http[0]; i++) {
    if (http[i].n == p->key_len && memcmp(http[i].s, p->key, p->key_len) == 0) return 1;
  }
  return 0;
}

static void push_pairs(lua_State *L, const CallBox *b, int trailers) {
  const pc_GrpcCall *call = b->call;
  size_t n = pc_GrpcCall_MetadataCount(call, trailers), shown = 0;
  for (size_t i = 0; i < n; i++)
    shown += !reserved_key(pc_GrpcCall_Metadata(call, trailers, i), b->web, trailers);
  lua_createtable(L, (int)shown, 0); /* no array part for the usual none */
  lua_Integer k = 0;
  for (size_t i = 0; i < n && (size_t)k < shown; i++) {
    const pc_GrpcPair *p = pc_GrpcCall_Metadata(call, trailers, i);
    if (reserved_key(p, b->web, trailers)) continue;
    lua_createtable(L, 2, 0);
    lua_pushlstring(L, p->key, p->key_len);
    lua_rawseti(L, -2, 1);
    lua_pushlstring(L, p->value, p->value_len);
    lua_rawseti(L, -2, 2);
    lua_rawseti(L, -2, ++k);
  }
}

/* Pushes {headers = ..., trailers = ...} without the reserved keys; in a
 * call's method, whose upvalues 1 and 2 are the keys' strings (lpc_open_net:
 * no lua_setfield interning them on every call). */
static void push_metadata(lua_State *L, const CallBox *b) {
  lua_createtable(L, 0, 2);
  lua_pushvalue(L, lua_upvalueindex(1));
  push_pairs(L, b, 0);
  lua_rawset(L, -3);
  lua_pushvalue(L, lua_upvalueindex(2));
  push_pairs(L, b, 1);
  lua_rawset(L, -3);
}

static void push_status(lua_State *L, const CallBox *b) {
  const pc_GrpcStatus *st = pc_GrpcCall_Status(b->call);
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
  if (st->unsent) {
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "unsent");
  }
  if (st->lost) {
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "lost");
  }
  if (st->peer) {
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "peer");
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
  push_pairs(L, b, 1);
  lua_setfield(L, -2, "metadata");
  push_pairs(L, b, 0);
  lua_setfield(L, -2, "headers");
}

/* -- status | nil = call:status()   -- the status table once the call ended */
static int lpc_grpccall_status(lua_State *L) {
  CallBox *b = check_call(L);
  if (pc_GrpcCall_Status(b->call) == NULL) return 0;
  begin_read(b);
  push_status(L, b);
  end_read(b);
  return 1;
}

/* -- ok | nil = call:ok()   -- once the call ended, whether its status is OK
 * (no status table: a unary call's usual end); nil while it runs */
static int lpc_grpccall_ok(lua_State *L) {
  CallBox *b = check_call(L);
  const pc_GrpcStatus *st = pc_GrpcCall_Status(b->call);
  if (st == NULL) return 0;
  lua_pushboolean(L, st->code == kPc_Code_Ok);
  return 1;
}

/* Whether the call received a pair push_pairs keeps (on either side). */
static int has_pairs(const CallBox *b) {
  for (int trailers = 0; trailers <= 1; trailers++) {
    size_t n = pc_GrpcCall_MetadataCount(b->call, trailers);
    for (size_t i = 0; i < n; i++)
      if (!reserved_key(pc_GrpcCall_Metadata(b->call, trailers, i), b->web, trailers)) return 1;
  }
  return 0;
}

/* -- md | nil = call:metadata([present])   -- {headers=, trailers=} received
 * so far; with 'present' true, nil when neither holds a pair (no tables) */
static int lpc_grpccall_metadata(lua_State *L) {
  CallBox *b = check_call(L);
  if (lua_toboolean(L, 2) && !has_pairs(b)) return 0;
  begin_read(b);
  push_metadata(L, b);
  end_read(b);
  return 1;
}

/* -- call:cancel()   -- ends a running call CANCELLED (RST_STREAM CANCEL) */
static int lpc_grpccall_cancel(lua_State *L) {
  CallBox *b = check_call(L);
  pc_GrpcCall_Cancel(b->call);
  return 0;
}

/* -- token = call:wake_token()
 * The call's wake token (an integer, the same each time): from the first
 * ask on, core.grpc_pump lists it when something happened to the call
 * (core/net/wake.h), so the scheduler resumes only the task of that call. */
static int lpc_grpccall_wake_token(lua_State *L) {
  CallBox *b = check_call(L);
  uint64_t token = (uint64_t)(uintptr_t)b->call;
  pc_GrpcCall_SetWakeToken(b->call, token);
  lua_pushinteger(L, (lua_Integer)token);
  return 1;
}

/* -- call:close()   -- cancels a running call (RST_STREAM) and frees it; idempotent */
static int lpc_grpccall_close(lua_State *L) {
  CallBox *b = lua_touserdata(L, 1);
  if (b == NULL || lua_rawlen(L, 1) != sizeof *b ||
      (b->tag != &call_tag && b->tag != &closed_call_tag)) /* a closed one: no slower */
    b = luaL_checkudata(L, 1, CALL_MT);
  if (b->reading) { /* a finalizer, run by an allocation of the method reading it */
    b->close_asked = 1;
    return 0;
  }
  pc_GrpcCall_Free(b->call);
  b->call = NULL;
  b->tag = &closed_call_tag; /* the other methods: luaL_checkudata, "call is closed" */
  return 0;
}

/* __gc: as call:close(), and no tag is left in the memory freed. */
static int lpc_grpccall_gc(lua_State *L) {
  CallBox *b = lua_touserdata(L, 1);
  if (b != NULL && lua_rawlen(L, 1) == sizeof *b) b->reading = 0; /* a read that raised */
  lpc_grpccall_close(L);
  ((CallBox *)lua_touserdata(L, 1))->tag = NULL;
  return 0;
}

typedef struct {
  pc_GrpcChannel **chs;
  pc_GrpcListener **ls;
  pc_NetResolver **rs;
  size_t n, m, k;
  int closed; /* the list holds a closed one */
} Waitables;

/* The open channels and listeners of the list at 'idx' (its arrays in a
 * userdata pushed on the stack, which keeps them until the caller
 * returns); returns how many entries the list has. */
static lua_Integer waitables(lua_State *L, int idx, Waitables *w) {
  luaL_checktype(L, idx, LUA_TTABLE);
  w->n = w->m = w->k = 0;
  w->closed = 0;
  lua_Integer len = luaL_len(L, idx);
  luaL_argcheck(L, len >= 0 && len <= 1000000, idx, "too many channels and listeners");
  void **room = lua_newuserdatauv(L, 3 * ((size_t)len + 1) * sizeof(void *), 0);
  w->chs = (pc_GrpcChannel **)room;
  w->ls = (pc_GrpcListener **)(room + len + 1);
  w->rs = (pc_NetResolver **)(room + 2 * (len + 1));
  for (lua_Integer i = 1; i <= len; i++) {
    lua_geti(L, idx, i);
    ResolverBox *rb = luaL_testudata(L, -1, RESOLVER_MT);
    if (rb) {
      if (rb->r == NULL) w->closed = 1;
      if (rb->r) w->rs[w->k++] = rb->r;
    } else if (lpc_is_listener(L, -1)) {
      pc_GrpcListener *l = lpc_to_listener(L, -1);
      if (l == NULL) w->closed = 1;
      if (l) w->ls[w->m++] = l;
    } else {
      ChannelBox *b = luaL_checkudata(L, -1, CHANNEL_MT);
      if (b->ch == NULL) w->closed = 1;
      if (b->ch) w->chs[w->n++] = b->ch;
    }
    lua_pop(L, 1);
  }
  return len;
}

/* The wake list of the channel or listener at 'idx' (NULL: closed). */
static pc_GrpcWakeList *wake_list(lua_State *L, int idx) {
  if (lpc_is_listener(L, idx)) {
    pc_GrpcListener *l = lpc_to_listener(L, idx);
    return l ? pc_GrpcListener_Wake(l) : NULL;
  }
  ChannelBox *b = luaL_checkudata(L, idx, CHANNEL_MT);
  return b->ch ? pc_GrpcChannel_Wake(b->ch) : NULL;
}

/* Puts the wake tokens listed by the waitables of the list at 'idx' in
 * the table at 'out' (at 1..n, the entries after n left as they were) and
 * clears their lists; pushes n and 'all', the waitables whose every waiter
 * must look (a closed one, or one whose list overflowed), or nil. A list
 * is cleared only once its tokens are in 'out', so an error of memory in
 * between loses none. */
static void take_woken(lua_State *L, int idx, int out) {
  lua_Integer len = luaL_len(L, idx), nt = 0, na = 0;
  lua_pushnil(L);
  int all = lua_gettop(L);
  for (lua_Integer i = 1; i <= len; i++) {
    lua_geti(L, idx, i);
    if (luaL_testudata(L, -1, RESOLVER_MT)) { /* no calls: its waiters look each round */
      lua_pop(L, 1);
      continue;
    }
    pc_GrpcWakeList *w = wake_list(L, -1);
    if (w == NULL || pc_GrpcWakeList_Overflow(w)) {
      if (na == 0) {
        lua_newtable(L);
        lua_replace(L, all);
      }
      lua_pushvalue(L, -1);
      lua_rawseti(L, all, ++na);
    }
    lua_pop(L, 1);
    if (w == NULL) continue;
    /* Items again each time: a call the collector frees meanwhile may
     * list itself (its stream's end), moving the array. */
    const uint64_t *items;
    for (size_t k = 0; k < pc_GrpcWakeList_Items(w, &items); k++) {
      lua_pushinteger(L, (lua_Integer)items[k]);
      lua_rawseti(L, out, ++nt);
    }
    pc_GrpcWakeList_Clear(w);
  }
  lua_pushinteger(L, nt);
  lua_insert(L, all); /* n, all */
}

/* Whether a waitable of 'w' has news a pump would hand out now. */
static int any_pending(const Waitables *w) {
  for (size_t i = 0; i < w->n; i++)
    if (pc_GrpcWakeList_Pending(pc_GrpcChannel_Wake(w->chs[i]))) return 1;
  for (size_t i = 0; i < w->m; i++)
    if (pc_GrpcWakeList_Pending(pc_GrpcListener_Wake(w->ls[i]))) return 1;
  return 0;
}

/* -- n, all | nil = core.grpc_pump(waitables, timeout, tokens)
 * One round of I/O over a list of channels and listeners (lpc_listen.c;
 * closed ones are skipped, and end the wait at once): sends, waits at most 'timeout' seconds
 * (capped by the nearest deadline), accepts and reads, ends calls past their deadline (no wait when
 * a wake list has news already). Puts the wake tokens (call:wake_token()) of the calls something
 * happened to since the last pump over their channel or listener in the table 'tokens' (at 1..n; a
 * table the caller uses again: the entries after n are stale) and returns n and the waitables of
 * the list whose every waiter must look (closed, or more news than their wake list held), or nil.
 * Raises "poll failed" when poll(2) failed or memory ran out. */
static int lpc_grpc_pump(lua_State *L) {
  luaL_checktype(L, 3, LUA_TTABLE);
  Waitables w;
  waitables(L, 1, &w);
  lua_Number timeout = luaL_checknumber(L, 2);
  /* A closed one (a listener shut down, a closed resolver) in the list: its
   * waiter goes on at once, whatever else the list holds (a channel the
   * scheduler pumps for a call no task waits on, lua/protocall/sched.lua). */
  if (!(timeout > 0) || w.closed) timeout = 0;
  if (any_pending(&w)) timeout = 0; /* news already (a task cancelled a call): no wait */
  int ok = w.m > 0 || w.k > 0 ? pc_Grpc_PumpAll(w.chs, w.n, w.ls, w.m, w.rs, w.k, timeout)
                              : pc_Grpc_Pump(w.chs, w.n, timeout);
  if (!ok) return luaL_error(L, "poll failed: %s", strerror(errno)); /* ENOMEM: no room */
  take_woken(L, 1, 3);
  return 2;
}

/* -- core.grpc_poll_fds(waitables, timeout) -> {{fd, "r" | "w" | "rw"}, ...}, seconds
 * What core.grpc_pump over the same list would poll, without polling
 * (pc_Grpc_PollFds): the descriptors with the events wanted, and
 * 'timeout' lowered to when the next deadline or timer is due (0 when one
 * in the list is closed or has wake tokens for the next pump to hand
 * out). */
static int lpc_grpc_poll_fds(lua_State *L) {
  Waitables w;
  waitables(L, 1, &w);
  double timeout = luaL_checknumber(L, 2);
  if (w.closed) timeout = 0; /* its waiter goes on at once */
  size_t max = pc_Grpc_PollCount(w.chs, w.n, w.ls, w.m, w.k);
  struct pollfd *fds = lua_newuserdatauv(L, (max ? max : 1) * sizeof *fds, 0);
  size_t nfds = pc_Grpc_PollFds(w.chs, w.n, w.ls, w.m, w.rs, w.k, fds, max, &timeout);
  if (any_pending(&w)) timeout = 0; /* news (a deadline it just enforced): pump at once */
  lua_createtable(L, (int)nfds, 0);
  for (size_t i = 0; i < nfds; i++) {
    int r = (fds[i].events & POLLIN) != 0, wr = (fds[i].events & POLLOUT) != 0;
    lua_createtable(L, 2, 0);
    lua_pushinteger(L, fds[i].fd);
    lua_rawseti(L, -2, 1);
    lua_pushstring(L, r && wr ? "rw" : wr ? "w" : "r");
    lua_rawseti(L, -2, 2);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_pushnumber(L, timeout < 0 ? 0 : timeout);
  return 2;
}

/* -- index = core.if_index(name)   -- the index of this host's network
 * interface 'name' (if_nametoindex(3)), 0 when it has none of that name:
 * the zone of an xDS endpoint's IPv6 address
 * (lua/protocall/transport/xds_client.lua). */
static int lpc_if_index(lua_State *L) {
  size_t len;
  const char *name = luaL_checklstring(L, 1, &len);
  unsigned index = len > 0 && len < IF_NAMESIZE && strlen(name) == len ? if_nametoindex(name) : 0;
  lua_pushinteger(L, (lua_Integer)index);
  return 1;
}

/* -- kind | nil, why = core.file_kind(path)
 * What 'path' names, its symbolic links followed (stat(2)), without opening
 * it (opening a FIFO waits for a writer): "file", "directory", "fifo",
 * "character device", "block device" or "other" (a socket, say); nil and
 * strerror's text when stat fails ("No such file or directory"). */
static int lpc_file_kind(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  struct stat st;
  if (stat(path, &st) != 0) {
    lua_pushnil(L);
    lua_pushstring(L, strerror(errno));
    return 2;
  }
  const char *kind = S_ISREG(st.st_mode)    ? "file"
                     : S_ISDIR(st.st_mode)  ? "directory"
                     : S_ISFIFO(st.st_mode) ? "fifo"
                     : S_ISCHR(st.st_mode)  ? "character device"
                     : S_ISBLK(st.st_mode)  ? "block device"
                                            : "other";
  lua_pushstring(L, kind);
  return 1;
}

/* A FIFO of core.open_fifo: its descriptor, -1 once closed. */
typedef struct {
  int fd;
} FifoBox;

/* -- fifo | nil, why = core.open_fifo(path)
 * Opens the FIFO (named pipe, or a pipe such as bash's <(cmd)) 'path' for
 * reading without waiting for a writer (O_NONBLOCK; close-on-exec), for
 * core.read_ready, which gives "" while no writer's bytes are there and nil
 * once a writer that came has gone (Linux reports no hangup on a FIFO
 * opened so before its first writer); nil and strerror's text when open(2)
 * fails. The binding owns the descriptor: fifo:close() closes it
 * (idempotent), as do its __gc and, under Lua 5.4, __close.
 * (`protocall call -d @FIFO`: a stream's documents as they come, a unary
 * call's one under -max-time, lua/protocall/cli/call.lua.) */
static int lpc_open_fifo(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  FifoBox *f = lua_newuserdatauv(L, sizeof *f, 0); /* before the open: nothing leaks if it raises */
  f->fd = -1;
  luaL_setmetatable(L, FIFO_MT);
  do f->fd = open(path, O_RDONLY | O_NONBLOCK);
  while (f->fd < 0 && errno == EINTR);
  if (f->fd < 0) {
    lua_pushnil(L);
    lua_pushstring(L, strerror(errno));
    return 2;
  }
  (void)fcntl(f->fd, F_SETFD, FD_CLOEXEC); /* (O_CLOEXEC: POSIX 2008, not this build's) */
  return 1;
}

/* -- fifo:close()   -- closes the FIFO of core.open_fifo; idempotent */
static int lpc_fifo_close(lua_State *L) {
  FifoBox *f = luaL_checkudata(L, 1, FIFO_MT);
  if (f->fd >= 0) close(f->fd);
  f->fd = -1;
  return 0;
}

/* -- bytes | "" | nil [, message] = core.read_ready(source [, max [, wait]])
 * What 'source' (0: standard input; or a FIFO of core.open_fifo) holds,
 * read once something is there or 'wait' seconds have passed (default 0:
 * at once; 2147483 or more, math.huge say: no limit): up to 'max' bytes
 * (default 65536, at most 16 MiB), "" when nothing came (or a signal
 * interrupted the wait), nil at end of file, nil and "read: why" when
 * poll(2) or read(2) failed; raises "bad argument #1 to 'read_ready' (0
 * (standard input) or a FIFO of open_fifo expected)" for any other
 * source, "(the FIFO is closed)" for a closed one, and likewise for 'max'
 * and 'wait'. Without 'wait', for a task under pc.run reading a pipe or a
 * terminal, which a blocking read would stop with every other task
 * (`protocall call -d @` or -d @FIFO of a stream); with it, for a reader
 * alone (a unary call's document, lua/protocall/cli/call.lua). A FIFO no writer
 * has opened yet waits so too: Linux reports no hangup before its first
 * writer has come and gone. */
static int lpc_read_ready(lua_State *L) {
  int isint = 0, fd = 0;
  lua_Integer max = 65536;
  if (!(lua_type(L, 1) == LUA_TNUMBER && lua_tonumber(L, 1) == 0)) {
    FifoBox *f = luaL_testudata(L, 1, FIFO_MT);
    if (f == NULL)
      lpc_arg_error(L, 1, "read_ready", "0 (standard input) or a FIFO of open_fifo expected");
    if (f->fd < 0) lpc_arg_error(L, 1, "read_ready", "the FIFO is closed");
    fd = f->fd;
  }
  if (!lua_isnoneornil(L, 2)) {
    max = lua_tointegerx(L, 2, &isint);
    if (!isint || max < 1 || max > (lua_Integer)16 * 1024 * 1024)
      lpc_arg_error(L, 2, "read_ready", "1 to 16777216 bytes expected");
  }
  int isnum = 1;
  lua_Number wait = lua_isnoneornil(L, 3) ? 0 : lua_tonumberx(L, 3, &isnum);
  if (!isnum || !(wait >= 0)) lpc_arg_error(L, 3, "read_ready", "seconds >= 0 expected");
  struct pollfd p = {.fd = fd, .events = POLLIN};
  int r = poll(&p, 1, wait >= INT_MAX / 1000 ? -1 : (int)ceil(wait * 1000));
  if (r == 0 || (r < 0 && errno == EINTR)) {
    lua_pushliteral(L, "");
    return 1;
  }
  if (r > 0 && (p.revents & POLLNVAL)) errno = EBADF;
  luaL_Buffer b;
  char *room = r > 0 && !(p.revents & POLLNVAL) ? luaL_buffinitsize(L, &b, (size_t)max) : NULL;
  ssize_t n = -1;
  if (room != NULL) {
    do n = read(fd, room, (size_t)max);
    while (n < 0 && errno == EINTR);
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    lua_pushliteral(L, "");
    return 1;
  }
  if (n < 0) {
    lua_pushnil(L);
    lua_pushfstring(L, "read: %s", strerror(errno));
    return 2;
  }
  if (n == 0) {
    lua_pushnil(L);
    return 1;
  }
  luaL_pushresultsize(&b, (size_t)n);
  return 1;
}

/* Bounds on one metadata list: HTTP/2 peers refuse far less (gRPC servers
 * take 8 KiB of headers by default). */
#define LPC_METADATA_MAX_PAIRS 1000
#define LPC_METADATA_MAX_BYTES ((size_t)64 * 1024)

/* -- nil | message, over = core.metadata_problem(md [, pairs, bytes])
 * What is wrong with 'md' as call metadata, or nil: it must be a list of
 * {key, value} string pairs (no other keys; a table with a metatable,
 * such as the read-only views calls hand out, is read through __len and
 * __index only) each of which pc_GrpcPair_Check accepts, at most
 * LPC_METADATA_MAX_PAIRS pairs and LPC_METADATA_MAX_BYTES. 'md' may
 * continue a list of 'pairs' pairs and 'bytes' bytes of keys and values
 * (default 0: a handler's response metadata is checked a pair at a time);
 * 'over' is true when what is wrong is a bound passed. The one check
 * every place metadata enters uses (pc._metadata_problem). */
static int lpc_grpc_metadata_problem(lua_State *L) {
  lua_Integer before = luaL_optinteger(L, 2, 0);
  lua_Integer before_bytes = luaL_optinteger(L, 3, 0);
  luaL_argcheck(L, before >= 0, 2, "pairs >= 0 expected");
  luaL_argcheck(L, before_bytes >= 0, 3, "bytes >= 0 expected");
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
  if (n > LPC_METADATA_MAX_PAIRS - before) {
    lua_pushfstring(L, "metadata: %I pairs, at most %d", n + before, LPC_METADATA_MAX_PAIRS);
    lua_pushboolean(L, 1);
    return 2;
  }
  size_t total = (size_t)before_bytes;
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
      lua_pushboolean(L, 1);
      return 2;
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

/* -- The web's protocols (core/net/web.h) for a proxy in Lua: the gateway
 * inside nginx (lua/protocall/http/web.lua) frames gRPC-Web and Connect
 * answers with these, as the server engine frames its own. */

/* -- protocol, codec = core.web_classify(method, content_type)
 * "grpc", "grpc-web", "grpc-web-text", "connect" (unary) or
 * "connect-stream", and "proto" or "json" (pc_Web_Classify); nil when the
 * content type is none of them. */
static int lpc_web_classify(lua_State *L) {
  const char *method = luaL_checkstring(L, 1);
  size_t ctn = 0;
  const char *ct = luaL_optlstring(L, 2, NULL, &ctn);
  pc_WebCodec codec = kPc_WebCodec_Proto;
  pc_WebProtocol p = pc_Web_Classify(method, ct, ctn, &codec);
  static const char *const names[] = {NULL,      "grpc",          "grpc-web", "grpc-web-text",
                                      "connect", "connect-stream"};
  if (p == kPc_WebProtocol_None || (size_t)p >= sizeof names / sizeof names[0]) return 0;
  lua_pushstring(L, names[p]);
  lua_pushstring(L, codec == kPc_WebCodec_Json ? "json" : "proto");
  return 2;
}

/* A status table's fields ({code = name or number, message =, details =
 * bytes of a google.rpc.Status}) at 'idx' into '*st' (strings anchored
 * in the table). */
static void check_web_status(lua_State *L, int idx, pc_GrpcStatus *st) {
  luaL_checktype(L, idx, LUA_TTABLE);
  memset(st, 0, sizeof *st);
  int t = lua_getfield(L, idx, "code");
  int code = -1;
  if (t == LUA_TSTRING) {
    size_t n;
    const char *name = lua_tolstring(L, -1, &n);
    code = pc_Code_FromName(name, n);
  } else if (t == LUA_TNUMBER && lua_isinteger(L, -1)) {
    lua_Integer c = lua_tointeger(L, -1);
    code = c >= 0 && c < PC_CODE_COUNT ? (int)c : -1;
  }
  lua_pop(L, 1);
  if (code < 0) luaL_argerror(L, idx, "code: a gRPC status name or number expected");
  st->code = (pc_Code)code;
  if (lua_getfield(L, idx, "message") == LUA_TSTRING)
    st->message = lua_tolstring(L, -1, &st->message_len);
  lua_pop(L, 1);
  if (lua_getfield(L, idx, "details") == LUA_TSTRING)
    st->details = lua_tolstring(L, -1, &st->details_len);
  lua_pop(L, 1);
}

/* The {key, value} list at 'idx' (nil: none) as pairs in a userdata
 * pushed on the stack, the pairs' strings kept on the stack above it. */
static pc_GrpcPair *check_web_pairs(lua_State *L, int idx, size_t *n) {
  *n = 0;
  if (lua_isnoneornil(L, idx)) return NULL;
  luaL_checktype(L, idx, LUA_TTABLE);
  size_t count = (size_t)luaL_len(L, idx);
  pc_GrpcPair *pairs = lua_newuserdatauv(L, (count ? count : 1) * sizeof *pairs, 0);
  if (count > (size_t)INT_MAX / 2 - LUA_MINSTACK) luaL_error(L, "too much metadata");
  luaL_checkstack(L, (int)(2 * count) + LUA_MINSTACK, "too much metadata");
  for (size_t i = 0; i < count; i++) {
    int ok = lua_geti(L, idx, (lua_Integer)i + 1) == LUA_TTABLE;
    ok = ok && lua_geti(L, -1, 1) == LUA_TSTRING;
    ok = ok && lua_geti(L, -2, 2) == LUA_TSTRING;
    if (!ok) luaL_error(L, "metadata entry %d: {key, value} strings expected", (int)i + 1);
    lua_remove(L, -3); /* the strings stay on the stack (a list read through __index) */
    pairs[i].key = lua_tolstring(L, -2, &pairs[i].key_len);
    pairs[i].value = lua_tolstring(L, -1, &pairs[i].value_len);
  }
  *n = count;
  return pairs;
}

typedef int WebFrameFn(pc_Alloc *alloc, void *ud, pc_GrpcBuf *out, const pc_GrpcStatus *st,
                       const pc_GrpcPair *md, size_t n);

static int push_web_frame(lua_State *L, WebFrameFn *fn) {
  pc_GrpcStatus st;
  check_web_status(L, 1, &st);
  size_t n;
  const pc_GrpcPair *md = check_web_pairs(L, 2, &n);
  pc_GrpcBuf out = {0};
  if (!fn(pc_DefaultAlloc, NULL, &out, &st, md, n)) {
    pc_GrpcBuf_Free(pc_DefaultAlloc, NULL, &out);
    return luaL_error(L, "not enough memory");
  }
  lua_pushlstring(L, out.p ? out.p : "", out.len);
  pc_GrpcBuf_Free(pc_DefaultAlloc, NULL, &out);
  return 1;
}

/* -- bytes = core.web_trailers(status, trailers)
 * The gRPC-Web trailers message (flags 0x80) of 'status' ({code =,
 * message =, details = grpc-status-details-bin bytes}) and the
 * {key, value} list 'trailers' (pc_Web_GrpcWebTrailers). */
static int lpc_web_trailers(lua_State *L) {
  return push_web_frame(L, pc_Web_GrpcWebTrailers);
}

/* -- bytes = core.connect_end_stream(status, trailers)
 * Connect's end-of-stream message (flags 0x02) (pc_Connect_EndStream). */
static int lpc_connect_end_stream(lua_State *L) {
  return push_web_frame(L, pc_Connect_EndStream);
}

/* -- json, http_status = core.connect_error(status)
 * Connect's error JSON of a unary call and its HTTP status
 * (pc_Connect_ErrorJson, pc_Connect_HttpStatus). */
static int lpc_connect_error(lua_State *L) {
  pc_GrpcStatus st;
  check_web_status(L, 1, &st);
  pc_GrpcBuf out = {0};
  if (!pc_Connect_ErrorJson(pc_DefaultAlloc, NULL, &out, &st)) {
    pc_GrpcBuf_Free(pc_DefaultAlloc, NULL, &out);
    return luaL_error(L, "not enough memory");
  }
  lua_pushlstring(L, out.p ? out.p : "", out.len);
  pc_GrpcBuf_Free(pc_DefaultAlloc, NULL, &out);
  lua_pushinteger(L, pc_Connect_HttpStatus(st.code));
  return 2;
}

/* -- seconds | nil = core.connect_timeout(s)   -- Connect-Timeout-Ms, nil when malformed */
static int lpc_connect_timeout(lua_State *L) {
  size_t len;
  const char *s = luaL_checklstring(L, 1, &len);
  double t = pc_Connect_ParseTimeout(s, len);
  if (t < 0) return 0;
  lua_pushnumber(L, t);
  return 1;
}

/* -- bytes | nil, offset = core.web_base64_decode(s)
 * Standard base64 whose padded groups may follow each other, CR and LF
 * skipped (the body of a gRPC-Web-Text request); nil and the 0-based offset of the first bad
 * character, or of the end when a group is unfinished. */
static int lpc_web_base64_decode(lua_State *L) {
  size_t len;
  const char *s = luaL_checklstring(L, 1, &len);
  pc_WebBase64 b64;
  memset(&b64, 0, sizeof b64);
  luaL_Buffer b;
  unsigned char *out = (unsigned char *)luaL_buffinitsize(L, &b, len / 4 * 3 + 3);
  size_t at = 0;
  size_t n = pc_WebBase64_Decode(&b64, s, len, out, &at);
  if (n == (size_t)-1 || pc_WebBase64_Pending(&b64) != 0) {
    lua_pushnil(L);
    lua_pushinteger(L, (lua_Integer)(n == (size_t)-1 ? at : len));
    return 2;
  }
  luaL_pushresultsize(&b, n);
  return 1;
}

/* -- s = core.web_base64_encode(bytes)   -- padded standard base64 */
static int lpc_web_base64_encode(lua_State *L) {
  size_t len;
  const unsigned char *s = (const unsigned char *)luaL_checklstring(L, 1, &len);
  luaL_Buffer b;
  char *out = luaL_buffinitsize(L, &b, (len + 2) / 3 * 4 + 1);
  luaL_pushresultsize(&b, pc_Web_Base64Encode(s, len, out));
  return 1;
}

void lpc_open_net(lua_State *L) {
  static const luaL_Reg channel_methods[] = {{"start", lpc_grpcchannel_start},
                                             {"close", lpc_grpcchannel_close},
                                             {"host_conns", lpc_grpcchannel_host_conns},
                                             {"host_tick", lpc_grpcchannel_host_tick},
                                             {"host_version", lpc_grpcchannel_host_version},
                                             {"host_connected", lpc_grpcchannel_host_connected},
                                             {"host_output", lpc_grpcchannel_host_output},
                                             {"host_wrote", lpc_grpcchannel_host_wrote},
                                             {"host_recv", lpc_grpcchannel_host_recv},
                                             {"host_lost", lpc_grpcchannel_host_lost},
                                             {"host_woken", lpc_grpcchannel_host_woken},
                                             {"connected", lpc_grpcchannel_connected},
                                             {"goaways", lpc_grpcchannel_goaways},
                                             {"next_attempt", lpc_grpcchannel_next_attempt},
                                             {"busy", lpc_grpcchannel_busy},
                                             {NULL, NULL}};
  static const luaL_Reg call_methods[] = {{"send", lpc_grpccall_send},
                                          {"unsent", lpc_grpccall_unsent},
                                          {"peer_settings", lpc_grpccall_peer_settings},
                                          {"close_send", lpc_grpccall_close_send},
                                          {"next", lpc_grpccall_next},
                                          {"headers_done", lpc_grpccall_headers_done},
                                          {"buffered", lpc_grpccall_buffered},
                                          {"status", lpc_grpccall_status},
                                          {"ok", lpc_grpccall_ok},
                                          {"metadata", lpc_grpccall_metadata},
                                          {"cancel", lpc_grpccall_cancel},
                                          {"wake_token", lpc_grpccall_wake_token},
                                          {"close", lpc_grpccall_close},
                                          {NULL, NULL}};
  static const luaL_Reg funcs[] = {{"grpc_channel", lpc_grpc_channel},
                                   {"grpc_pump", lpc_grpc_pump},
                                   {"grpc_poll_fds", lpc_grpc_poll_fds},
                                   {"read_ready", lpc_read_ready},
                                   {"if_index", lpc_if_index},
                                   {"file_kind", lpc_file_kind},
                                   {"open_fifo", lpc_open_fifo},
                                   {"resolve", lpc_resolve},
                                   {"resolver", lpc_resolver_new},
                                   {"grpc_timeout", lpc_grpc_timeout},
                                   {"grpc_percent_decode", lpc_grpc_percent_decode},
                                   {"metadata_problem", lpc_grpc_metadata_problem},
                                   {"web_classify", lpc_web_classify},
                                   {"web_trailers", lpc_web_trailers},
                                   {"connect_end_stream", lpc_connect_end_stream},
                                   {"connect_error", lpc_connect_error},
                                   {"connect_timeout", lpc_connect_timeout},
                                   {"web_base64_decode", lpc_web_base64_decode},
                                   {"web_base64_encode", lpc_web_base64_encode},
                                   {NULL, NULL}};
  luaL_newmetatable(L, CALL_MT);
  lua_newtable(L);
  lua_pushliteral(L, "headers");
  lua_pushliteral(L, "trailers");
  luaL_setfuncs(L, call_methods, 2); /* upvalues 1, 2: push_metadata's keys */
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, lpc_grpccall_gc);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, lpc_grpccall_close);
  lua_setfield(L, -2, "__close");
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  luaL_newmetatable(L, CHANNEL_MT);
  lua_newtable(L);
  lua_pushvalue(L, -3);
  luaL_setfuncs(L, channel_methods, 1); /* upvalue 1: the calls' metatable (ch:start) */
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, lpc_grpcchannel_gc);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, lpc_grpcchannel_close);
  lua_setfield(L, -2, "__close");
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_pop(L, 2);
  static const luaL_Reg resolver_methods[] = {{"step", lpc_resolver_step},
                                              {"result", lpc_resolver_result},
                                              {"refresh", lpc_resolver_refresh},
                                              {"close", lpc_resolver_close},
                                              {NULL, NULL}};
  luaL_newmetatable(L, RESOLVER_MT);
  luaL_newlib(L, resolver_methods);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, lpc_resolver_close);
  lua_setfield(L, -2, "__gc");
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_pop(L, 1);
  static const luaL_Reg fifo_methods[] = {{"close", lpc_fifo_close}, {NULL, NULL}};
  luaL_newmetatable(L, FIFO_MT);
  luaL_newlib(L, fifo_methods);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, lpc_fifo_close);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, lpc_fifo_close);
  lua_setfield(L, -2, "__close");
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_pop(L, 1);
  luaL_setfuncs(L, funcs, 0);
  /* core.web_accept_post: the content types core.web_classify takes, as a
   * 415's Accept-Post lists them */
  lua_pushliteral(L, PC_WEB_ACCEPT_POST);
  lua_setfield(L, -2, "web_accept_post");
}
