/* examples/host.c: a small C host embedding Lua with protocall
 * (bindings/lua/protocall.h). It
 *   1. loads examples/route.proto into a pool from C and freezes it,
 *   2. opens a Lua state with the module and hands it the pool,
 *   3. registers a host transport (a protocall_Transport): a unary C
 *      function that serves demo.Router's Measure (here computed in C; a
 *      real host would send the bytes over its own network stack), failing
 *      the first call with UNAVAILABLE so the client's retry policy shows,
 *      and the stream functions that serve Walk (server streaming: the
 *      route's points back, one response each),
 *   4. runs a script that calls both through it with pc.client, and reads
 *      the response back into C.
 * Built by CMake (target example_host) and run by ctest from the
 * repository root:  build/release/example_host */
#include "protocall.h"

#include <lauxlib.h>
#include <lualib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char kScript[] =
    "local pc = require 'protocall'\n"
    "local stub = pc.client('demo.Router', {\n"
    "  transport = transport, pool = pool, timeout = 5,\n"
    "  retry = pc.Retry{initial = 0.01, maximum = 0.1, timeout = 5},\n"
    "})\n"
    "local d = stub:Measure{name = 'triangle', points = {{x = 0, y = 0}, {x = 3, y = 0}, {x = 3, y "
    "= 4}}}\n"
    "print(string.format('script: %s is %.1f long in %d legs', 'triangle', d.length, d.legs))\n"
    "local n = 0\n"
    "for p in stub:Walk{points = {{x = 1, y = 2}, {x = 3, y = 4}}} do n = n + 1 end\n"
    "print(string.format('script: walked %d points', n))\n"
    "return d\n";

typedef struct {
  const pc_MessageDef *route, *point, *distance;
  int calls;
  pc_Arena *scratch; /* the last call's messages: the Router owns them, so
                        a Lua error raised while pushing leaks nothing */
  int walks_finished;
} Router;

/* One Walk call: the points of the request, handed back one per recv. */
typedef struct {
  pc_Arena *arena;
  const pc_Message *route;
  size_t next;
  char *bytes; /* the last response, valid until the next recv */
} Walk;

/* The host transport: one unary call, request bytes in, response bytes out
 * (pushed on L), or a gRPC status code with a message. */
static int router_unary(lua_State *L, void *ud, const protocall_Request *req) {
  Router *r = ud;
  if (++r->calls == 1) {
    lua_pushliteral(L, "warming up");
    return 14; /* UNAVAILABLE: the client's retry policy tries again */
  }
  printf("host: %s, %zu request bytes, timeout %.1f s\n", req->path, req->request_len,
         req->timeout);
  protocall_arena_free(r->scratch);
  pc_Arena *a = r->scratch = protocall_arena_new();
  char err[256];
  if (a == NULL) return luaL_error(L, "out of memory");
  pc_Message *route =
      protocall_decode(r->route, req->request, req->request_len, a, err, sizeof err);
  if (route == NULL) {
    lua_pushstring(L, err);
    return 3; /* INVALID_ARGUMENT */
  }
  size_t n = 0;
  protocall_get_size(route, r->route, "points", &n);
  double length = 0, px = 0, py = 0;
  for (size_t i = 0; i < n; i++) {
    const pc_Message *p;
    protocall_get_message_at(route, r->route, "points", i, &p, NULL);
    int64_t x = 0, y = 0;
    protocall_get_integer(p, r->point, "x", &x);
    protocall_get_integer(p, r->point, "y", &y);
    if (i > 0) length += hypot((double)x - px, (double)y - py);
    px = (double)x;
    py = (double)y;
  }
  pc_Message *d = protocall_message_new(r->distance, a);
  protocall_set_number(d, r->distance, "length", length, a);
  protocall_set_integer(d, r->distance, "legs", n > 0 ? n - 1 : 0, a);
  size_t len;
  const char *bytes = protocall_encode(d, r->distance, 0, a, &len, err, sizeof err);
  if (bytes == NULL) {
    lua_pushstring(L, err);
    return 13; /* INTERNAL */
  }
  lua_pushlstring(L, bytes, len);
  return PROTOCALL_OK;
}

/* The stream functions: protocall calls start, then send (the request)
 * and close_send, then recv until the end, then finish. */
static int walk_start(lua_State *L, void *ud, const protocall_Request *req, void **call) {
  (void)L;
  (void)ud;
  if (strcmp(req->path, "/demo.Router/Walk") != 0) {
    req->status->message = "only Walk streams";
    req->status->message_len = strlen(req->status->message);
    return 12; /* UNIMPLEMENTED */
  }
  Walk *w = calloc(1, sizeof *w);
  if (w == NULL || (w->arena = protocall_arena_new()) == NULL) {
    free(w);
    req->status->message = "out of memory";
    req->status->message_len = strlen(req->status->message);
    return 8; /* RESOURCE_EXHAUSTED */
  }
  *call = w;
  return PROTOCALL_OK;
}

static int walk_send(lua_State *L, void *ud, void *call, const char *bytes, size_t len,
                     protocall_Status *st) {
  (void)L;
  Router *r = ud;
  Walk *w = call;
  static char err[256];
  w->route = protocall_decode(r->route, bytes, len, w->arena, err, sizeof err);
  if (w->route != NULL) return PROTOCALL_OK;
  st->message = err;
  st->message_len = strlen(err);
  return 3; /* INVALID_ARGUMENT */
}

static int walk_close_send(lua_State *L, void *ud, void *call, protocall_Status *st) {
  (void)L;
  (void)ud;
  (void)call;
  (void)st;
  return PROTOCALL_OK;
}

static int walk_recv(lua_State *L, void *ud, void *call, const char **bytes, size_t *len,
                     protocall_Status *st) {
  (void)L;
  Router *r = ud;
  Walk *w = call;
  size_t n = 0;
  protocall_get_size(w->route, r->route, "points", &n);
  if (w->next == n) {
    *bytes = NULL; /* the end, OK */
    return PROTOCALL_OK;
  }
  const pc_Message *p;
  protocall_get_message_at(w->route, r->route, "points", w->next++, &p, NULL);
  static char err[256];
  *bytes = protocall_encode(p, r->point, 0, w->arena, len, err, sizeof err);
  if (*bytes != NULL) return PROTOCALL_OK;
  st->message = err;
  st->message_len = strlen(err);
  return 13; /* INTERNAL */
}

static void walk_finish(void *ud, void *call, int cancel) {
  (void)cancel; /* a real host would cancel its network call here */
  Walk *w = call;
  ((Router *)ud)->walks_finished++;
  protocall_arena_free(w->arena);
  free(w);
}

int main(void) {
  char err[512];
  const char *paths[] = {"examples", NULL};
  pc_Pool *pool = protocall_pool_new();
  if (pool == NULL || !protocall_pool_load(pool, "route.proto", NULL, 0, paths, err, sizeof err)) {
    fprintf(stderr, "host: %s\n", pool ? err : "out of memory");
    protocall_pool_free(pool);
    return EXIT_FAILURE;
  }
  protocall_pool_freeze(pool);
  Router router = {protocall_pool_type(pool, "demo.Route"),
                   protocall_pool_type(pool, "demo.Point"),
                   protocall_pool_type(pool, "demo.Distance"),
                   0,
                   NULL,
                   0};

  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  luaL_requiref(L, "protocall", luaopen_protocall, 0);
  lua_pop(L, 1);
  protocall_pushpool(L, pool);
  lua_setglobal(L, "pool");
  protocall_Transport transport = {sizeof transport, &router,    NULL,
                                   router_unary,     walk_start, walk_send,
                                   walk_close_send,  walk_recv,  walk_finish};
  protocall_pushhosttransport(L, &transport);
  lua_setglobal(L, "transport");

  int status = luaL_loadbuffer(L, kScript, sizeof kScript - 1, "=script");
  if (status == LUA_OK) status = lua_pcall(L, 0, 1, 0);
  int ok = status == LUA_OK;
  if (!ok) {
    fprintf(stderr, "host: %s\n", lua_tostring(L, -1));
  } else {
    const pc_MessageDef *type;
    const pc_Message *d = protocall_tomessage(L, -1, &type);
    double length = 0;
    ok = d != NULL && protocall_get_number(d, type, "length", &length) == PROTOCALL_OK &&
         length == 7.0 && router.calls == 2 && router.walks_finished == 1;
    printf("host: the script got %s, length %.1f, after %d calls\n", protocall_type_name(type),
           length, router.calls);
  }
  lua_close(L);
  protocall_arena_free(router.scratch);
  protocall_pool_free(pool); /* after the state that used it */
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
