/* A C host that runs protocall from its own poll(2) loop (protocall.h
 * "Host loops"): one lua_State serves a listener (pc.listen, its handler
 * sleeping between the messages of a stream), another calls it with
 * pc.client from a task (unary, then a server stream); the host polls the
 * union of both states' descriptors with the timeout they ask for and
 * steps each state with protocall_step(L, 0), never blocking inside them.
 * Checks the answers, that each step returns at once, that the loop
 * waited in poll(2) rather than spinning, the argument errors, and that a
 * task's error comes out of protocall_step. */
#define _POSIX_C_SOURCE 200809L

#include "testing/check.h"
#include "protocall.h"

#include <lauxlib.h>
#include <lualib.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static const char kServer[] =
    "local pc = require 'protocall'\n"
    "assert(pc.load([[syntax = 'proto3'; package loop;\n"
    "  message N { int32 n = 1; }\n"
    "  service S { rpc Add(N) returns (N); rpc Count(N) returns (stream N); }]]))\n"
    "listener = pc.listen(pc.server { ['loop.S'] = {\n"
    "  Add = function(r) return { n = r.n + 1 } end,\n"
    "  Count = function(r, ctx)\n"
    "    for i = 1, r.n do ctx.sleep(0.02); ctx.send { n = i } end\n"
    "  end,\n"
    "} }, '127.0.0.1:0')\n"
    "pc.spawn(function() listener:serve() end)\n"
    "return listener.port\n";

static const char kClient[] =
    "local pc, port = require 'protocall', ...\n"
    "assert(pc.load([[syntax = 'proto3'; package loop;\n"
    "  message N { int32 n = 1; }\n"
    "  service S { rpc Add(N) returns (N); rpc Count(N) returns (stream N); }]]))\n"
    "pc.spawn(function()\n"
    "  local t = pc.grpc('http://127.0.0.1:' .. port)\n"
    "  local stub = pc.client('loop.S', { transport = t, timeout = 10 })\n"
    "  local got = { stub:Add({ n = 41 }).n }\n"
    "  for m in stub:Count { n = 5 } do got[#got + 1] = m.n end\n"
    "  result = table.concat(got, ',')\n"
    "  t:close()\n"
    "end)\n";

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static lua_State *state(void) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  luaL_requiref(L, "protocall", luaopen_protocall, 0);
  lua_pop(L, 1);
  return L;
}

static int run(lua_State *L, const char *chunk, const char *name, int nargs, int nres) {
  if (luaL_loadbuffer(L, chunk, strlen(chunk), name) != LUA_OK) {
    fprintf(stderr, "%s\n", lua_tostring(L, -1));
    return 0;
  }
  if (nargs) lua_insert(L, -1 - nargs);
  if (lua_pcall(L, nargs, nres, 0) != LUA_OK) {
    fprintf(stderr, "%s: %s\n", name, lua_tostring(L, -1));
    return 0;
  }
  return 1;
}

static int step(lua_State *L) {
  return protocall_step(L, 0);
}

/* protocall_step under lua_pcall: the tasks left, or -1 with the error. */
static int pstep(lua_State *L, char *err, size_t errsize) {
  lua_pushcfunction(L, step);
  if (lua_pcall(L, 0, 0, 0) != LUA_OK) {
    snprintf(err, errsize, "%s", lua_tostring(L, -1));
    lua_pop(L, 1);
    return -1;
  }
  return 0;
}

#define MAX_FDS 64

int main(void) {
  lua_State *S = state(), *C = state();
  CHECK(run(S, kServer, "=server", 0, 1));
  lua_Integer port = lua_tointeger(S, -1);
  lua_pop(S, 1);
  CHECK(port > 0);
  lua_pushinteger(C, port);
  CHECK(run(C, kClient, "=client", 1, 0));

  /* The host's loop: both states on one poll(2). */
  struct pollfd fds[MAX_FDS];
  int rounds = 0, waited = 0, shutdown = 0, left_s = 1, left_c = 1;
  double start = now_s(), slowest = 0;
  while ((left_s > 0 || left_c > 0) && now_s() - start < 20) {
    double ts, tc;
    int ns = protocall_pollfds(S, fds, MAX_FDS / 2, &ts);
    int nc = protocall_pollfds(C, fds + MAX_FDS / 2, MAX_FDS / 2, &tc);
    if (ns < 0 || ns > MAX_FDS / 2 || nc < 0 || nc > MAX_FDS / 2) {
      CHECK(!"descriptors within 0..MAX_FDS / 2");
      break;
    }
    memmove(fds + ns, fds + MAX_FDS / 2, (size_t)nc * sizeof *fds);
    double t = ts < 0 ? tc : (tc < 0 || ts < tc ? ts : tc);
    int ms = t < 0 ? 1000 : (int)(t * 1000 + 0.999);
    int ready = poll(fds, (nfds_t)(ns + nc), ms);
    CHECK(ready >= 0);
    if (ready == 0 && ms > 0) waited++;
    double t0 = now_s();
    left_s = protocall_step(S, 0);
    left_c = protocall_step(C, 0);
    double took = now_s() - t0;
    if (took > slowest) slowest = took;
    rounds++;
    if (left_c == 0 && !shutdown) {
      shutdown = 1;
      CHECK(run(S, "pc = require 'protocall'; pc.spawn(function() listener:shutdown(1) end)",
                "=shutdown", 0, 0));
      left_s = 1;
    }
  }
  printf("loop: %d rounds, %d timed waits, slowest step %.1f ms, %.2f s\n", rounds, waited,
         slowest * 1000, now_s() - start);
  CHECK(left_s == 0 && left_c == 0);
  CHECK(shutdown);
  lua_getglobal(C, "result");
  CHECK(lua_isstring(C, -1) && strcmp(lua_tostring(C, -1), "42,1,2,3,4,5") == 0);
  lua_pop(C, 1);
  CHECK(waited > 0);    /* the handler's sleeps were waited for in poll(2) */
  CHECK(rounds < 1000); /* not a busy loop: about one round per event */
  CHECK(slowest < 1.0); /* a step never blocks (a loaded machine still takes < 1 s) */
  lua_getglobal(S, "listener");
  lua_getfield(S, -1, "connections");
  lua_insert(S, -2);
  lua_call(S, 1, 1);
  CHECK(lua_tointeger(S, -1) == 0);
  lua_pop(S, 1);

  /* Nothing to run: 0 tasks, no descriptors, no timeout. */
  double t;
  CHECK(protocall_step(S, 0) == 0);
  CHECK(protocall_pollfds(S, fds, MAX_FDS, &t) == 0 && t == -1);

  /* A sleeping task: no descriptor, the sleep's end as the timeout. */
  CHECK(run(S, "require('protocall').spawn(function() require('protocall').sleep(0.2) end)",
            "=sleeper", 0, 0));
  CHECK(protocall_step(S, 0) == 1);
  CHECK(protocall_pollfds(S, fds, MAX_FDS, &t) == 0 && t > 0.05 && t <= 0.2);
  while (protocall_step(S, 0.05) > 0) {
  }

  /* A task's error comes out of the step; the step refuses inside a task. */
  char err[256];
  CHECK(run(S, "require('protocall').spawn(function() error('task failed') end)", "=bad", 0, 0));
  CHECK(pstep(S, err, sizeof err) == -1 && strstr(err, "task failed") != NULL);
  CHECK(run(S,
            "local pc = require 'protocall'\n"
            "pc.spawn(function() inner = select(2, pcall(pc.step, 0)) end)\n"
            "pc.run()\n"
            "assert(inner:find('called inside pc.run or a task', 1, true), inner)\n"
            "assert(not pcall(pc.step, -1))\n",
            "=nested", 0, 0));
  lua_close(S);
  lua_close(C);
  lua_State *bare = luaL_newstate();
  lua_pushcfunction(bare, step);
  CHECK(lua_pcall(bare, 0, 0, 0) != LUA_OK &&
        strstr(lua_tostring(bare, -1), "open the module") != NULL);
  lua_close(bare);
  return CHECK_DONE();
}
