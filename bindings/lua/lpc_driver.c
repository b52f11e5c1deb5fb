/* Host I/O drivers from C (protocall.h, protocall_pushdriver): a
 * protocall_Driver's functions as the Lua driver table pc.grpc's `driver`
 * option takes (lua/protocall/transport/grpc.lua): `d.connect(host, port, o)` ->
 * socket userdata with send, receiveany, settimeouts, sslhandshake (when
 * the host gave one) and close, answering as a cosocket does (bytes, or
 * nil and "timeout" / "closed" / the host's message). */
#include "lpc.h"
#include "protocall.h"

#include <lauxlib.h>

#include <string.h>

#define DRIVER_MT "protocall.Driver"
#define SOCK_MT   "protocall.DriverSocket"
#define ERR_MAX   256
#define READ_MAX  ((lua_Integer)16 * 1024 * 1024) /* bytes one receiveany may ask */

typedef struct {
  protocall_Driver d; /* the host's, fields past its 'size' zeroed */
} DriverBox;

typedef struct {
  void *sock; /* the host's handle */
  int open;
} SockBox;

/* The driver of upvalue 1 (a DriverBox). */
static const protocall_Driver *driver_of(lua_State *L) {
  return &((DriverBox *)lua_touserdata(L, lua_upvalueindex(1)))->d;
}

static SockBox *check_sock(lua_State *L) {
  SockBox *b = luaL_checkudata(L, 1, SOCK_MT);
  if (!b->open) luaL_argerror(L, 1, "socket is closed");
  return b;
}

/* The driver of a socket (its user value). */
static const protocall_Driver *sock_driver(lua_State *L) {
  lua_getiuservalue(L, 1, 1);
  const protocall_Driver *d = &((DriverBox *)lua_touserdata(L, -1))->d;
  lua_pop(L, 1); /* the socket keeps it */
  return d;
}

static int fail(lua_State *L, const char *err) {
  lua_pushnil(L);
  lua_pushstring(L, err[0] ? err : "failed");
  return 2;
}

static double opt_number(lua_State *L, int t, const char *k, double dflt) {
  lua_getfield(L, t, k);
  double v = lua_isnumber(L, -1) ? lua_tonumber(L, -1) : dflt;
  lua_pop(L, 1);
  return v;
}

static const char *opt_str(lua_State *L, int t, const char *k) {
  lua_getfield(L, t, k);
  const char *s = lua_tostring(L, -1);
  lua_pop(L, 1); /* anchored in the options table */
  return s;
}

/* -- sock | nil, err = d.connect(host, port, o) */
static int lpc_driver_connect(lua_State *L) {
  const protocall_Driver *d = driver_of(L);
  const char *host = luaL_checkstring(L, 1);
  lua_Integer port = luaL_checkinteger(L, 2);
  luaL_argcheck(L, port >= 1 && port <= 65535, 2, "port 1..65535 expected");
  protocall_DriverConnect o;
  memset(&o, 0, sizeof o);
  o.verify = 1;
  o.timeout = 20;
  if (lua_istable(L, 3)) {
    lua_getfield(L, 3, "tls");
    o.tls = lua_toboolean(L, -1);
    lua_getfield(L, 3, "insecure");
    o.verify = !lua_toboolean(L, -1);
    lua_pop(L, 2);
    o.server_name = opt_str(L, 3, "server_name");
    o.ca_file = opt_str(L, 3, "ca_file");
    o.cert_file = opt_str(L, 3, "cert_file");
    o.key_file = opt_str(L, 3, "key_file");
    o.timeout = opt_number(L, 3, "timeout", 20);
  }
  SockBox *b = lua_newuserdatauv(L, sizeof *b, 1);
  b->sock = NULL;
  b->open = 0;
  luaL_setmetatable(L, SOCK_MT);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_setiuservalue(L, -2, 1); /* the driver outlives its sockets */
  char err[ERR_MAX] = "";
  if (d->connect(d->ud, host, (int)port, &o, &b->sock, err, sizeof err) != 0) return fail(L, err);
  b->open = 1;
  return 1;
}

/* -- n | nil, err = sock:send(bytes) */
static int lpc_sock_send(lua_State *L) {
  SockBox *b = check_sock(L);
  size_t len;
  const char *bytes = luaL_checklstring(L, 2, &len);
  const protocall_Driver *d = sock_driver(L);
  char err[ERR_MAX] = "";
  long n = d->send(d->ud, b->sock, bytes, len, err, sizeof err);
  if (n < 0) return fail(L, err);
  lua_pushinteger(L, n > (long)len ? (lua_Integer)len : (lua_Integer)n);
  return 1;
}

/* -- bytes | nil, "timeout" | nil, "closed" | nil, err = sock:receiveany(max) */
static int lpc_sock_receiveany(lua_State *L) {
  SockBox *b = check_sock(L);
  lua_Integer max = luaL_checkinteger(L, 2);
  luaL_argcheck(L, max > 0 && max <= READ_MAX, 2, "1..16 MiB expected");
  const protocall_Driver *d = sock_driver(L);
  luaL_Buffer buf;
  char *p = luaL_buffinitsize(L, &buf, (size_t)max);
  char err[ERR_MAX] = "";
  long n = d->receive(d->ud, b->sock, p, (size_t)max, err, sizeof err);
  if (n > 0) {
    luaL_pushresultsize(&buf, (size_t)(n > max ? max : n));
    return 1;
  }
  luaL_pushresultsize(&buf, 0);
  lua_pop(L, 1);
  return fail(L, n == 0 ? "timeout" : n == -1 ? "closed" : err);
}

/* -- sock:settimeouts(connect, send, read)   -- seconds */
static int lpc_sock_settimeouts(lua_State *L) {
  SockBox *b = check_sock(L);
  double c = luaL_checknumber(L, 2), s = luaL_checknumber(L, 3), r = luaL_checknumber(L, 4);
  const protocall_Driver *d = sock_driver(L);
  if (d->settimeouts) d->settimeouts(d->ud, b->sock, c, s, r);
  lua_pushboolean(L, 1);
  return 1;
}

/* -- true | nil, err = sock:sslhandshake(server_name, verify) */
static int lpc_sock_sslhandshake(lua_State *L) {
  SockBox *b = check_sock(L);
  const char *name = luaL_optstring(L, 2, NULL);
  int verify = lua_isnoneornil(L, 3) ? 1 : lua_toboolean(L, 3);
  const protocall_Driver *d = sock_driver(L);
  char err[ERR_MAX] = "";
  if (d->sslhandshake == NULL) return fail(L, "the driver has no sslhandshake");
  if (d->sslhandshake(d->ud, b->sock, name, verify, err, sizeof err) != 0) return fail(L, err);
  lua_pushboolean(L, 1);
  return 1;
}

/* -- sock:close()   -- idempotent (and at collection) */
static int lpc_sock_close(lua_State *L) {
  SockBox *b = luaL_checkudata(L, 1, SOCK_MT);
  if (b->open) {
    b->open = 0;
    const protocall_Driver *d = sock_driver(L);
    d->close(d->ud, b->sock);
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* Looks a method up: sslhandshake only when the host gave one, so the
 * channel knows to leave TLS to the driver otherwise. */
static int lpc_sock_index(lua_State *L) {
  const char *k = luaL_checkstring(L, 2);
  if (strcmp(k, "sslhandshake") == 0) {
    lua_getiuservalue(L, 1, 1);
    int has = ((DriverBox *)lua_touserdata(L, -1))->d.sslhandshake != NULL;
    lua_pop(L, 1);
    if (!has) return 0;
  }
  lua_pushvalue(L, 2);
  lua_rawget(L, lua_upvalueindex(1));
  return 1;
}

static int lpc_driver_gc(lua_State *L) {
  DriverBox *b = luaL_checkudata(L, 1, DRIVER_MT);
  if (b->d.release) b->d.release(b->d.ud);
  b->d.release = NULL;
  return 0;
}

void protocall_pushdriver(lua_State *L, const protocall_Driver *d) {
  const size_t need = offsetof(protocall_Driver, close) + sizeof d->close;
  if (d->size < need)
    luaL_error(L, "protocall_pushdriver: size %d is below the fields up to 'close' (%d bytes)",
               (int)d->size, (int)need);
  if (d->connect == NULL || d->send == NULL || d->receive == NULL || d->close == NULL)
    luaL_error(L, "protocall_pushdriver: connect, send, receive and close are required");
  if (luaL_newmetatable(L, SOCK_MT)) {
    static const luaL_Reg methods[] = {{"send", lpc_sock_send},
                                       {"receiveany", lpc_sock_receiveany},
                                       {"settimeouts", lpc_sock_settimeouts},
                                       {"sslhandshake", lpc_sock_sslhandshake},
                                       {"close", lpc_sock_close},
                                       {NULL, NULL}};
    luaL_newlib(L, methods);
    lua_pushcclosure(L, lpc_sock_index, 1);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, lpc_sock_close);
    lua_setfield(L, -2, "__gc");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
  }
  lua_pop(L, 1);
  if (luaL_newmetatable(L, DRIVER_MT)) {
    lua_pushcfunction(L, lpc_driver_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
  }
  lua_pop(L, 1);
  lua_createtable(L, 0, 1); /* the driver table */
  DriverBox *b = lua_newuserdatauv(L, sizeof *b, 0);
  memset(&b->d, 0, sizeof b->d);
  memcpy(&b->d, d, d->size < sizeof b->d ? d->size : sizeof b->d);
  b->d.size = sizeof b->d;
  luaL_setmetatable(L, DRIVER_MT); /* release from here on */
  lua_pushcclosure(L, lpc_driver_connect, 1);
  lua_setfield(L, -2, "connect");
}
