-- luarocks packaging of the Lua module: from the repository root,
--   luarocks --lua-version=5.4 make --tree DIR bindings/lua/protocall-0.1.0-1.rockspec
-- builds with CMake (Debian's cmake, liblua5.4-dev, libnghttp2-dev, libc-ares-dev,
-- libssl-dev, zlib1g-dev, libre2-dev, g++) and installs protocall.so (with protocall_tls.so and
-- protocall_re2.so beside it, which it opens on first use) and the Lua layer into the tree. For
-- LuaJIT, `--lua-version=5.1` with luarocks configured for luajit and its
-- headers (README "Installing"): CMake sees luajit.h in LUA_INCDIR and builds
-- the LuaJIT module. Lua 5.1 to 5.3 themselves are refused by CMake.
rockspec_format = "3.0"
package = "protocall"
version = "0.1.0-1"
source = { url = "git+https://invalid/protocall.git" } -- `luarocks make` builds the working tree
description = {
  summary = "protobuf messages and RPC call policies for Lua",
  detailed = "Slotted protobuf messages loaded from .proto source or descriptor sets, the "
    .. "binary wire format, and RPC methods wrapped with cached call policies (retry with "
    .. "backoff and jitter, deadlines), in process and over gRPC.",
}
dependencies = { "lua >= 5.1, < 5.5" }
build = {
  type = "cmake",
  variables = {
    CMAKE_BUILD_TYPE = "Release",
    CMAKE_INSTALL_PREFIX = "$(PREFIX)",
    PROTOCALL_INSTALL_CMOD = "$(LIBDIR)",
    PROTOCALL_INSTALL_LMOD = "$(LUADIR)",
    BUILD_TESTING = "OFF",
    PROTOCALL_LUA_INCDIR = "$(LUA_INCDIR)",
    PROTOCALL_INSTALL_HOST = "OFF",
  },
}
