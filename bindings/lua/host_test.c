/* The C host API (bindings/lua/protocall.h), linked as a host links it
 * (libprotocall.a, liblua):
 *   - pools from C: .proto text with imports, descriptor sets, errors,
 *     freeze;
 *   - messages from C: setters and getters by name with their errors,
 *     repeated elements and maps of every kind, encode, decode, clone;
 *   - a host's pool as the state's default pool (pc.type sees it);
 *   - ONE frozen pool shared by two lua_States used from two
 *     threads at once, each building, encoding and decoding messages,
 *     reading the file descriptor, and moving messages between C and Lua;
 *     the pool outlives both states and is freed by the host (ASan in the
 *     sanitizer build sees any use after free or leak);
 *   - a host transport under pc.client with a retry policy (status codes,
 *     metadata, timeout, release at lua_close);
 *   - host transport statuses with details, trailers and pushback (a
 *     retry after the server's delay, no retry when it says so);
 *   - a host transport with stream functions (protocall_Transport): server
 *     streaming, client streaming, bidi and unary through them, headers and
 *     trailers, a host failing mid-stream and in send, cancellation (call:
 *     cancel, a loop left early, a dropped call) reaching the host's
 *     finish, and the ABI rules for the struct's size;
 *   - host time: pc.now, pc.sleep and the retry backoff use the host's clock
 *     and sleep, per state; a host sleep may yield the running coroutine;
 *   - message memory read from finalizers: a view read and written in the
 *     __gc of an object finalized after the view's arena (also when an
 *     emergency collection ran between the two), arenas freed a
 *     cycle later, and every byte of the state's allocator given back at
 *     lua_close (a counting lua_Alloc), a finalizer run there reading too,
 *     and messages made in finalizers (lua_close's included) given back;
 *     the same for a view of a pool dropped in the cycle that finalizes
 *     its reader (the pool's free waits too), and dropped pools given back;
 *     a host's pool still usable through a box a finalizer reaches after its __gc. */
#include "testing/check.h"
#include "protocall.h"

#include <lauxlib.h>
#include <lualib.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char kProto[] = "syntax = \"proto3\";\n"
                             "package demo;\n"
                             "import \"google/protobuf/timestamp.proto\";\n"
                             "message Point { int32 x = 1; int32 y = 2; }\n"
                             "message Route {\n"
                             "  string name = 1;\n"
                             "  repeated Point points = 2;\n"
                             "  uint32 legs = 3;\n"
                             "  double length = 4;\n"
                             "  repeated int64 ids = 5;\n"
                             "  bool closed = 6;\n"
                             "  Color color = 7;\n"
                             "  google.protobuf.Timestamp at = 8;\n"
                             "  map<string, string> labels = 9;\n"
                             "  map<int32, Point> by_id = 10;\n"
                             "  repeated string tags = 11;\n"
                             "  repeated double weights = 12;\n"
                             "}\n"
                             "enum Color { NONE = 0; RED = 1; }\n"
                             "service Router {\n"
                             "  rpc Measure(Route) returns (Route);\n"
                             "  rpc Walk(Route) returns (stream Point);\n"
                             "  rpc Collect(stream Point) returns (Route);\n"
                             "  rpc Chat(stream Point) returns (stream Point);\n"
                             "}\n";

/* A state with the standard libraries and protocall opened as the global
 * `pc`, and 'pool' (when given) as the global `pool`. */
static lua_State *new_state(pc_Pool *pool) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  luaL_requiref(L, "protocall", luaopen_protocall, 0);
  lua_setglobal(L, "pc");
  if (pool != NULL) {
    protocall_pushpool(L, pool);
    lua_setglobal(L, "pool");
  }
  return L;
}

/* Runs 'code' in L; 1 when it ran without error (the error printed). */
static int run(lua_State *L, const char *code) {
  if (luaL_dostring(L, code) != LUA_OK) {
    fprintf(stderr, "lua: %s\n", luaL_tolstring(L, -1, NULL));
    lua_pop(L, 2);
    return 0;
  }
  return 1;
}

static pc_Pool *demo_pool(void) {
  pc_Pool *pool = protocall_pool_new();
  char err[256];
  CHECK(protocall_pool_load(pool, "demo/route.proto", kProto, sizeof kProto - 1, NULL, err,
                            sizeof err));
  return pool;
}

static void pools(void) {
  char err[256];
  pc_Pool *pool = demo_pool();
  CHECK(protocall_pool_type(pool, "demo.Route") != NULL);
  CHECK(protocall_pool_type(pool, "google.protobuf.Timestamp") != NULL); /* built-in import */
  CHECK(protocall_pool_type(pool, "demo.Nope") == NULL);
  CHECK(strcmp(protocall_type_name(protocall_pool_type(pool, "demo.Point")), "demo.Point") == 0);
  /* Loading the same file again is harmless. */
  CHECK(protocall_pool_load(pool, "demo/route.proto", kProto, sizeof kProto - 1, NULL, err,
                            sizeof err));
  /* Errors name the place. */
  const char bad[] = "syntax = \"proto3\";\nmessage X { int32 a = 1 }\n";
  CHECK(!protocall_pool_load(pool, "bad.proto", bad, sizeof bad - 1, NULL, err, sizeof err));
  CHECK(strcmp(err, "bad.proto:2:26: Expected \";\".") == 0 || strstr(err, "bad.proto:2:") == err);
  /* Import paths: a missing import is reported. */
  const char *paths[] = {PC_SOURCE_DIR "/examples", NULL};
  const char imp[] = "syntax = \"proto3\"; import \"route.proto\"; import \"none.proto\";";
  CHECK(!protocall_pool_load(pool, "imp.proto", imp, sizeof imp - 1, paths, err, sizeof err));
  CHECK(strstr(err, "none.proto") != NULL);
  /* A file read from the import paths (source NULL), into another pool
   * (it declares demo.Point too). */
  pc_Pool *other = protocall_pool_new();
  CHECK(protocall_pool_load(other, "route.proto", NULL, 0, paths, err, sizeof err));
  CHECK(protocall_pool_type(other, "demo.Distance") != NULL);
  /* The same names in one pool are refused. */
  CHECK(!protocall_pool_load(pool, "route.proto", NULL, 0, paths, err, sizeof err));
  CHECK(strstr(err, "demo.Point") != NULL);
  protocall_pool_free(other);
  /* A descriptor set: malformed input fails with a message. */
  CHECK(protocall_pool_load_descriptor_set(pool, "\x0a\x05x", 3, err, sizeof err) == -1);
  CHECK(strncmp(err, "descriptor set:", 15) == 0);
  /* Frozen: loads are refused. */
  protocall_pool_freeze(pool);
  CHECK(!protocall_pool_load(pool, "z.proto", "syntax = \"proto3\";", 18, NULL, err, sizeof err));
  CHECK(strcmp(err, "z.proto: pool is frozen") == 0);
  protocall_pool_free(pool);
}

static void messages(void) {
  pc_Pool *pool = demo_pool();
  const pc_MessageDef *R = protocall_pool_type(pool, "demo.Route");
  pc_Arena *a = protocall_arena_new();
  pc_Message *m = protocall_message_new(R, a);
  CHECK(protocall_set_string(m, R, "name", "loop\0x", 6, a) == PROTOCALL_OK);
  CHECK(protocall_set_integer(m, R, "legs", 4294967295, a) == PROTOCALL_OK);
  CHECK(protocall_set_integer(m, R, "legs", -1, a) == PROTOCALL_OUT_OF_RANGE);
  CHECK(protocall_set_integer(m, R, "closed", 2, a) == PROTOCALL_OUT_OF_RANGE);
  CHECK(protocall_set_integer(m, R, "closed", 1, a) == PROTOCALL_OK);
  CHECK(protocall_set_integer(m, R, "color", 1, a) == PROTOCALL_OK);
  CHECK(protocall_set_number(m, R, "length", 2.5, a) == PROTOCALL_OK);
  CHECK(protocall_set_number(m, R, "name", 2.5, a) == PROTOCALL_WRONG_TYPE);
  CHECK(protocall_set_integer(m, R, "nope", 1, a) == PROTOCALL_NO_FIELD);
  CHECK(protocall_set_string(m, R, "labels", "x", 1, a) == PROTOCALL_WRONG_TYPE); /* a map */
  CHECK(protocall_set_integer(m, R, "ids", -7, a) == PROTOCALL_OK); /* repeated: appends */
  CHECK(protocall_set_integer(m, R, "ids", 8, a) == PROTOCALL_OK);
  const pc_MessageDef *P = NULL;
  for (int i = 0; i < 3; i++) {
    pc_Message *p = protocall_mutable_message(m, R, "points", a, &P);
    CHECK(p != NULL);
    CHECK(protocall_set_integer(p, P, "x", i, a) == PROTOCALL_OK);
  }
  const pc_MessageDef *TS = NULL;
  pc_Message *at = protocall_mutable_message(m, R, "at", a, &TS);
  CHECK(protocall_set_integer(at, TS, "seconds", 1700000000, a) == PROTOCALL_OK);
  CHECK(protocall_mutable_message(m, R, "at", a, NULL) == at); /* the same one */
  CHECK(protocall_mutable_message(m, R, "legs", a, NULL) == NULL);

  size_t len;
  char err[256];
  const char *bytes = protocall_encode(m, R, 1, a, &len, err, sizeof err);
  CHECK(bytes != NULL && len > 0);
  pc_Message *d = protocall_decode(R, bytes, len, a, err, sizeof err);
  CHECK(d != NULL);
  const char *s;
  size_t slen;
  int64_t i64;
  double num;
  CHECK(protocall_get_string(d, R, "name", &s, &slen) == PROTOCALL_OK);
  CHECK(slen == 6 && memcmp(s, "loop\0x", 6) == 0);
  CHECK(protocall_get_integer(d, R, "legs", &i64) == PROTOCALL_OK && i64 == 4294967295);
  CHECK(protocall_get_integer(d, R, "closed", &i64) == PROTOCALL_OK && i64 == 1);
  CHECK(protocall_get_integer(d, R, "color", &i64) == PROTOCALL_OK && i64 == 1);
  CHECK(protocall_get_number(d, R, "length", &num) == PROTOCALL_OK && num == 2.5);
  CHECK(protocall_get_integer(d, R, "ids", &i64) == PROTOCALL_WRONG_TYPE); /* repeated */
  const pc_Message *sub;
  const pc_MessageDef *subT;
  CHECK(protocall_get_message(d, R, "at", &sub, &subT) == PROTOCALL_OK && subT == TS);
  CHECK(protocall_get_integer(sub, TS, "seconds", &i64) == PROTOCALL_OK && i64 == 1700000000);
  pc_Message *empty = protocall_message_new(R, a);
  CHECK(protocall_get_message(empty, R, "at", &sub, NULL) == PROTOCALL_NOT_SET);
  CHECK(protocall_get_integer(empty, R, "legs", &i64) == PROTOCALL_OK && i64 == 0);
  /* Malformed input names the offset. */
  CHECK(protocall_decode(R, "\x0a\x05x", 3, a, err, sizeof err) == NULL);
  CHECK(strstr(err, "offset") != NULL);
  pc_Message *c = protocall_clone(d, R, a);
  CHECK(c != NULL);
  size_t clen;
  const char *cbytes = protocall_encode(c, R, 1, a, &clen, err, sizeof err);
  CHECK(clen == len && memcmp(cbytes, bytes, len) == 0);

  /* Into Lua and back: the Lua message is a copy that compares equal. */
  lua_State *L = new_state(pool);
  protocall_pushmessage(L, R, m);
  lua_setglobal(L, "m");
  CHECK(run(L, "assert(pc.type_of(m) == pool:type('demo.Route'))\n"
               "assert(m.name == 'loop\\0x' and m.legs == 4294967295 and #m.points == 3)\n"
               "assert(m.points[3].x == 2 and m.at.seconds == 1700000000)\n"
               "m2 = pool:type('demo.Route'){name = 'back', points = {{y = 9}}}"));
  lua_pushlstring(L, bytes, len);
  CHECK(luaL_dostring(L, "return pc.encode(m, {deterministic = true})") == LUA_OK);
  CHECK(lua_rawlen(L, -1) == len && memcmp(lua_tostring(L, -1), bytes, len) == 0);
  lua_settop(L, 0);
  lua_getglobal(L, "m2");
  const pc_MessageDef *T2 = NULL;
  const pc_Message *m2 = protocall_tomessage(L, -1, &T2);
  CHECK(m2 != NULL && T2 == R);
  if (m2 == NULL) return;
  pc_Message *kept = protocall_clone(m2, R, a); /* the host's copy outlives the state */
  lua_pushinteger(L, 1);
  CHECK(protocall_tomessage(L, -1, NULL) == NULL);
  lua_close(L);
  CHECK(protocall_get_string(kept, R, "name", &s, &slen) == PROTOCALL_OK);
  CHECK(slen == 4 && memcmp(s, "back", 4) == 0);
  protocall_arena_free(a);
  protocall_pool_free(pool);
}

/* protocall_pushmessage of a type from a pool the state never saw raises. */
typedef struct {
  const pc_MessageDef *type;
  pc_Message *msg;
} PushArgs;

static int push_unknown(lua_State *L) {
  PushArgs *p = lua_touserdata(L, 1);
  protocall_pushmessage(L, p->type, p->msg);
  return 1;
}

static void unknown_pool(void) {
  pc_Pool *pool = demo_pool();
  const pc_MessageDef *P = protocall_pool_type(pool, "demo.Point");
  pc_Arena *a = protocall_arena_new();
  PushArgs args = {P, protocall_message_new(P, a)};
  lua_State *L = new_state(NULL);
  lua_pushcfunction(L, push_unknown);
  lua_pushlightuserdata(L, &args);
  CHECK(lua_pcall(L, 1, 1, 0) != LUA_OK);
  CHECK(strcmp(lua_tostring(L, -1), "protocall: demo.Point: its pool is not known to this state") ==
        0);
  lua_close(L);
  protocall_arena_free(a);
  protocall_pool_free(pool);
}

/* -- One frozen pool, two states, two threads ------------------------------- */

typedef struct {
  pc_Pool *pool;
  int id;
  int ok;
  long checksum;
} Worker;

static const char kWork[] =
    "local id, n = ...\n"
    "local Route, Point = pool:type('demo.Route'), pool:type('demo.Point')\n"
    "local sum = 0\n"
    "for i = 1, n do\n"
    "  local r = Route{name = 'r' .. id .. '-' .. i, legs = i, ids = {i, -i},\n"
    "                  points = {{x = i, y = id}, Point{x = -i}}, labels = {k = tostring(i)},\n"
    "                  color = 'RED', at = {seconds = i}}\n"
    "  local bytes = pc.encode(r, {deterministic = true})\n"
    "  local back = assert(pc.decode(Route, bytes))\n"
    "  assert(back == r and back.points[1].y == id and back.labels.k == tostring(i))\n"
    "  sum = sum + back.legs + #bytes\n"
    "end\n"
    "local fd = assert(pool:file_descriptor('demo/route.proto'))\n"
    "assert(fd.message_type[2].name == 'Route' and fd.dependency[1] == "
    "'google/protobuf/timestamp.proto')\n"
    "assert(pool:is_frozen())\n"
    "local ok, err = pool:load('syntax = \"proto3\";', {name = 'x.proto'})\n"
    "assert(ok == nil and err == 'x.proto: pool is frozen')\n"
    "return sum\n";

static void *work(void *arg) {
  Worker *w = arg;
  lua_State *L = new_state(w->pool);
  const pc_MessageDef *P = protocall_pool_type(w->pool, "demo.Point");
  pc_Arena *a = protocall_arena_new();
  w->ok = 1;
  for (int round = 0; round < 5 && w->ok; round++) {
    if (luaL_loadstring(L, kWork) != LUA_OK) {
      w->ok = 0;
      break;
    }
    lua_pushinteger(L, w->id);
    lua_pushinteger(L, 300);
    if (lua_pcall(L, 2, 1, 0) != LUA_OK) {
      fprintf(stderr, "worker %d: %s\n", w->id, lua_tostring(L, -1));
      w->ok = 0;
      break;
    }
    w->checksum += (long)lua_tointeger(L, -1);
    lua_pop(L, 1);
    /* C -> Lua -> C in this state while the other thread does the same. */
    pc_Message *p = protocall_message_new(P, a);
    protocall_set_integer(p, P, "x", w->id * 100 + round, a);
    protocall_pushmessage(L, P, p);
    lua_setglobal(L, "p");
    if (luaL_dostring(L, "p.y = p.x + 1; return p") != LUA_OK) {
      w->ok = 0;
      break;
    }
    const pc_MessageDef *T = NULL;
    const pc_Message *back = protocall_tomessage(L, -1, &T);
    int64_t y = 0;
    if (back == NULL || T != P || protocall_get_integer(back, P, "y", &y) != PROTOCALL_OK ||
        y != w->id * 100 + round + 1)
      w->ok = 0;
    lua_pop(L, 1);
  }
  lua_close(L);
  protocall_arena_free(a);
  return NULL;
}

static void shared_pool(void) {
  pc_Pool *pool = demo_pool();
  protocall_pool_freeze(pool);
  Worker w[2] = {{pool, 1, 0, 0}, {pool, 2, 0, 0}};
  pthread_t t[2];
  int started[2];
  for (int i = 0; i < 2; i++) started[i] = pthread_create(&t[i], NULL, work, &w[i]) == 0;
  for (int i = 0; i < 2; i++) {
    CHECK(started[i]);
    if (started[i]) pthread_join(t[i], NULL);
    CHECK(w[i].ok);
  }
  CHECK(w[0].checksum > 0 && w[1].checksum > 0);
  /* The same pool, pushed twice into one state, is one Lua value; its Types
   * are per state. */
  lua_State *A = new_state(pool), *B = new_state(pool);
  protocall_pushpool(A, pool);
  lua_getglobal(A, "pool");
  CHECK(lua_rawequal(A, -1, -2));
  CHECK(run(A, "assert(pool:type('demo.Point') == pool:type('demo.Point'))"));
  CHECK(run(B, "assert(pool:type('demo.Point'){x = 1}.x == 1)"));
  lua_close(A);
  lua_close(B);
  protocall_pool_free(pool); /* after every state that saw it */
}

/* -- Host transport ----------------------------------------------------------- */

typedef struct {
  const pc_MessageDef *route;
  int calls;
  int fail_first; /* UNAVAILABLE for this many calls */
  int released;
  double last_timeout;
  char last_meta[64];
} Backend;

/* Route -> Route: the name echoed, legs doubled; fails 'fail_first' times. */
static int measure(lua_State *L, void *ud, const protocall_Request *req) {
  Backend *b = ud;
  b->calls++;
  b->last_timeout = req->timeout;
  b->last_meta[0] = '\0';
  for (size_t i = 0; i < req->metadata_count; i++)
    if (req->metadata[i].key_len == 7 && memcmp(req->metadata[i].key, "x-trace", 7) == 0)
      snprintf(b->last_meta, sizeof b->last_meta, "%.*s", (int)req->metadata[i].value_len,
               req->metadata[i].value);
  if (strcmp(req->path, "/demo.Router/Measure") != 0) {
    lua_pushfstring(L, "no method %s", req->path);
    return 12; /* UNIMPLEMENTED */
  }
  if (b->calls <= b->fail_first) {
    lua_pushliteral(L, "backend warming up");
    return 14; /* UNAVAILABLE */
  }
  pc_Arena *a = protocall_arena_new();
  char err[256];
  pc_Message *in = protocall_decode(b->route, req->request, req->request_len, a, err, sizeof err);
  if (in == NULL) {
    protocall_arena_free(a);
    lua_pushstring(L, err);
    return 3; /* INVALID_ARGUMENT */
  }
  const char *name;
  size_t nlen;
  protocall_get_string(in, b->route, "name", &name, &nlen);
  pc_Message *out = protocall_message_new(b->route, a);
  protocall_set_string(out, b->route, "name", name, nlen, a);
  int64_t legs = 0;
  protocall_get_integer(in, b->route, "legs", &legs);
  protocall_set_integer(out, b->route, "legs", legs * 2, a);
  size_t len;
  const char *bytes = protocall_encode(out, b->route, 0, a, &len, err, sizeof err);
  lua_pushlstring(L, bytes, len); /* may raise: nothing of ours is unowned but 'a' */
  protocall_arena_free(a);
  return PROTOCALL_OK;
}

static void release(void *ud) {
  ((Backend *)ud)->released++;
}

/* -- Host time ---------------------------------------------------------------- */

typedef struct {
  double now;
  double slept;
  int sleeps;
} FakeTime;

static double fake_clock(void *ud) {
  return ((FakeTime *)ud)->now;
}

static int fake_sleep(lua_State *L, void *ud, double seconds) {
  (void)L;
  FakeTime *t = ud;
  t->now += seconds;
  t->slept += seconds;
  t->sleeps++;
  return 0;
}

static void transport_and_time(void) {
  pc_Pool *pool = demo_pool();
  protocall_pool_freeze(pool);
  Backend b = {protocall_pool_type(pool, "demo.Route"), 0, 2, 0, 0, ""};
  FakeTime ft = {1000.0, 0, 0};
  lua_State *L = new_state(pool);
  lua_State *other = new_state(NULL);
  protocall_settime(L, fake_clock, fake_sleep, &ft);
  protocall_pushtransport(L, measure, release, &b);
  lua_setglobal(L, "t");
  CHECK(run(L, "assert(pc.now() == 1000.0)\n"
               "pc.sleep(2.5)\n"
               "assert(pc.now() == 1002.5)\n"
               "stub = pc.client('demo.Router', {transport = t, pool = pool,\n"
               "  retry = pc.Retry{initial = 1, maximum = 8, timeout = 600}, timeout = 30,\n"
               "  metadata = {{'x-trace', 'abc'}}})\n"
               "local r = stub:Measure{name = 'loop', legs = 21}\n"
               "assert(r.name == 'loop' and r.legs == 42, tostring(r))\n"));
  CHECK(b.calls == 3);   /* two UNAVAILABLE, then the response */
  CHECK(ft.sleeps == 3); /* pc.sleep and two backoff sleeps on the host's clock */
  CHECK(b.last_timeout > 0 && b.last_timeout <= 30);
  CHECK(strcmp(b.last_meta, "abc") == 0);
  /* A status the host returns is a pc.Error; streaming is refused. */
  CHECK(run(L, "local ok, e = pcall(t.unary, t, '/demo.Router/Nope', '', {metadata = {}})\n"
               "assert(not ok and getmetatable(e) == pc.Error, tostring(e))\n"
               "assert(e.code == 'UNIMPLEMENTED' and e.message == 'no method /demo.Router/Nope')\n"
               "local ok2, e2 = pcall(t.server_stream, t, '/demo.Router/Walk', '', {})\n"
               "assert(not ok2 and e2.code == 'UNIMPLEMENTED' and e2['local'] == true)\n"));
  /* Each state has its own time source. */
  FakeTime ft2 = {5.0, 0, 0};
  protocall_settime(other, fake_clock, fake_sleep, &ft2);
  CHECK(run(other, "assert(pc.now() == 5.0); pc.sleep(1); assert(pc.now() == 6.0)"));
  CHECK(ft2.sleeps == 1 && ft.sleeps == 3);
  lua_pushnumber(L, ft.now);
  lua_setglobal(L, "expected");
  CHECK(run(L, "assert(pc.now() == expected)"));
  lua_close(other);
  CHECK(b.released == 0);
  lua_close(L);
  CHECK(b.released == 1);
  protocall_pool_free(pool);
}

/* A unary host that reports statuses with everything a server can send:
 * name "details" fails NOT_FOUND with details bytes and a trailer; name
 * "pushback" fails UNAVAILABLE asking to retry in 3 s (once), name "never"
 * fails UNAVAILABLE asking not to retry; anything else answers with a
 * header and a trailer. */
static int reporting(lua_State *L, void *ud, const protocall_Request *req) {
  Backend *b = ud;
  b->calls++;
  static const protocall_Metadata trailer = {"x-why", "gone", 5, 4};
  static const protocall_Metadata header = {"x-host", "c", 6, 1};
  protocall_Status *st = req->status;
  pc_Arena *a = protocall_arena_new();
  char err[256];
  pc_Message *in = protocall_decode(b->route, req->request, req->request_len, a, err, sizeof err);
  const char *name = "";
  size_t nlen = 0;
  if (in != NULL) protocall_get_string(in, b->route, "name", &name, &nlen);
  int code = PROTOCALL_OK;
  st->trailers = &trailer;
  st->trailer_count = 1;
  if (nlen == 7 && memcmp(name, "details", 7) == 0) {
    st->message = "no such route";
    st->message_len = 13;
    st->details = "\x08\x05\x12\x03"
                  "abc";
    st->details_len = 7;
    code = 5; /* NOT_FOUND */
  } else if (nlen == 8 && memcmp(name, "pushback", 8) == 0 && b->calls == 1) {
    st->has_retry_delay = 1;
    st->retry_delay = 3.0;
    code = 14;
  } else if (nlen == 5 && memcmp(name, "never", 5) == 0) {
    st->has_retry_delay = 1;
    st->retry_delay = -1;
    code = 14;
  } else {
    st->headers = &header;
    st->header_count = 1;
  }
  protocall_arena_free(a);
  if (code != PROTOCALL_OK) {
    lua_pushliteral(L, "ignored: status->message wins"); /* st->message may be NULL: then this */
    return code;
  }
  lua_pushliteral(L, ""); /* an empty Route */
  return PROTOCALL_OK;
}

static void statuses(void) {
  pc_Pool *pool = demo_pool();
  protocall_pool_freeze(pool);
  Backend b = {protocall_pool_type(pool, "demo.Route"), 0, 0, 0, 0, ""};
  FakeTime ft = {0.0, 0, 0};
  lua_State *L = new_state(pool);
  protocall_settime(L, fake_clock, fake_sleep, &ft);
  protocall_pushtransport(L, reporting, NULL, &b);
  lua_setglobal(L, "t");
  CHECK(run(
      L, "local R = pool:type('demo.Route')\n"
         "local ok, e = pcall(t.unary, t, '/demo.Router/Measure', pc.encode(R{name = 'details'}), "
         "{})\n"
         "assert(not ok and getmetatable(e) == pc.Error, tostring(e))\n"
         "assert(e.code == 'NOT_FOUND' and e.message == 'no such route', tostring(e))\n"
         "assert(e.details == '\\8\\5\\18\\3abc', e.details)\n"
         "assert(e.metadata[1][1] == 'x-why' and e.metadata[1][2] == 'gone')\n"
         "assert(e.method == '/demo.Router/Measure' and e.retry_delay == nil)\n"
         "local bytes, md = t:unary('/demo.Router/Measure', '', {with_metadata = true})\n"
         "assert(bytes == '' and md.headers[1][1] == 'x-host' and md.trailers[1][2] == 'gone')\n"));
  b.calls = 0;
  CHECK(run(
      L,
      "local stub = pc.client('demo.Router', {transport = t, pool = pool,\n"
      "  retry = pc.Retry{initial = 1, maximum = 1, timeout = 600}})\n"
      "local t0 = pc.now()\n"
      "stub:Measure{name = 'pushback'}\n"
      "assert(pc.now() - t0 == 3, pc.now() - t0) -- the pushback, not the 1 s backoff\n"
      "local ok, e = pcall(stub.Measure, stub, {name = 'never'})\n"
      "assert(not ok and getmetatable(e) == pc.RetryError and e.attempts == 1, tostring(e))\n"
      "assert(e.cause.no_retry and e.message:find('the server asked not to retry', 1, true))\n"));
  CHECK(b.calls == 3 && ft.sleeps == 1 && ft.slept == 3.0);
  lua_close(L);
  protocall_pool_free(pool);
}

/* -- Host streams ------------------------------------------------------------ */

typedef struct {
  const pc_MessageDef *route, *point;
  int started, finished, cancelled;
} Streams;

enum { M_MEASURE, M_WALK, M_COLLECT, M_CHAT };

/* One call of the fake streaming backend: responses are queued as
 * encoded bytes in the call's arena. */
typedef struct {
  Streams *s;
  int method;
  pc_Arena *arena;
  const char *out[16];
  size_t out_len[16];
  int nout, next;
  int closed;
  int64_t sum;
  int fail_after; /* Walk: fail once this many responses were read (0: never) */
  char count[24];
  protocall_Metadata trailer;
} HostCall;

static const protocall_Metadata kHeader = {"x-host", "c", 6, 1};

static int hs_start(lua_State *L, void *ud, const protocall_Request *req, void **call) {
  (void)L;
  Streams *s = ud;
  static const char *names[] = {"/demo.Router/Measure", "/demo.Router/Walk", "/demo.Router/Collect",
                                "/demo.Router/Chat"};
  int method = -1;
  for (int i = 0; i < 4; i++)
    if (strcmp(req->path, names[i]) == 0) method = i;
  if (method < 0) {
    req->status->message = "no such method";
    req->status->message_len = 14;
    return 12;
  }
  CHECK(req->request == NULL);
  HostCall *c = calloc(1, sizeof *c);
  if (c == NULL) {
    req->status->message = "out of memory";
    req->status->message_len = 13;
    return 8; /* RESOURCE_EXHAUSTED */
  }
  c->s = s;
  c->method = method;
  c->arena = protocall_arena_new();
  s->started++;
  req->status->headers = &kHeader;
  req->status->header_count = 1;
  *call = c;
  return PROTOCALL_OK;
}

static void queue(HostCall *c, const pc_Message *m, const pc_MessageDef *type) {
  char err[128];
  CHECK(c->nout < 16);
  c->out[c->nout] = protocall_encode(m, type, 0, c->arena, &c->out_len[c->nout], err, sizeof err);
  c->nout++;
}

static int hs_send(lua_State *L, void *ud, void *call, const char *bytes, size_t len,
                   protocall_Status *st) {
  (void)L;
  (void)ud;
  HostCall *c = call;
  char err[128];
  CHECK(!c->closed);
  const pc_MessageDef *in_type = c->method <= M_WALK ? c->s->route : c->s->point;
  pc_Message *in = protocall_decode(in_type, bytes, len, c->arena, err, sizeof err);
  CHECK(in != NULL);
  if (c->method == M_MEASURE) {
    int64_t legs = 0;
    protocall_get_integer(in, c->s->route, "legs", &legs);
    pc_Message *out = protocall_message_new(c->s->route, c->arena);
    protocall_set_integer(out, c->s->route, "legs", legs * 2, c->arena);
    queue(c, out, c->s->route);
  } else if (c->method == M_WALK) {
    const char *name;
    size_t nlen;
    protocall_get_string(in, c->s->route, "name", &name, &nlen);
    if (nlen == 4 && memcmp(name, "fail", 4) == 0) c->fail_after = 1;
    size_t n = 0;
    protocall_get_size(in, c->s->route, "points", &n);
    for (size_t i = 0; i < n; i++) {
      const pc_Message *p;
      protocall_get_message_at(in, c->s->route, "points", i, &p, NULL);
      queue(c, p, c->s->point);
    }
  } else {
    int64_t x = 0;
    protocall_get_integer(in, c->s->point, "x", &x);
    if (x < 0) {
      st->message = "negative x";
      st->message_len = 10;
      return 3; /* INVALID_ARGUMENT: the call ends here */
    }
    c->sum += x;
    if (c->method == M_CHAT) {
      pc_Message *out = protocall_message_new(c->s->point, c->arena);
      protocall_set_integer(out, c->s->point, "x", x * 10, c->arena);
      queue(c, out, c->s->point);
    }
  }
  return PROTOCALL_OK;
}

static int hs_close_send(lua_State *L, void *ud, void *call, protocall_Status *st) {
  (void)L;
  (void)ud;
  (void)st;
  HostCall *c = call;
  CHECK(!c->closed);
  c->closed = 1;
  if (c->method == M_COLLECT) {
    pc_Message *out = protocall_message_new(c->s->route, c->arena);
    protocall_set_string(out, c->s->route, "name", "collected", 9, c->arena);
    protocall_set_integer(out, c->s->route, "legs", c->sum, c->arena);
    queue(c, out, c->s->route);
  }
  return PROTOCALL_OK;
}

static int hs_recv(lua_State *L, void *ud, void *call, const char **bytes, size_t *len,
                   protocall_Status *st) {
  (void)L;
  (void)ud;
  HostCall *c = call;
  if (c->fail_after > 0 && c->next == c->fail_after) {
    static const protocall_Metadata why = {"x-why", "mid-stream", 5, 10};
    st->message = "the walk broke";
    st->message_len = 14;
    st->details = "\x08\x09";
    st->details_len = 2;
    st->trailers = &why;
    st->trailer_count = 1;
    return 9; /* FAILED_PRECONDITION */
  }
  if (c->next < c->nout) {
    *bytes = c->out[c->next];
    *len = c->out_len[c->next];
    c->next++;
    return PROTOCALL_OK;
  }
  if (!c->closed) {
    st->message = "recv would block: the test sends first";
    st->message_len = strlen(st->message);
    return 13;
  }
  snprintf(c->count, sizeof c->count, "%d", c->nout);
  c->trailer.key = "x-count";
  c->trailer.key_len = 7;
  c->trailer.value = c->count;
  c->trailer.value_len = strlen(c->count);
  st->trailers = &c->trailer;
  st->trailer_count = 1;
  *bytes = NULL;
  return PROTOCALL_OK; /* the end, OK */
}

static void hs_finish(void *ud, void *call, int cancel) {
  Streams *s = ud;
  HostCall *c = call;
  s->finished++;
  if (cancel) s->cancelled++;
  protocall_arena_free(c->arena);
  free(c);
}

static int never_called(lua_State *L, void *ud, const protocall_Request *req, void **call) {
  (void)L;
  (void)ud;
  (void)req;
  (void)call;
  abort();
}

/* Pushes a transport from 't' under pcall; the error message or NULL. */
static int push_host_transport(lua_State *L) {
  protocall_pushhosttransport(L, lua_touserdata(L, 1));
  return 1;
}

static const char *try_push(lua_State *L, const protocall_Transport *t) {
  lua_pushcfunction(L, push_host_transport);
  lua_pushlightuserdata(L, (void *)t);
  if (lua_pcall(L, 1, 1, 0) == LUA_OK) {
    lua_setglobal(L, "pushed");
    return NULL;
  }
  return lua_tostring(L, -1);
}

static void streams(void) {
  pc_Pool *pool = demo_pool();
  protocall_pool_freeze(pool);
  Streams s = {protocall_pool_type(pool, "demo.Route"), protocall_pool_type(pool, "demo.Point"), 0,
               0, 0};
  lua_State *L = new_state(pool);
  protocall_Transport t;
  memset(&t, 0, sizeof t);
  t.size = sizeof t;
  t.ud = &s;
  t.start = hs_start;
  t.send = hs_send;
  t.close_send = hs_close_send;
  t.recv = hs_recv;
  t.finish = hs_finish;
  protocall_pushhosttransport(L, &t); /* no unary: Measure goes through the streams too */
  lua_setglobal(L, "t");
  CHECK(run(L, "stub = pc.client('demo.Router', {transport = t, pool = pool})\n"
               "-- unary\n"
               "assert(stub:Measure{legs = 21}.legs == 42)\n"
               "-- server streaming\n"
               "local xs = {}\n"
               "for p in stub:Walk{points = {{x = 1}, {x = 2}, {x = 3}}} do xs[#xs + 1] = p.x end\n"
               "assert(table.concat(xs, ',') == '1,2,3', table.concat(xs, ','))\n"
               "-- client streaming, with headers and trailers\n"
               "local c = stub:Collect()\n"
               "c:send{x = 4}; c:send(pool:type('demo.Point'){x = 5})\n"
               "local r = c:close_and_recv()\n"
               "assert(r.name == 'collected' and r.legs == 9, tostring(r))\n"
               "assert(c:headers()[1][1] == 'x-host' and c:headers()[1][2] == 'c')\n"
               "assert(c:trailers()[1][1] == 'x-count' and c:trailers()[1][2] == '1')\n"
               "-- bidi\n"
               "local b = stub:Chat()\n"
               "b:send{x = 1}; assert(b:recv().x == 10)\n"
               "b:send{x = 2}; b:send{x = 3}\n"
               "assert(b:recv().x == 20 and b:recv().x == 30)\n"
               "b:close_send(); assert(b:recv() == nil); assert(b:recv() == nil)\n"
               "assert(b:trailers()[1][2] == '3')\n"));
  CHECK(s.started == 4 && s.finished == 4 && s.cancelled == 0);
  /* A host failing mid-stream: the responses before it, then its status. */
  CHECK(run(
      L,
      "local xs = {}\n"
      "local ok, e = pcall(function()\n"
      "  for p in stub:Walk{name = 'fail', points = {{x = 7}, {x = 8}}} do xs[#xs + 1] = p.x end\n"
      "end)\n"
      "assert(not ok and getmetatable(e) == pc.Error, tostring(e))\n"
      "assert(#xs == 1 and xs[1] == 7)\n"
      "assert(e.code == 'FAILED_PRECONDITION' and e.message == 'the walk broke', tostring(e))\n"
      "assert(e.details == '\\8\\9' and e.metadata[1][2] == 'mid-stream')\n"
      "-- a host failing a send: the call ends with its status\n"
      "local b = stub:Chat()\n"
      "b:send{x = 1}\n"
      "local ok2, e2 = pcall(b.send, b, {x = -1})\n"
      "assert(not ok2 and e2.code == 'INVALID_ARGUMENT' and e2.message == 'negative x', "
      "tostring(e2))\n"
      "local ok3, e3 = pcall(b.recv, b)\n"
      "assert(not ok3 and e3 == e2)\n"
      "-- start failing: no call to finish\n"
      "local ok4, e4 = pcall(t.stream, t, '/demo.Router/Nope', {})\n"
      "assert(not ok4 and e4.code == 'UNIMPLEMENTED' and e4.message == 'no such method')\n"));
  CHECK(s.started == 6 && s.finished == 6 && s.cancelled == 0);
  /* Cancellation reaches the host: call:cancel, a loop left early (closed
   * at once by the generic for), a stub stream dropped unfinished. */
  CHECK(run(L, "local b = stub:Chat()\n"
               "b:send{x = 1}\n"
               "b:cancel()\n"
               "local ok, e = pcall(b.send, b, {x = 2})\n"
               "assert(not ok and e.code == 'CANCELLED', tostring(e))\n"
               "local ok2, e2 = pcall(b.recv, b)\n"
               "assert(not ok2 and e2.code == 'CANCELLED')\n"
               "b:close()\n"
               "local R = pool:type('demo.Route')\n"
               "for bytes in t:server_stream('/demo.Router/Walk', pc.encode(R{points = {{x = 1}, "
               "{x = 2}}}), {}) do\n"
               "  break\n"
               "end\n"));
  CHECK(s.started == 8 && s.finished == 8 && s.cancelled == 2);
  CHECK(run(L, "for p in stub:Walk{points = {{x = 1}, {x = 2}}} do break end\n"
               "collectgarbage(); collectgarbage()\n"));
  CHECK(s.started == 9 && s.finished == 9 && s.cancelled == 3);
  /* A server stream's call object cancels it (the stub's second value, the
   * transport's fourth): the host's finish is told, the loop raises
   * CANCELLED. */
  CHECK(run(
      L,
      "local it, call = stub:Walk{points = {{x = 1}, {x = 2}}}\n"
      "assert(it().x == 1)\n"
      "call:cancel()\n"
      "local ok, e = pcall(it)\n"
      "assert(not ok and e.code == 'CANCELLED', tostring(e))\n"
      "assert(it() == nil)\n"
      "local R = pool:type('demo.Route')\n"
      "local iter, _, _, c = t:server_stream('/demo.Router/Walk', pc.encode(R{points = {{x = 1}, "
      "{x = 2}}}), {})\n"
      "assert(iter())\n"
      "c:cancel()\n"
      "local ok2, e2 = pcall(iter)\n"
      "assert(not ok2 and e2.code == 'CANCELLED', tostring(e2))\n"));
  CHECK(s.started == 11 && s.finished == 11 && s.cancelled == 5);
  /* A call still open at lua_close is cancelled then. */
  CHECK(run(L, "open_call = stub:Chat()"));
  lua_close(L);
  CHECK(s.started == 12 && s.finished == 12 && s.cancelled == 6);

  /* ABI: fields past 'size' are not read (a host built against the ABI 1
   * header has no 'start'); a size below ABI 1, no function at all, or
   * 'start' without the rest are refused. */
  L = new_state(pool);
  Backend back = {s.route, 0, 0, 0, 0, ""};
  protocall_Transport old;
  memset(&old, 0, sizeof old);
  old.size = offsetof(protocall_Transport, start);
  old.ud = &back;
  old.unary = measure;
  old.start = never_called; /* beyond the size: ignored */
  CHECK(try_push(L, &old) == NULL);
  CHECK(run(L, "local R = pool:type('demo.Route')\n"
               "assert(pc.decode(R, pushed:unary('/demo.Router/Measure', pc.encode(R{legs = 2}), "
               "{})).legs == 4)\n"
               "local ok, e = pcall(pushed.server_stream, pushed, '/demo.Router/Walk', '', {})\n"
               "assert(not ok and e.code == 'UNIMPLEMENTED' and e['local'], tostring(e))\n"
               "local ok2, e2 = pcall(pushed.stream, pushed, '/demo.Router/Chat', {})\n"
               "assert(not ok2 and e2.code == 'UNIMPLEMENTED', tostring(e2))\n"));
  old.size = offsetof(protocall_Transport, unary);
  const char *err = try_push(L, &old);
  CHECK(err != NULL && strstr(err, "is below the ABI 1 fields") != NULL);
  lua_pop(L, 1);
  protocall_Transport none;
  memset(&none, 0, sizeof none);
  none.size = sizeof none;
  err = try_push(L, &none);
  CHECK(err != NULL && strstr(err, "neither 'unary' nor 'start' is set") != NULL);
  lua_pop(L, 1);
  t.recv = NULL;
  err = try_push(L, &t);
  CHECK(err != NULL && strstr(err, "'start' needs send, close_send, recv and finish") != NULL);
  lua_pop(L, 1);
  lua_close(L);
  protocall_pool_free(pool);
}

/* A host sleep that suspends the running coroutine; the "loop" (the
 * script's resume loop here) advances the clock and resumes it. */
static int yielding_sleep(lua_State *L, void *ud, double seconds) {
  FakeTime *t = ud;
  t->now += seconds;
  t->slept += seconds;
  t->sleeps++;
  return lua_yield(L, 0);
}

static void yielding_time(void) {
  pc_Pool *pool = demo_pool();
  protocall_pool_freeze(pool);
  Backend b = {protocall_pool_type(pool, "demo.Route"), 0, 2, 0, 0, ""};
  FakeTime ft = {0.0, 0, 0};
  lua_State *L = new_state(pool);
  protocall_settime(L, fake_clock, yielding_sleep, &ft);
  protocall_pushtransport(L, measure, NULL, &b);
  lua_setglobal(L, "t");
  CHECK(run(
      L, "local stub = pc.client('demo.Router', {transport = t, pool = pool,\n"
         "  retry = pc.Retry{initial = 1, maximum = 8, timeout = 600}})\n"
         "local co = coroutine.create(function() return stub:Measure{name = 'co', legs = 1} end)\n"
         "local yields, ok, r = 0\n"
         "repeat\n"
         "  ok, r = coroutine.resume(co)\n"
         "  assert(ok, tostring(r))\n"
         "  if coroutine.status(co) == 'suspended' then yields = yields + 1 end\n"
         "until coroutine.status(co) == 'dead'\n"
         "assert(yields == 2 and r.legs == 2, yields)\n"));
  CHECK(b.calls == 3 && ft.sleeps == 2);
  lua_close(L);
  protocall_pool_free(pool);
}

/* Repeated scalars and maps from C, and the host's pool as the default
 * pool of a state. */
static void containers(void) {
  pc_Pool *pool = demo_pool();
  const pc_MessageDef *R = protocall_pool_type(pool, "demo.Route");
  const pc_MessageDef *P = protocall_pool_type(pool, "demo.Point");
  pc_Arena *a = protocall_arena_new();
  pc_Message *m = protocall_message_new(R, a);
  CHECK(protocall_set_integer(m, R, "ids", -7, a) == PROTOCALL_OK);
  CHECK(protocall_set_integer(m, R, "ids", 8, a) == PROTOCALL_OK);
  CHECK(protocall_set_string(m, R, "tags", "a\0b", 3, a) == PROTOCALL_OK);
  CHECK(protocall_set_number(m, R, "weights", 0.5, a) == PROTOCALL_OK);
  protocall_Value v, k;
  CHECK(protocall_get_at(m, R, "ids", 1, &v) == PROTOCALL_OK && v.integer == 8);
  CHECK(protocall_get_at(m, R, "ids", 2, &v) == PROTOCALL_OUT_OF_RANGE);
  CHECK(protocall_get_at(m, R, "tags", 0, &v) == PROTOCALL_OK && v.len == 3 &&
        memcmp(v.data, "a\0b", 3) == 0);
  CHECK(protocall_get_at(m, R, "weights", 0, &v) == PROTOCALL_OK && v.number == 0.5);
  CHECK(protocall_get_at(m, R, "legs", 0, &v) == PROTOCALL_WRONG_TYPE);
  CHECK(protocall_get_at(m, R, "labels", 0, &v) == PROTOCALL_WRONG_TYPE);
  CHECK(protocall_get_at(m, R, "nope", 0, &v) == PROTOCALL_NO_FIELD);
  pc_Message *pt = protocall_mutable_message(m, R, "points", a, NULL);
  CHECK(protocall_set_integer(pt, P, "x", 5, a) == PROTOCALL_OK);
  CHECK(protocall_get_at(m, R, "points", 0, &v) == PROTOCALL_OK && v.message == pt &&
        v.message_type == P);

  /* map<string, string> */
  memset(&k, 0, sizeof k);
  memset(&v, 0, sizeof v);
  k.data = "env";
  k.len = 3;
  v.data = "prod";
  v.len = 4;
  CHECK(protocall_map_set(m, R, "labels", &k, &v, a) == PROTOCALL_OK);
  v.data = "test";
  CHECK(protocall_map_set(m, R, "labels", &k, &v, a) == PROTOCALL_OK); /* replaces */
  k.data = "zone";
  k.len = 4;
  CHECK(protocall_map_set(m, R, "labels", &k, &v, a) == PROTOCALL_OK);
  size_t n;
  CHECK(protocall_get_size(m, R, "labels", &n) == PROTOCALL_OK && n == 2);
  protocall_Value got;
  k.data = "env";
  k.len = 3;
  CHECK(protocall_map_get(m, R, "labels", &k, &got) == PROTOCALL_OK && got.len == 4 &&
        memcmp(got.data, "test", 4) == 0);
  protocall_Value key1;
  CHECK(protocall_map_entry(m, R, "labels", 1, &key1, &got) == PROTOCALL_OK && key1.len == 4 &&
        memcmp(key1.data, "zone", 4) == 0);
  CHECK(protocall_map_entry(m, R, "labels", 2, &key1, NULL) == PROTOCALL_OUT_OF_RANGE);
  CHECK(protocall_map_delete(m, R, "labels", &k) == PROTOCALL_OK);
  CHECK(protocall_map_delete(m, R, "labels", &k) == PROTOCALL_NOT_SET);
  CHECK(protocall_map_get(m, R, "labels", &k, &got) == PROTOCALL_NOT_SET);
  CHECK(protocall_map_set(m, R, "ids", &k, &v, a) == PROTOCALL_WRONG_TYPE); /* not a map */

  /* map<int32, Point>: keys range-checked, message values filled in place or copied */
  memset(&k, 0, sizeof k);
  k.integer = 7;
  const pc_MessageDef *sub_type = NULL;
  pc_Message *p7 = protocall_map_mutable_message(m, R, "by_id", &k, a, &sub_type);
  CHECK(p7 != NULL && sub_type == P);
  CHECK(protocall_set_integer(p7, P, "y", 70, a) == PROTOCALL_OK);
  CHECK(protocall_map_mutable_message(m, R, "by_id", &k, a, NULL) == p7);
  k.integer = 8;
  memset(&v, 0, sizeof v);
  v.message = p7;
  v.message_type = P;
  CHECK(protocall_map_set(m, R, "by_id", &k, &v, a) == PROTOCALL_OK); /* a copy of p7 */
  v.message_type = R;
  CHECK(protocall_map_set(m, R, "by_id", &k, &v, a) == PROTOCALL_WRONG_TYPE);
  k.integer = (int64_t)1 << 40;
  CHECK(protocall_map_set(m, R, "by_id", &k, &v, a) == PROTOCALL_OUT_OF_RANGE);
  k.integer = 8;
  CHECK(protocall_map_get(m, R, "by_id", &k, &got) == PROTOCALL_OK && got.message != p7 &&
        got.message_type == P);
  int64_t y = 0;
  CHECK(protocall_get_integer(got.message, P, "y", &y) == PROTOCALL_OK && y == 70);
  CHECK(protocall_map_mutable_message(m, R, "labels", &k, a, NULL) == NULL); /* string values */

  /* The same content read back from Lua, through the host's pool made the
   * state's default pool: pc.type sees its types. */
  lua_State *L = new_state(NULL);
  protocall_setdefaultpool(L, pool);
  protocall_pushmessage(L, R, m);
  lua_setglobal(L, "m");
  CHECK(run(L, "local R = assert(pc.type('demo.Route'))\n"
               "assert(pc.type_of(m) == R)\n"
               "assert(m.ids[1] == -7 and m.ids[2] == 8 and m.tags[1] == 'a\\0b')\n"
               "assert(m.weights[1] == 0.5 and m.labels.zone == 'test' and m.labels.env == nil)\n"
               "assert(m.by_id[7].y == 70 and m.by_id[8].y == 70 and m.points[1].x == 5)\n"
               "assert(R{name = 'x'}.name == 'x')\n"
               "local ok, err = pcall(pc.set_default_pool, 5)\n"
               "assert(err == \"bad argument #1 to 'set_default_pool' (protocall.Pool expected, "
               "got number)\", err)\n"
               "pc.set_default_pool(pc.pool())\n"
               "assert(pc.type('demo.Route') == nil)"));
  lua_close(L);
  protocall_arena_free(a);
  protocall_pool_free(pool);
}

/* A proto3 string that is not UTF-8, stored from C (protocall_set_string
 * does not check): encoding refuses it, naming the element or map entry
 * and the first bad byte, from C and from Lua; so does pc.to_json. Lua
 * reads such a map key and can remove it. */
static void bad_utf8(void) {
  pc_Pool *pool = demo_pool();
  const pc_MessageDef *R = protocall_pool_type(pool, "demo.Route");
  pc_Arena *a = protocall_arena_new();
  char err[256];
  size_t len;
  pc_Message *m = protocall_message_new(R, a);
  CHECK(protocall_set_string(m, R, "tags", "ok", 2, a) == PROTOCALL_OK);
  CHECK(protocall_set_string(m, R, "tags", "ab\xff", 3, a) == PROTOCALL_OK);
  CHECK(protocall_encode(m, R, 0, a, &len, err, sizeof err) == NULL);
  CHECK(strcmp(err, "demo.Route.tags[1]: invalid UTF-8 at byte 3") == 0);
  protocall_Value k, v;
  memset(&k, 0, sizeof k);
  memset(&v, 0, sizeof v);
  k.data = "k\xc0";
  k.len = 2;
  v.data = "v";
  v.len = 1;
  pc_Message *bad_key = protocall_message_new(R, a);
  CHECK(protocall_map_set(bad_key, R, "labels", &k, &v, a) == PROTOCALL_OK);
  CHECK(protocall_encode(bad_key, R, 0, a, &len, err, sizeof err) == NULL);
  CHECK(strcmp(err, "demo.Route.labels[\"k\\192\"]: key: invalid UTF-8 at byte 2") == 0);
  k.data = "zone";
  k.len = 4;
  v.data = "\xe2\x82";
  v.len = 2;
  pc_Message *bad_value = protocall_message_new(R, a);
  CHECK(protocall_map_set(bad_value, R, "labels", &k, &v, a) == PROTOCALL_OK);
  CHECK(protocall_encode(bad_value, R, 0, a, &len, err, sizeof err) == NULL);
  CHECK(strcmp(err, "demo.Route.labels[\"zone\"]: invalid UTF-8 at byte 1") == 0);
  lua_State *L = new_state(pool);
  protocall_pushmessage(L, R, m);
  lua_setglobal(L, "m");
  protocall_pushmessage(L, R, bad_key);
  lua_setglobal(L, "bad_key");
  CHECK(run(L,
            "local ok, err = pcall(pc.encode, m)\n"
            "assert(err:find('demo.Route.tags[1]: invalid UTF-8 at byte 3', 1, true), err)\n"
            "ok, err = pcall(pc.to_json, bad_key)\n"
            "assert(err:find('$.labels[\"k\\\\xc0\"]: string is not valid UTF-8', 1, true), err)\n"
            /* read and removed from Lua, so Lua can mend such a message */
            "assert(bad_key.labels['k\\192'] == 'v')\n"
            "bad_key.labels['k\\192'] = nil\n"
            "assert(bad_key.labels['k\\192'] == nil and #pc.encode(bad_key) == 0)"));
  lua_close(L);
  protocall_arena_free(a);
  protocall_pool_free(pool);
}

/* 1 when the NUL-terminated 's' is UTF-8 (no sequence cut or stray). */
static int is_utf8(const char *s) {
  for (const unsigned char *p = (const unsigned char *)s; *p;) {
    int n = *p < 0x80             ? 0
            : (*p & 0xE0) == 0xC0 ? 1
            : (*p & 0xF0) == 0xE0 ? 2
            : (*p & 0xF8) == 0xF0 ? 3
                                  : -1;
    if (n < 0) return 0;
    for (p++; n > 0; n--, p++)
      if ((*p & 0xC0) != 0x80) return 0;
  }
  return 1;
}

/* A bad string three map levels down in a type of a 400-byte package:
 * the error keeps the place and the reason whole, the root's name giving
 * way ("..." and its tail), and stays UTF-8 (the keys' "é" not cut). */
static void bad_utf8_long_root(void) {
  char pkg[401], proto[1024], full[512], want[512];
  memset(pkg, 'q', 400);
  pkg[400] = '\0';
  snprintf(proto, sizeof proto,
           "syntax = \"proto3\"; package %s;\n"
           "message A { map<string, B> m = 1; }\n"
           "message B { map<string, C> m = 1; }\n"
           "message C { map<string, string> m = 1; }\n",
           pkg);
  pc_Pool *pool = protocall_pool_new();
  char err[1024];
  CHECK(protocall_pool_load(pool, "long.proto", proto, strlen(proto), NULL, err, sizeof err));
  snprintf(full, sizeof full, "%s.A", pkg);
  const pc_MessageDef *A = protocall_pool_type(pool, full), *B, *C;
  pc_Arena *a = protocall_arena_new();
  char k1[61], k2[61];
  memset(k1, 'k', 60);
  k1[60] = '\0';
  for (int i = 0; i < 30; i++) memcpy(k2 + 2 * i, "\xc3\xa9", 2); /* "é", where 511 bytes end */
  k2[60] = '\0';
  protocall_Value k, v;
  memset(&k, 0, sizeof k);
  memset(&v, 0, sizeof v);
  pc_Message *m = protocall_message_new(A, a);
  k.data = k1;
  k.len = 60;
  pc_Message *b = protocall_map_mutable_message(m, A, "m", &k, a, &B);
  k.data = k2;
  pc_Message *c = protocall_map_mutable_message(b, B, "m", &k, a, &C);
  k.data = "z";
  k.len = 1;
  v.data = "ab\xff";
  v.len = 3;
  CHECK(protocall_map_set(c, C, "m", &k, &v, a) == PROTOCALL_OK);
  size_t len;
  CHECK(protocall_encode(m, A, 0, a, &len, err, sizeof err) == NULL);
  snprintf(want, sizeof want, "qqqq.A.m[\"%s\"].m[\"%s\"].m[\"z\"]: invalid UTF-8 at byte 3", k1,
           k2);
  size_t n = strlen(err), w = strlen(want);
  CHECK(n < 512 && strncmp(err, "...", 3) == 0);
  CHECK(n > w && strcmp(err + n - w, want) == 0);
  CHECK(is_utf8(err));
  protocall_arena_free(a);
  protocall_pool_free(pool);
}

/* protocall_pushpool / protocall_pushmessage in a state where the module
 * was never opened: a Lua error, not a crash. */
static int push_pool_early(lua_State *L) {
  protocall_pushpool(L, lua_touserdata(L, 1));
  return 1;
}

static void before_open(void) {
  pc_Pool *pool = demo_pool();
  lua_State *L = luaL_newstate();
  lua_pushcfunction(L, push_pool_early);
  lua_pushlightuserdata(L, pool);
  CHECK(lua_pcall(L, 1, 1, 0) != LUA_OK);
  CHECK(strstr(lua_tostring(L, -1), "open the module first (luaopen_protocall)") != NULL);
  lua_close(L);
  protocall_pool_free(pool);
}

static int fail_next; /* counting_alloc fails its next new block */

/* A lua_Alloc counting the bytes it holds in the size_t at 'ud', writing
 * 0xdd over what it frees (a read of freed memory sees it). */
static void *counting_alloc(void *ud, void *p, size_t osize, size_t nsize) {
  size_t *held = ud;
  if (p == NULL && nsize > 0 && fail_next) {
    fail_next = 0;
    return NULL;
  }
  if (p != NULL) *held -= osize;
  if (nsize == 0) {
    volatile unsigned char *c = p; /* a memset before free is optimized out */
    for (size_t i = 0; c != NULL && i < osize; i++) c[i] = 0xdd;
    free(p);
    return NULL;
  }
  void *q = realloc(p, nsize);
  if (q != NULL)
    *held += nsize;
  else if (p != NULL)
    *held += osize;
  return q;
}

static long fail_at; /* failing_alloc fails from its fail_at-th new or bigger block on; 0 never */
static long allocs;  /* counted since fail_at was set */

/* counting_alloc failing every allocation from the fail_at-th on (one
 * failure alone Lua 5.4 retries after an emergency collection). */
static void *failing_alloc(void *ud, void *p, size_t osize, size_t nsize) {
  if (fail_at > 0 && (p == NULL ? nsize > 0 : nsize > osize) && ++allocs >= fail_at) return NULL;
  return counting_alloc(ud, p, osize, nsize);
}

/* Opening the module and loading .proto files whose imports the pool
 * holds (a built-in one, a file loaded before), their scratch arenas
 * finalized between them, with each allocation failing in turn: an error
 * or nil and the reason, and every byte given back at lua_close (the
 * scratch arenas, an Arena's __gc failing to start a group included). */
static const char kLoads[] =
    "local pool = pc.pool()\n"
    "assert(pool:load([[syntax = 'proto3'; package la;\n"
    "  import 'google/protobuf/timestamp.proto';\n"
    "  message T { google.protobuf.Timestamp at = 1; repeated string s = 2; }]],\n"
    "  { name = 'la.proto' }))\n"
    "collectgarbage()\n"
    "assert(pool:load([[syntax = 'proto3'; package lb; import 'la.proto';\n"
    "  message U { la.T t = 1; map<string, la.T> m = 2; }]], { name = 'lb.proto' }))\n"
    "collectgarbage()\n"
    "assert(pool:type('lb.U'))\n";

static int open_all(lua_State *L) {
  luaL_openlibs(L);
  luaL_requiref(L, "protocall", luaopen_protocall, 0);
  lua_setglobal(L, "pc");
  return 0;
}

static void loads_failing(void) {
  for (long n = 1;; n++) {
    size_t held = 0;
    allocs = 0;
    fail_at = n;
    lua_State *L = lua_newstate(failing_alloc, &held);
    int ok = L != NULL;
    if (ok) {
      lua_pushcfunction(L, open_all);
      ok = lua_pcall(L, 0, 0, 0) == LUA_OK && luaL_dostring(L, kLoads) == LUA_OK;
    }
    int hit = allocs >= n;
    fail_at = 0;
    if (!hit) CHECK(ok);
    if (L != NULL) lua_close(L);
    if (held != 0)
      fprintf(stderr, "loads_failing: allocation %ld failing: %zu bytes held\n", n, held);
    CHECK(held == 0);
    if (!hit) break;
  }
}

static lua_Integer noted; /* what note(x) was last given */

/* -- fail_next(): the state's allocator fails its next new block (Lua 5.4
 * then runs an emergency collection, which leaves finalizers for later). */
static int fail_next_alloc(lua_State *L) {
  (void)L;
  fail_next = 1;
  return 0;
}

/* -- note(x): for a finalizer run at lua_close to report a value. */
static int note(lua_State *L) {
  noted = luaL_checkinteger(L, 1);
  return 0;
}

static const char kFinalized[] = "local pool = pc.pool()\n"
                                 "pool:message('g.S', { { 'x', 'int32', 1 }, { 's', 'string', 2 }, "
                                 "{ 'n', 'int32', 3, repeated = true } })\n"
                                 "T = pool:message('g.P', { { 'sub', 'g.S', 1 } })\n"
                                 "bytes = pc.encode(T { sub = { x = 5, s = 'five', n = { 6 } } })\n"
                                 "function settle() for _ = 1, 4 do collectgarbage() end end\n";

static void finalized_views(void) {
  size_t held = 0;
  lua_State *L = lua_newstate(counting_alloc, &held);
  luaL_openlibs(L);
  luaL_requiref(L, "protocall", luaopen_protocall, 0);
  lua_setglobal(L, "pc");
  lua_register(L, "note", note);
  CHECK(run(L, kFinalized));
  /* the arena is newer than h: finalized first, its memory still there */
  CHECK(run(L, "local h = setmetatable({}, { __gc = function(h)\n"
               "  h.sub.s = h.sub.s .. ('!'):rep(5000)\n" /* grows the arena */
               "  got = h.sub.x .. #h.sub.s .. h.sub.n[1] end })\n"
               "h.sub = pc.decode(T, bytes).sub\n"
               "h = nil; settle()\n"
               "assert(got == '550046', tostring(got))"));
  /* finalized newest first: the arena, a finalizer whose allocation fails
   * (an emergency collection: an atomic phase, finalizers left for later),
   * a sweep made before the arena was finalized, the reader */
  lua_register(L, "fail_next", fail_next_alloc);
  CHECK(run(
      L,
      "got = {}\n"
      "local function round()\n"
      "  local state = {}\n"
      "  local h = setmetatable({}, { __gc = function()\n"
      "    got[#got + 1] = state.sub.x .. state.sub.s .. state.sub.n[1] end })\n"
      "  pc.decode(T, bytes); collectgarbage()\n" /* a sweep waits */
      "  state.f = setmetatable({}, { __gc = function() fail_next(); state.t = {} end })\n"
      "  state.sub = pc.decode(T, bytes).sub\n"
      "end\n"
      "for _ = 1, 4 do round(); settle() end\n"
      "assert(table.concat(got, ' ') == '5five6 5five6 5five6 5five6', table.concat(got, ' '))"));
  /* dropped arenas are freed a cycle or so later, not at lua_close */
  size_t before = held;
  CHECK(run(L, "for _ = 1, 10000 do pc.decode(T, bytes) end settle()"));
  CHECK(held < before + 64 * 1024);
  /* a view a finalizer kept for good keeps its arena until it is dropped */
  CHECK(run(L, "do local v = pc.decode(T, bytes).sub\n"
               "  setmetatable({}, { __gc = function() kept = v end }) end\n"
               "settle() for _ = 1, 10000 do pc.decode(T, bytes) end settle()\n"
               "assert(kept.x == 5, tostring(kept.x)) kept = nil settle()"));
  CHECK(held < before + 64 * 1024);
  /* at lua_close: a finalizer reading a view, arenas waiting, a view held */
  CHECK(run(L, "local h = setmetatable({}, { __gc = function(h) note(h.sub.x) end })\n"
               "h.sub = pc.decode(T, bytes).sub\n"
               "keep_h = h\n"
               "forever = pc.decode(T, bytes).sub\n"
               "for _ = 1, 100 do pc.decode(T, bytes) end collectgarbage()"));
  noted = 0;
  lua_close(L);
  CHECK(noted == 5);
  CHECK(held == 0);
}

/* A pool and its message dropped in the cycle that finalizes an older
 * object reading the message: the pool's box is finalized first, its
 * types still read (the counting allocator writes 0xdd over what it frees);
 * dropped pools given back a cycle or so later, a pool a finalizer's view
 * keeps when it is dropped, and every byte at lua_close. */
static const char kPoolMessage[] =
    "function pool_message()\n"
    "  local own = pc.pool()\n"
    "  assert(own:load([[syntax = 'proto3'; package gp; message L { int32 x = 1; string s = 2; }\n"
    "    message B { L leaf = 1; } message A { B b = 1; }]], { name = 'gp.proto' }))\n"
    "  local A = own:type('gp.A')\n"
    "  return A { b = { leaf = { x = 5, s = 'five' } } }\n"
    "end\n"
    "function reader(state) return function() got = state.m.b.leaf.x .. state.m.b.leaf.s end end\n"
    "function round()\n" /* in a function: no register of the chunk keeps the pool */
    "  local state = {}\n"
    "  setmetatable(state, { __gc = reader(state) })\n"
    "  state.m = pool_message()\n"
    "end\n";

static void finalized_pools(void) {
  size_t held = 0;
  lua_State *L = lua_newstate(counting_alloc, &held);
  luaL_openlibs(L);
  luaL_requiref(L, "protocall", luaopen_protocall, 0);
  lua_setglobal(L, "pc");
  lua_register(L, "note", note);
  CHECK(run(L, "function settle() for _ = 1, 4 do collectgarbage() end end"));
  CHECK(run(L, kPoolMessage));
  CHECK(run(
      L,
      "for _ = 1, 4 do got = nil; round(); settle(); assert(got == '5five', tostring(got)) end"));
  /* 1,000 dropped pools: given back as they go, not at lua_close */
  CHECK(run(L, "for _ = 1, 20 do round() end settle()"));
  size_t before = held;
  CHECK(run(L, "for _ = 1, 1000 do round() end settle()"));
  CHECK(held < before + 64 * 1024);
  /* a view a finalizer kept for good keeps its pool until it is dropped */
  CHECK(run(L, "local function keep() local v = pool_message().b\n"
               "  setmetatable({}, { __gc = function() kept = v end }) end\n"
               "keep() settle() for _ = 1, 100 do round() end settle()\n"
               "assert(kept.leaf.x == 5 and kept.leaf.s == 'five') kept = nil settle()"));
  CHECK(held < before + 64 * 1024);
  /* at lua_close: a finalizer reading a view of a pool dropped with it */
  CHECK(run(L, "local function last() local h = setmetatable({}, { __gc = function(h) "
               "note(h.m.b.leaf.x) end })\n"
               "  h.m = pool_message() keep_h = h end\n"
               "last() round() collectgarbage()"));
  noted = 0;
  lua_close(L);
  CHECK(noted == 5);
  CHECK(held == 0);
}

/* A host's pool whose box a finalizer uses after the box's __gc ran in
 * the same cycle (the box newer than the reader): still the host's pool,
 * usable (an owned one would be refused). */
static int push_host_pool(lua_State *L) {
  protocall_pushpool(L, lua_touserdata(L, lua_upvalueindex(1)));
  return 1;
}

static void finalized_host_pool(void) {
  pc_Pool *pool = demo_pool();
  lua_State *L = new_state(NULL);
  lua_pushlightuserdata(L, pool);
  lua_pushcclosure(L, push_host_pool, 1);
  lua_setglobal(L, "host_pool");
  CHECK(run(
      L, "local function made()\n"
         "  local st = {}\n"
         "  setmetatable(st, { __gc = function() got = tostring(st.p:type('demo.Point')) end })\n"
         "  st.p = host_pool()\n"
         "end\n"
         "for _ = 1, 3 do got = nil made() for _ = 1, 4 do collectgarbage() end\n"
         "  assert(got == 'protocall.Type(demo.Point)', tostring(got)) end"));
  lua_close(L);
  protocall_pool_free(pool);
}

/* Messages made in finalizers: during a cycle (their arenas freed as any
 * other's), kept by one until lua_close, and made by finalizers lua_close
 * runs (Lua 5.4 sets no finalizer then: the Reaper frees their arenas). */
static void made_in_finalizers(void) {
  size_t held = 0;
  lua_State *L = lua_newstate(counting_alloc, &held);
  luaL_openlibs(L);
  luaL_requiref(L, "protocall", luaopen_protocall, 0);
  lua_setglobal(L, "pc");
  lua_register(L, "note", note);
  CHECK(run(L, kFinalized));
  CHECK(run(
      L, "for _ = 1, 100 do setmetatable({}, { __gc = function() pc.decode(T, bytes) end }) end\n"
         "setmetatable({}, { __gc = function() kept = pc.decode(T, bytes) end })\n"
         "settle() assert(kept.sub.x == 5)\n"
         "setmetatable({}, { __gc = function()\n"
         "  local m = pc.decode(T, bytes)\n"
         "  for _ = 1, 20 do m = T { sub = { x = m.sub.x + 1, s = ('x'):rep(2000) } } end\n"
         "  note(m.sub.x + kept.sub.x) end })"));
  noted = 0;
  lua_close(L);
  CHECK(noted == 30);
  CHECK(held == 0);
}

int main(void) {
  before_open();
  pools();
  messages();
  containers();
  bad_utf8();
  bad_utf8_long_root();
  unknown_pool();
  shared_pool();
  transport_and_time();
  yielding_time();
  statuses();
  streams();
  finalized_views();
  made_in_finalizers();
  finalized_pools();
  finalized_host_pool();
  loads_failing();
  return CHECK_DONE();
}
