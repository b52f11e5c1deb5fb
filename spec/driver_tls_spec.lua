-- TLS over a host driver: pc.grpc(https target, {driver = D}) with the
-- lua-socket driver (spec/socket_driver.lua) carrying ciphertext only, the
-- TLS session running in the channel (core/net/socket.h, hosted TLS: the
-- code of the built-in sockets). Against servers that insist on ALPN h2:
-- python3-grpcio with TLS (spec/grpc_server.py tls) and @grpc/grpc-js
-- (spec/node/grpcjs_tls_server.mjs; Node's HTTP/2 over TLS refuses a
-- client without ALPN h2), mutual TLS (grpc-js and pc.listen requiring a
-- client certificate), and a wrong CA failing as the built-in sockets fail.
local pc = require "protocall"
local helper = require "grpc_helper"
local sdriver = require "socket_driver"
local node = require "node_peer"

local failure = helper.failure

-- A lua-socket driver that records the first byte each connection sends.
local function recording()
  local firsts = {}
  local D = sdriver.new(pc, {
    send = function(sock, bytes)
      if not sock.seen then
        sock.seen = true
        firsts[#firsts + 1] = bytes:byte(1)
      end
    end,
  })
  return D, firsts
end

describe("TLS in the channel over a host driver", function()
  local certs, other, grpcio
  setup(function()
    certs = helper.make_certs()
    other = helper.make_certs() -- another CA: signed none of the servers
    grpcio = helper.spawn("tls", 0, certs .. "/server.pem", certs .. "/server.key")
  end)
  teardown(function()
    helper.stop(grpcio)
    os.execute("rm -rf " .. certs .. " " .. other)
  end)

  it("calls python3-grpcio over TLS, the driver carrying ciphertext only", function()
    local D, firsts = recording()
    local t = pc.grpc("https://127.0.0.1:" .. grpcio.port,
      { driver = D, ca_file = certs .. "/ca.pem", server_name = "localhost" })
    assert.are.equal("hello", t:unary("/test.Test/Echo", "hello", { timeout = 5 }))
    assert.are.equal(("x"):rep(300000), t:unary("/test.Test/Echo", ("x"):rep(300000), { timeout = 10 }))
    assert.are.same({ 0x16 }, firsts) -- one connection, opened with a TLS handshake record
    t:close()
  end)

  -- A CA file empty at the first call (a certificate rotation half done)
  -- fails that attempt UNAVAILABLE, not the channel for good: once the file
  -- is whole, the attempt after the backoff sets TLS up again and connects.
  it("sets TLS up again after a ca_file that did not load is mended", function()
    local ca = os.tmpname()
    local f = assert(io.open(ca, "wb"))
    f:close()
    local t = pc.grpc("https://127.0.0.1:" .. grpcio.port,
      { ca_file = ca, server_name = "localhost", reconnect = { initial = 0.1, jitter = 0 } })
    local err = failure(t.unary, t, "/test.Test/Echo", "x", { timeout = 5 })
    assert.are.equal("UNAVAILABLE", err.code)
    assert.are.equal("ca_file '" .. ca .. "': not a PEM certificate bundle", err.message)
    local src = assert(io.open(certs .. "/ca.pem", "rb"))
    f = assert(io.open(ca, "wb"))
    f:write(src:read("a"))
    f:close()
    src:close()
    os.execute("sleep 0.3") -- past the 0.1 s backoff
    local ok, got = pcall(t.unary, t, "/test.Test/Echo", "back", { timeout = 5 })
    os.remove(ca)
    t:close()
    assert.is_true(ok, tostring(got))
    assert.are.equal("back", got)
  end)

  -- With wait_for_ready the call whose attempt found the file empty (a TLS
  -- setup failing before any connection) waits for the attempts after the
  -- backoff, and the first of them after the file is mended carries it.
  it("lets a wait_for_ready call wait through a ca_file mended while it waits", function()
    local ca = os.tmpname()
    local f = assert(io.open(ca, "wb"))
    f:close()
    local t = pc.grpc("https://127.0.0.1:" .. grpcio.port, { ca_file = ca, server_name = "localhost",
      wait_for_ready = true, reconnect = { initial = 0.1, jitter = 0 } })
    local ok, got
    pc.spawn(function() ok, got = pcall(t.unary, t, "/test.Test/Echo", "waited", { timeout = 20 }) end)
    pc.spawn(function()
      pc.sleep(0.3)
      local src = assert(io.open(certs .. "/ca.pem", "rb"))
      local w = assert(io.open(ca, "wb"))
      w:write(src:read("a"))
      w:close()
      src:close()
    end)
    pc.run()
    os.remove(ca)
    t:close()
    assert.is_true(ok, tostring(got))
    assert.are.equal("waited", got)
  end)

  it("fails with a wrong CA as the built-in sockets fail", function()
    local url = "https://127.0.0.1:" .. grpcio.port
    local hosted = failure(function()
      local t = pc.grpc(url, { driver = sdriver.new(pc), ca_file = other .. "/ca.pem" })
      return t:unary("/test.Test/Echo", "x", { timeout = 5 })
    end)
    local builtin = failure(function()
      local t = pc.grpc(url, { ca_file = other .. "/ca.pem" })
      return t:unary("/test.Test/Echo", "x", { timeout = 5 })
    end)
    assert.are.equal("UNAVAILABLE", hosted.code)
    assert.matches("^TLS handshake with 127%.0%.0%.1:" .. grpcio.port .. ": certificate verify failed", hosted.message)
    assert.are.equal(builtin.message, hosted.message)
  end)

  -- A name the certificate does not carry: the error names the one checked
  -- (server_name, else the target's host), the same on both paths.
  it("names the name checked when the certificate does not carry it", function()
    local url = "https://127.0.0.1:" .. grpcio.port
    for _, driver in ipairs { sdriver.new(pc), false } do
      local wrong_name = failure(function()
        local t = pc.grpc(url, { driver = driver or nil, ca_file = certs .. "/ca.pem", server_name = "other.test" })
        return t:unary("/test.Test/Echo", "x", { timeout = 5 })
      end)
      assert.are.equal("UNAVAILABLE", wrong_name.code)
      assert.are.equal("TLS handshake with 127.0.0.1:" .. grpcio.port .. ": certificate verify failed: "
        .. 'hostname mismatch (checked server_name "other.test" against the server\'s certificate)',
        wrong_name.message)
    end
    -- a DNS name's 253 bytes whole; a longer name cut, saying so
    local long = ("a"):rep(63) .. "." .. ("b"):rep(63) .. "." .. ("c"):rep(63) .. "." .. ("d"):rep(61)
    for name, shown in pairs { [long] = long, [long .. ".e"] = long:sub(1, 250) .. "..." } do
      for _, driver in ipairs { sdriver.new(pc), false } do
        local wrong_name = failure(function()
          local t = pc.grpc(url, { driver = driver or nil, ca_file = certs .. "/ca.pem", server_name = name })
          return t:unary("/test.Test/Echo", "x", { timeout = 5 })
        end)
        assert.are.equal("TLS handshake with 127.0.0.1:" .. grpcio.port .. ": certificate verify failed: "
          .. 'hostname mismatch (checked server_name "' .. shown .. '" against the server\'s certificate)',
          wrong_name.message)
      end
    end
    -- without server_name the target's host is checked: an address the
    -- certificate (DNS:localhost, IP:127.0.0.1) does not name
    local pool = pc.pool()
    assert(pool:load('syntax = "proto3"; package dn; message N { int32 n = 1; } service S { rpc Inc(N) returns (N); }',
      { name = "dn/s.proto" }))
    local server = pc.server({ ["dn.S"] = { Inc = function(m) return { n = m.n + 1 } end } }, { pool = pool })
    local l = pc.listen(server, "0.0.0.0:0", { cert_file = certs .. "/server.pem", key_file = certs .. "/server.key" })
    local errs = {}
    pc.spawn(function() l:serve() end)
    pc.spawn(function()
      local ok, err = pcall(function()
        for i, driver in ipairs { sdriver.new(pc), false } do
          local t = pc.grpc("https://127.0.0.2:" .. l.port, { driver = driver or nil, ca_file = certs .. "/ca.pem" })
          local c = pc.client("dn.S", { pool = pool, transport = t })
          errs[i] = failure(c.Inc, c, { n = 1 }, { timeout = 5 })
        end
      end)
      l:shutdown(1)
      if not ok then error(err, 0) end
    end)
    pc.run()
    for i = 1, 2 do
      assert.are.equal("TLS handshake with 127.0.0.2:" .. l.port .. ": certificate verify failed: "
        .. 'IP address mismatch (checked "127.0.0.2" against the server\'s certificate)', errs[i].message)
    end
  end)

  it("serves mutual TLS against pc.listen requiring a client certificate", function()
    local pool = pc.pool()
    assert(pool:load([[
syntax = "proto3";
package dt;
message N { int32 n = 1; }
service S { rpc Inc(N) returns (N); }
]], { name = "dt/s.proto" }))
    local server = pc.server({ ["dt.S"] = { Inc = function(m) return { n = m.n + 1 } end } }, { pool = pool })
    local l = pc.listen(server, "127.0.0.1:0", { cert_file = certs .. "/server.pem", key_file = certs .. "/server.key",
      client_ca_file = certs .. "/ca.pem" })
    local got, without
    pc.spawn(function() l:serve() end)
    pc.spawn(function()
      local ok, err = pcall(function()
        local base = { ca_file = certs .. "/ca.pem", server_name = "localhost" }
        local with = {}
        for k, v in pairs(base) do with[k] = v end
        with.driver, with.cert_file, with.key_file = sdriver.new(pc), certs .. "/client.pem", certs .. "/client.key"
        local c = pc.client("dt.S", { pool = pool, transport = pc.grpc("https://127.0.0.1:" .. l.port, with) })
        got = c:Inc({ n = 41 }, { timeout = 5 }).n
        base.driver = sdriver.new(pc)
        local bare = pc.client("dt.S", { pool = pool, transport = pc.grpc("https://127.0.0.1:" .. l.port, base) })
        without = failure(bare.Inc, bare, { n = 1 }, { timeout = 5 })
      end)
      l:shutdown(1)
      if not ok then error(err, 0) end
    end)
    pc.run()
    assert.are.equal(42, got)
    assert.are.equal("UNAVAILABLE", without.code)
  end)

  describe("against @grpc/grpc-js (ALPN h2 required)", function()
    local absent = node.missing("@grpc/grpc-js")
    if absent then
      it("runs", function() node.skip(pending, "grpc-js TLS", absent) end)
      return
    end
    local js, js_mtls
    setup(function()
      js = node.serve("grpcjs_tls_server.mjs", { certs .. "/server.pem", certs .. "/server.key" })
      js_mtls = node.serve("grpcjs_tls_server.mjs", { certs .. "/server.pem", certs .. "/server.key",
        certs .. "/ca.pem" })
    end)
    teardown(function()
      node.stop(js)
      node.stop(js_mtls)
    end)

    it("calls it through the driver, and through the built-in sockets alike", function()
      local D, firsts = recording()
      for _, driver in ipairs { D, false } do
        local t = pc.grpc("https://127.0.0.1:" .. js.port,
          { driver = driver or nil, ca_file = certs .. "/ca.pem", server_name = "localhost" })
        assert.are.equal("from lua", t:unary("/test.Test/Echo", "from lua", { timeout = 5 }))
        t:close()
      end
      assert.are.same({ 0x16 }, firsts)
    end)

    it("mutual TLS: with the client certificate, and without it refused", function()
      local url = "https://127.0.0.1:" .. js_mtls.port
      local t = pc.grpc(url, { driver = sdriver.new(pc), ca_file = certs .. "/ca.pem", server_name = "localhost",
        cert_file = certs .. "/client.pem", key_file = certs .. "/client.key" })
      assert.are.equal("mtls", t:unary("/test.Test/Echo", "mtls", { timeout = 5 }))
      t:close()
      local bare = pc.grpc(url, { driver = sdriver.new(pc), ca_file = certs .. "/ca.pem", server_name = "localhost" })
      local err = failure(bare.unary, bare, "/test.Test/Echo", "x", { timeout = 5 })
      assert.are.equal("UNAVAILABLE", err.code)
    end)
  end)
end)
