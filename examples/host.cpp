/* examples/host.cpp: a C++ host embedding Lua with protocall
 * (bindings/lua/protocall.h, whose declarations have C linkage under C++,
 * as lua.hpp gives Lua's). It
 *   1. loads a schema from source text into a pool the host owns (a
 *      std::unique_ptr whose deleter is protocall_pool_free) and freezes it,
 *   2. opens a Lua state with the module and makes the pool its default,
 *   3. serves demo.Greeter's Hello from a C++ object through a host
 *      transport (protocall_pushtransport), failing the first call with
 *      UNAVAILABLE so the client's retry policy shows,
 *   4. runs a script that calls it with pc.client, and reads the reply back
 *      in C++.
 * Lua raises with longjmp, which skips C++ destructors: the functions that
 * call the Lua API own nothing with one (the reply's memory is the
 * Greeter's, kept until the next call).
 * Built by CMake (target example_host_cpp) and run by ctest
 * (examples.host_cpp):  build/release/example_host_cpp */
#include <lua.hpp>

#include "protocall.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

namespace {

const char kProto[] = R"(syntax = "proto3";
package demo;
message HelloRequest { string name = 1; }
message HelloReply { string message = 1; uint32 attempt = 2; }
service Greeter { rpc Hello(HelloRequest) returns (HelloReply); }
)";

const char kScript[] = R"lua(local pc = require "protocall"
local greeter = pc.client("demo.Greeter", {
  transport = transport, timeout = 5,
  retry = pc.Retry{ initial = 0.01, maximum = 0.1 },
})
local reply = greeter:Hello{ name = "C++" }
print(("script: %s (attempt %d)"):format(reply.message, reply.attempt))
return reply
)lua";

struct PoolFree {
  void operator()(pc_Pool *p) const {
    protocall_pool_free(p);
  }
};
struct ArenaFree {
  void operator()(pc_Arena *a) const {
    protocall_arena_free(a);
  }
};
struct StateClose {
  void operator()(lua_State *L) const {
    lua_close(L);
  }
};

using Pool = std::unique_ptr<pc_Pool, PoolFree>;
using Arena = std::unique_ptr<pc_Arena, ArenaFree>;
using State = std::unique_ptr<lua_State, StateClose>;

class Greeter {
public:
  explicit Greeter(const pc_Pool *pool)
      : request_(protocall_pool_type(pool, "demo.HelloRequest")),
        reply_(protocall_pool_type(pool, "demo.HelloReply")) {}

  // The protocall_UnaryFn: request bytes in, the reply's bytes pushed on L
  // (or a status code and its message).
  static int Unary(lua_State *L, void *ud, const protocall_Request *req) {
    Greeter *g = static_cast<Greeter *>(ud);
    if (++g->calls_ == 1) {
      lua_pushliteral(L, "warming up");
      return 14; // UNAVAILABLE: the client's retry policy tries again
    }
    size_t len = 0;
    const char *bytes = g->Reply(req->request, req->request_len, &len);
    if (bytes == nullptr) {
      lua_pushstring(L, g->err_);
      return 3; // INVALID_ARGUMENT
    }
    lua_pushlstring(L, bytes, len);
    return PROTOCALL_OK;
  }

  int calls() const {
    return calls_;
  }

private:
  // The encoded reply to a request, in scratch_ (valid until the next
  // call), or nullptr with err_ set.
  const char *Reply(const char *request, size_t request_len, size_t *len) {
    scratch_.reset(protocall_arena_new());
    pc_Arena *a = scratch_.get();
    pc_Message *in =
        a ? protocall_decode(request_, request, request_len, a, err_, sizeof err_) : nullptr;
    if (in == nullptr) return nullptr;
    const char *name = "";
    size_t name_len = 0;
    protocall_get_string(in, request_, "name", &name, &name_len);
    std::string text = "hello, " + std::string(name, name_len);
    pc_Message *out = protocall_message_new(reply_, a);
    if (out == nullptr ||
        protocall_set_string(out, reply_, "message", text.data(), text.size(), a) != PROTOCALL_OK ||
        protocall_set_integer(out, reply_, "attempt", calls_, a) != PROTOCALL_OK) {
      std::snprintf(err_, sizeof err_, "out of memory");
      return nullptr;
    }
    return protocall_encode(out, reply_, 0, a, len, err_, sizeof err_);
  }

  const pc_MessageDef *request_, *reply_;
  int calls_ = 0;
  Arena scratch_;
  char err_[256] = "";
};

} // namespace

int main() {
  char err[512];
  Pool pool(protocall_pool_new());
  if (!pool || !protocall_pool_load(pool.get(), "greeter.proto", kProto, std::strlen(kProto),
                                    nullptr, err, sizeof err)) {
    std::fprintf(stderr, "host: %s\n", pool ? err : "out of memory");
    return EXIT_FAILURE;
  }
  protocall_pool_freeze(pool.get());
  Greeter greeter(pool.get());

  int ok = 0;
  {
    State L(luaL_newstate()); // closed before the pool goes
    luaL_openlibs(L.get());
    luaL_requiref(L.get(), "protocall", luaopen_protocall, 0);
    lua_pop(L.get(), 1);
    protocall_setdefaultpool(L.get(), pool.get());
    protocall_pushtransport(L.get(), Greeter::Unary, nullptr, &greeter);
    lua_setglobal(L.get(), "transport");
    int status = luaL_loadbuffer(L.get(), kScript, sizeof kScript - 1, "=script");
    if (status == LUA_OK) status = lua_pcall(L.get(), 0, 1, 0);
    if (status != LUA_OK) {
      std::fprintf(stderr, "host: %s\n", lua_tostring(L.get(), -1));
    } else {
      const pc_MessageDef *type = nullptr;
      const pc_Message *reply = protocall_tomessage(L.get(), -1, &type);
      const char *text = "";
      size_t len = 0;
      ok = reply != nullptr && protocall_get_string(reply, type, "message", &text, &len) == 0 &&
           std::string(text, len) == "hello, C++" && greeter.calls() == 2;
      std::printf("host: the script got %s \"%.*s\" after %d calls\n", protocall_type_name(type),
                  static_cast<int>(len), text, greeter.calls());
    }
  }
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
