--- `protocall gateway`: a standalone gateway in front of any gRPC server.
-- It is a pc.listen whose handlers forward each call to the upstream
-- with a client of its schema: REST/JSON by google.api.http rules (the
-- listener's `rest` placement, pc.transcoder), and gRPC, gRPC-Web and
-- Connect clients (over HTTP/2 or HTTP/1.1) proxied to the upstream's
-- plain gRPC, headers, trailers and status details carried whole.
local pc = require "protocall"
local common = require "protocall.cli.common"
local sched = require "protocall.sched"
local reflection = require "protocall.rpc.reflection"
local http_rules = require "protocall.http.rules"

local ipairs, pairs, pcall, tostring, error, getmetatable = ipairs, pairs, pcall, tostring, error, getmetatable
local format, concat, sort = string.format, table.concat, table.sort
local stderr, usage_error, fail = common.stderr, common.usage_error, common.fail
local max, now, forwarding = math.max, sched.now, require("protocall.rpc.server").forwarding
local metadata_problem = require("protocall.core").metadata_problem
local seconds_problem = require("protocall.internal").seconds_problem
local upstream_failure = require("protocall.http.web").upstream_failure
local shown = require("protocall.http.template").shown

local M = {}

-- The shortest -refresh period (seconds): each read fetches the whole schema.
local REFRESH_MIN = 1

M.gateway = {
  summary = "a REST/JSON, gRPC-Web and Connect gateway in front of a gRPC server",
  flags = common.with_connect(common.with_schema { listen = "string", rules = "string", header = "list",
    validate = "bool", timeout = "number", unbound = "bool", ["print-routes"] = "bool", ["listen-cert"] = "string",
    ["listen-key"] = "string", cors = "list", ["cors-expose"] = "list", refresh = "number" }),
  usage = "protocall gateway [-listen ADDR] [-proto FILE ... | -protoset FILE | -refresh SECONDS] [-rules FILE]\n" ..
          "       [-header NAME ...] [-timeout SECONDS] [-validate] [-unbound] [-print-routes]\n" ..
          "       [-cors ORIGIN ... [-cors-expose NAME ...]] [-listen-cert FILE -listen-key FILE]\n" ..
          "       [-plaintext | TLS flags] UPSTREAM",
  about = "Serves on ADDR (default 127.0.0.1:8080; port 0 picks a free one) the services of\n" ..
          "UPSTREAM (host:port, a URL, dns:, unix: or xds: as `protocall call` takes it):\n" ..
          "REST/JSON requests by the google.api.http annotations of the schema and the\n" ..
          "rules of -rules (a google.api.Service's http section as JSON: {\"rules\":\n" ..
          "[...]}), and gRPC, gRPC-Web and Connect calls, all forwarded to UPSTREAM as\n" ..
          "gRPC. The schema comes from -proto/-protoset, else from UPSTREAM's reflection\n" ..
          "service: read at start, then again every -refresh SECONDS (>= 1, default 60; 0:\n" ..
          "not again once read); a changed schema is served from then on (calls in flight\n" ..
          "end on the old one), and a read that fails or a schema whose rules do not\n" ..
          "compile keeps the current one, saying why on stderr. An UPSTREAM that cannot be\n" ..
          "reached at start is read again (1 s growing to 60 s) while calls are refused\n" ..
          "UNAVAILABLE (REST: 503); a bad -rules file (said at its LINE:COL) or any other\n" ..
          "error at start exits. With -proto/-protoset, services of the schema that\n" ..
          "UPSTREAM's reflection does not list (asked at start, 2 s at most) are warned of\n" ..
          "on stderr, the gateway serving on (no reflection, or no UPSTREAM then: no check).\n" ..
          "-header passes a request header on as metadata for REST requests (besides\n" ..
          "Authorization and Grpc-Metadata-*; REST only: gRPC, gRPC-Web and Connect pass\n" ..
          "every request header on as metadata, as their protocols make headers metadata,\n" ..
          "but the hop's own: Host, User-Agent, Accept*, Origin, Cookie, Sec-*, ...).\n" ..
          "-timeout is the deadline of every call forwarded, whatever its protocol: a REST\n" ..
          "request's (a shorter Grpc-Timeout wins), and a gRPC, gRPC-Web or Connect call's\n" ..
          "that comes without its own (one with grpc-timeout or Connect-Timeout-Ms keeps\n" ..
          "it); -validate refuses requests breaking their protovalidate rules before they\n" ..
          "reach UPSTREAM, whatever the protocol (REST: 400; gRPC, gRPC-Web, Connect:\n" ..
          "INVALID_ARGUMENT; each with a google.rpc.BadRequest detail; a stream's requests\n" ..
          "each as read); -unbound serves methods without a rule as POST\n" ..
          "/pkg.Service/Method (body \"*\"; the gateway's own reflection services left out,\n" ..
          "the upstream's others, grpc.health.v1.Health too, served). That path is also\n" ..
          "Connect's: a POST there of application/json is a Connect unary call for a unary\n" ..
          "method (Connect's error JSON, every request header passed on), and goes to the\n" ..
          "REST route for a streaming method, which Connect's unary protocol cannot call;\n" ..
          "one of no RPC content type (none, text/plain) is REST's.\n" ..
          "-cors lets browser pages of ORIGIN (scheme://host[:port],\n" ..
          "or *) call it (pc.listen's cors option: preflights and CORS headers on every\n" ..
          "protocol's answers; a preflight allows the REST rules' methods, Authorization,\n" ..
          "the -header names and Grpc-Metadata-*); -cors-expose NAME lets their scripts\n" ..
          "read the upstream's metadata NAME too, exposed as each protocol carries it:\n" ..
          "NAME (gRPC-Web, Connect), Trailer-NAME (a Connect unary trailer),\n" ..
          "Grpc-Metadata-NAME and Grpc-Trailer-NAME (REST); a NAME given with one of\n" ..
          "those prefixes, or *, is exposed as given (cors.expose). A client\n" ..
          "that goes away cancels its upstream call. It serves the reflection service\n" ..
          "itself, from the schema: the upstream's descriptors as they are, whose\n" ..
          "google.api.http options (what `protocall describe` shows) -rules may replace;\n" ..
          "-print-routes prints the REST routes served on stderr (each with its rule's\n" ..
          "source), at start and whenever a changed schema is served.\n" ..
          "-listen-cert/-listen-key: TLS on ADDR. Prints `listening on HOST:PORT` to stderr\n" ..
          "and serves until stopped.",
  example = "protocall gateway -listen :8080 -plaintext -proto library.proto 127.0.0.1:50051",
}

-- Request metadata a proxied gRPC/Web/Connect call does not pass on: the
-- HTTP hop's own headers (the client sets its own).
local HOP = {
  ["user-agent"] = true, accept = true, ["accept-encoding"] = true, ["accept-language"] = true,
  host = true, origin = true, referer = true, ["x-grpc-web"] = true, ["x-user-agent"] = true,
  ["content-length"] = true, connection = true, ["keep-alive"] = true, cookie = true,
}

--- md = forwarded(metadata): the request metadata passed on upstream.
local function forwarded(md)
  local out = {}
  for _, kv in ipairs(md or {}) do
    local k = kv[1]
    if not HOP[k] and k:sub(1, 5) ~= "grpc-" and k:sub(1, 4) ~= "sec-" and not metadata_problem({ kv }, 0, 0) then
      out[#out + 1] = kv
    end
  end
  return out
end
M.forwarded = forwarded

-- Sets the upstream's response headers and trailers on `ctx` (those a
-- call may carry; reserved ones are the engine's).
local function pass_back(ctx, headers, trailers)
  for pass, list in ipairs { headers or {}, trailers or {} } do
    for _, kv in ipairs(list) do
      local k = kv[1]
      if k:sub(1, 5) ~= "grpc-" and k ~= "content-type" and k ~= "content-length" and k ~= "date" and k ~= "server" then
        pcall(pass == 1 and ctx.set_header or ctx.set_trailer, ctx, k, kv[2])
      end
    end
  end
end

-- The client channel's reconnection backoff hint in `text` as true for
-- the gateway: its calls (and reads of the schema) fail at once until the
-- next attempt.
local function gateway_hint(text)
  return common.backoff_hint(text, "; calls fail at once until then)")
end

-- `err` without the client channel's reconnection backoff hint (the
-- gateway's reads come on its own schedule).
local function without_hint(err)
  return (tostring(err):gsub(" %(reconnection backoff: [^)]*%)", ""))
end

-- Seconds within which one failure of upstream calls of a method is logged once.
local FAILURE_QUIET = 10
-- method and failure (without_hint) -> when it was last logged; emptied past FAILURE_KEPT entries
local failures_said, failures_kept = {}, 0
local FAILURE_KEPT = 64

-- Logs on stderr the failure `err` (a pc.Error) the gateway's channel
-- gave the upstream call of method `method`, which its client is told
-- without the upstream's address: once for the calls of that method
-- failing so within FAILURE_QUIET seconds (the backoff hint's figure
-- aside), so that a flood of calls is one line a method, each failing
-- method named; a TLS handshake a plaintext upstream answered gets
-- print_error's hint line (add -plaintext) after it.
local function log_failure(method, err)
  local key, t = tostring(method) .. " " .. without_hint(err.message), now()
  local last = failures_said[key]
  if last and t - last < FAILURE_QUIET then return end
  if not last then
    failures_kept = failures_kept + 1
    if failures_kept > FAILURE_KEPT then failures_said, failures_kept = {}, 1 end
  end
  failures_said[key] = t
  local hint = common.plaintext_hint(err.message) -- (a TLS handshake: the channel has no -plaintext)
  stderr:write(format("protocall gateway: upstream call %s failed: %s: %s\n%s", tostring(method), err.code,
    gateway_hint(err.message), hint and "  " .. hint .. "\n" or ""))
  stderr:flush()
end

-- pc.listen's `log`: an error of the gateway's own forwarding code (not a
-- status: its client gets UNKNOWN without the text) on stderr, with its
-- traceback.
local function log_handler_error(text)
  stderr:write("protocall gateway: ", text, "\n")
  stderr:flush()
end

-- The upstream's failure as the gateway's: a pc.Error keeps its code,
-- message and details, its trailers becoming the gateway's; one the
-- gateway's channel gave (no connection, a connection lost: not a status
-- the upstream sent) says its class alone, without the upstream's
-- address (web.upstream_failure; the backoff hint's timing kept), the
-- whole message going to stderr (log_failure).
local function relay_error(ctx, err)
  if getmetatable(err) == pc.Error then
    pass_back(ctx, err.headers, err.metadata)
    err.metadata = nil
    local text = upstream_failure(err)
    if text then
      log_failure(ctx.method, err)
      err.message = text
    end
  end
  error(err, 0)
end

-- The upstream call's options for the call of `ctx`: its metadata passed
-- on, its deadline the time the downstream call has left (a call whose
-- deadline passed ends at once: no positive timeout is that short), or
-- `timeout` (-timeout's seconds, or nil) for a call that came without
-- one (a REST call has -timeout's already: the listener's `rest` option).
local function call_opts(ctx, timeout)
  local deadline = ctx.deadline
  if deadline then
    timeout = max(deadline - now(), 1e-6)
  elseif ctx.timeout then
    timeout = ctx.timeout
  end
  return { metadata = forwarded(ctx.metadata), timeout = timeout, with_metadata = true }
end

-- The handler forwarding method `m` to the upstream over `stub`, whose
-- transport carries JSON when `json` (Connect or gRPC-Web with codec
-- "json"), a call without a deadline of its own bounded by `timeout`
-- seconds (nil: not bounded).
local function forwarder(stub, m, json, timeout)
  local name = m.name
  if not m.client_streaming and not m.server_streaming then
    return function(req, ctx)
      local ok, resp, md = pcall(stub[name], stub, req, call_opts(ctx, timeout))
      if not ok then relay_error(ctx, resp) end
      pass_back(ctx, md.headers, md.trailers)
      return resp
    end
  elseif not m.client_streaming then
    return function(req, ctx)
      local call
      local ok, err = pcall(function()
        local it
        it, call = stub[name](stub, req, call_opts(ctx, timeout))
        local first = true
        for resp in it do
          if first then
            pass_back(ctx, call:headers(), nil)
            first = false
          end
          ctx.send(resp)
        end
        if first then pass_back(ctx, call:headers(), nil) end
        pass_back(ctx, nil, call:trailers())
      end)
      -- a downstream send that failed (the client went away) leaves the
      -- upstream stream running: closing it cancels it
      if call then call:close() end
      if not ok then relay_error(ctx, err) end
    end
  end
  -- Passes the client's requests on: a REST body's lines as the
  -- transcoder wrote their wire bytes (checked by its `validate` already),
  -- no message made per line; other protocols' requests (and any to a
  -- JSON upstream) as messages (with -validate, each checked as ctx.recv
  -- reads it: the server's `validate`).
  local function send_all(ctx, call)
    local recv_bytes = ctx.recv_bytes
    if recv_bytes and not json then
      while true do
        local bytes = recv_bytes()
        if bytes == nil then break end
        call:send_bytes(bytes)
      end
      return
    end
    while true do
      local req = ctx.recv()
      if req == nil then break end
      call:send(req)
    end
  end
  return function(ctx)
    local o = call_opts(ctx, timeout)
    o.with_metadata = nil
    local call = stub[name](stub, o)
    local up_err -- a bidirectional call's failure reading the client's requests
    local ok, result = pcall(function()
      if not m.server_streaming then
        send_all(ctx, call)
        local resp = call:close_and_recv()
        pass_back(ctx, call:headers(), call:trailers())
        return resp
      end
      -- bidirectional: the requests go up in a task of their own
      sched.spawn(function()
        local okU, e = pcall(function()
          send_all(ctx, call)
          call:close_send()
        end)
        if not okU then
          up_err = e
          call:cancel()
        end
      end)
      local first = true
      while true do
        local resp = call:recv()
        if first then
          pass_back(ctx, call:headers(), nil)
          first = false
        end
        if resp == nil then break end
        ctx.send(resp)
      end
      if up_err then error(up_err, 0) end
      pass_back(ctx, nil, call:trailers())
    end)
    call:close()
    -- a request refused (validate) or unreadable cancelled the upstream
    -- call: the client gets that failure, not the cancel it caused
    if not ok and up_err and getmetatable(result) == pc.Error and result.code == "CANCELLED" then
      result = up_err
    end
    if not ok then relay_error(ctx, result) end
    return result
  end
end

--- server = gateway_server(pool, transport, services [, validate [, timeout]]):
-- a pc.server of `services` (full names) of `pool` whose handlers forward
-- each call over `transport` (one without a deadline of its own with
-- `timeout` seconds, -timeout's), serving the reflection service itself from
-- `pool` (clients such as buf curl and protocall call find the schema
-- there), marked forwarding (rpc/server.lua): under pc.listen a call that
-- ends early cancels its upstream call. With `validate`, the server's
-- `validate = true`: a gRPC, gRPC-Web or Connect request breaking its
-- protovalidate rules is refused INVALID_ARGUMENT before it is forwarded
-- (REST's are checked by the listener's transcoder, whose `validate` the
-- server's then leaves alone).
function M.gateway_server(pool, transport, services, validate, timeout)
  local handlers = {}
  for _, sname in ipairs(services) do
    local info = pool:service(sname)
    local stub = pc.client(sname, { transport = transport, pool = pool })
    local h = {}
    for _, m in ipairs(info.methods) do h[m.name] = forwarder(stub, m, transport.json, timeout) end
    handlers[sname] = h
  end
  -- a downstream call that ends early (the client went away, its deadline
  -- passed, the listener shut it down) cancels the upstream call: pc.listen
  -- aborts the handler's task (rpc/server.lua's forwarding), whose waits on
  -- the upstream then cancel it
  return forwarding(pc.server(handlers, { pool = pool, reflection = true, validate = validate or nil }))
end

-- The services of the files of `pool` named `names`.
local function services_of(pool, names)
  local out, seen = {}, {}
  for _, n in ipairs(names) do
    for _, s in ipairs(pool:file(n).services) do
      if not seen[s] then
        seen[s] = true
        out[#out + 1] = s
      end
    end
  end
  return out
end

-- The services `services` (names) the gateway forwards, as its start and
-- refresh lines say them: counted and named as `protocall list` names
-- them, the reflection service left out (the upstream's is not forwarded:
-- the gateway answers reflection itself, v1 and v1alpha, which
-- `protocall list` on the gateway shows after them).
local function served(services)
  local names = { table.unpack(services) }
  sort(names) -- (as `protocall list -proto` sorts them)
  return format("%d service%s: %s; server reflection is the gateway's own", #names,
    #names == 1 and "" or "s", concat(names, ", "))
end

-- The upstream's schema through the reflection client `r`: {pool =,
-- services = (reflection itself left out), key = what the schema is made
-- of (the same answer makes the same key)}. Raises the failure.
local function reflect(r)
  local names = {}
  for _, s in ipairs(r.services()) do
    if not s:find("^grpc%.reflection%.") then
      r.symbol(s)
      names[#names + 1] = s
    end
  end
  local files, key, list = r.files(), { concat(names, "\0") }, {}
  for name in pairs(files) do list[#list + 1] = name end
  sort(list)
  for _, name in ipairs(list) do key[#key + 1] = #name .. ":" .. name .. #files[name] .. ":" .. files[name] end
  return { pool = r.pool, services = names, key = concat(key, "\0") }
end

-- The longest the check of the upstream's services (check_served) waits
-- for its reflection's answer, in seconds (-max-time when shorter).
local CHECK_SECONDS = 2
-- The most names of the upstream's services its warning lists.
local CHECK_LISTED = 20

-- Warns on stderr when the upstream (`target`: UPSTREAM as typed) lists
-- its services by reflection and some of `services` (those of
-- -proto/-protoset the gateway forwards) are not among them: every call
-- to those would fail. A task of its own (serving does not wait for it),
-- its read bounded by CHECK_SECONDS, over a connection of its own (a
-- failed attempt leaves the calls' channel without a reconnection
-- backoff); an upstream without reflection, not reachable or not
-- answering in time is not checked, and nothing is said, but for a TLS
-- handshake that a plaintext upstream answered (no -plaintext): that
-- warning and print_error's hint line (add -plaintext).
local function check_served(flags, target, services)
  local transport = common.connect(flags, target, "gateway")
  local opts = common.reflection_options(flags, "gateway")
  pc.spawn(function()
    opts.timeout = math.min(opts.timeout or CHECK_SECONDS, CHECK_SECONDS)
    local r = reflection.client(transport, opts)
    local ok, listed = pcall(r.services)
    r.close()
    transport:close()
    -- a TLS handshake a plaintext upstream answered: said now, not at the first call (the
    -- upstream may yet change: serving goes on)
    local hint = not ok and common.plaintext_hint(type(listed) == "table" and listed.message, flags)
    if hint then
      stderr:write(format("protocall gateway: warning: calls to the upstream %s will fail: %s\n  %s\n", shown(target),
        without_hint(listed.message), hint))
      stderr:flush()
    end
    if not ok then return end
    local have, missing, names = {}, {}, {}
    for i, s in ipairs(listed) do
      have[s] = true
      if i <= CHECK_LISTED then names[i] = shown(s) end
    end
    if #listed > CHECK_LISTED then names[#names + 1] = format("... (%d in all)", #listed) end
    for _, s in ipairs(services) do
      if not have[s] and not s:find("^grpc%.reflection%.") then missing[#missing + 1] = s end
    end
    if #missing == 0 then return end
    sort(missing)
    stderr:write(format("protocall gateway: warning: the upstream %s does not serve %s (its reflection lists: %s)\n",
      shown(target), concat(missing, ", "), #names > 0 and concat(names, ", ") or "no service"))
    stderr:flush()
  end)
end

-- The cors.expose list of the -cors-expose names `names` (nil: none),
-- and for each of its entries the name given: a name NAME of metadata
-- is exposed as each protocol carries it (NAME over gRPC-Web and
-- Connect, Trailer-NAME a Connect unary trailer, Grpc-Metadata-NAME and
-- Grpc-Trailer-NAME over REST); a name given with one of those prefixes,
-- and "*" (every header), is exposed as it is. Each name once, whatever
-- its case.
local CARRIED = { "trailer-", "grpc-metadata-", "grpc-trailer-" }
local function cors_expose(names)
  if not names then return nil, nil end
  local out, from, seen = {}, {}, {}
  local function add(name, given)
    if seen[name:lower()] then return end
    seen[name:lower()] = true
    from[#out + 1] = given
    out[#out + 1] = name
  end
  for _, name in ipairs(names) do
    local low, prefixed = name:lower(), false
    for _, p in ipairs(CARRIED) do prefixed = prefixed or low:sub(1, #p) == p end
    prefixed = prefixed or name == "*"
    add(name, name)
    if not prefixed then
      add("Trailer-" .. name, name)
      add("Grpc-Metadata-" .. name, name)
      add("Grpc-Trailer-" .. name, name)
    end
  end
  return out, from
end

-- Writes on stderr the REST routes of the transcoder `tc` (pc.listen's
-- listener.rest), one a line in the order served: the HTTP method, the
-- template, the method it calls and where its rule comes from (the
-- -rules file's rule N, the schema's google.api.http option, -unbound;
-- ", additional binding M" after it for a rule's additional binding);
-- "0 REST routes" alone when there is none.
local function print_routes(tc)
  local routes = tc:routes()
  local out = { #routes == 0 and "protocall gateway: 0 REST routes\n"
    or format("protocall gateway: %d REST route%s:\n", #routes, #routes == 1 and "" or "s") }
  for _, r in ipairs(routes) do
    local from = r.rule and format("-rules rule %d", r.rule) or r.unbound and "-unbound"
      or "google.api.http of the schema"
    if r.additional then from = format("%s, additional binding %d", from, r.additional) end
    out[#out + 1] = format("  %s %s -> %s (%s)\n", r.http_method, r.template, r.method, from)
  end
  stderr:write(concat(out))
  stderr:flush()
end

-- say(line) writes "protocall gateway: LINE" on stderr unless it is the
-- last line written but for its reconnection backoff's figure; say(nil)
-- forgets the last line.
local function sayer()
  local said
  return function(line)
    local same = line and without_hint(line)
    if same == said or line == nil then
      said = same
      return
    end
    said = same
    stderr:write("protocall gateway: ", line, "\n")
    stderr:flush()
  end
end

-- The failure `why` of the -rules file `rules` ({file =, text = its
-- bytes, bom = the bytes of a byte order mark the JSON read skipped, http
-- = the text read}) at the byte offset `at` of `rules.http`: that offset
-- as the file's line and byte column, from 1, before it ("-rules
-- 'FILE':2:5: http rules: $: ..."), as a compiler names a place; `why`
-- after "-rules 'FILE': " when `at` is nil.
local function placed(rules, at, why)
  if not at then return format("-rules '%s': %s", rules.file, why) end
  local before = rules.text:sub(1, at + rules.bom)
  local _, lines = before:gsub("\n", "")
  local col = #before - (before:match("^.*()\n") or 0) + 1
  return format("-rules '%s':%d:%d: %s", rules.file, lines + 1, col, why)
end

-- The JSON read's failure `why` of the -rules file `rules` (placed's) at
-- the place it ends with ("... at offset 7"), if any.
local function located(rules, why)
  local head, at = why:match("^(.*) at offset (%d+)$")
  return placed(rules, head and tonumber(at), head or why)
end

-- The byte offset in the -rules JSON text `http` of the member at `place`
-- (a JSON path of google.api.Http, http_rules.binding_problem's or
-- http_rules.compile's): under a google.api.Service's "http" member, else
-- at the top level; nil when it is not found.
local function offset_of(http, place)
  local in_service = { "http" }
  for i, step in ipairs(place) do in_service[i + 1] = step end
  return http_rules.value_offset(http, in_service) or http_rules.value_offset(http, place)
end

-- The failure `err` of pc.listen's rest option (pc.listen's or
-- listener:set_server's pc.HttpRuleError) as the gateway says it, and
-- whether it names a rule of the -rules file: a rule of the -rules file `rules`
-- (placed's; nil: none) at the file's line:col of the rule's member at
-- fault (its selector, body, response_body or pattern), as its JSON
-- errors are ("-rules 'FILE':3:17: http rules: rule 2: ..."); a
-- google.api.http annotation (the rule's method, where its .proto source
-- sets the option when known, an additional binding's number from 1) as
-- "google.api.http of pkg.S.M (x.proto:13:12), additional binding 2: GET
-- /v1/x: ..."; a route -unbound made (no annotation) as "-unbound route
-- of pkg.S.M: POST /pkg.S/M: ..."; else "rest: ...". nil for any other
-- error.
local function rules_error(err, rules)
  if getmetatable(err) ~= pc.HttpRuleError then return nil end
  if err.unbound and err.method then -- -unbound's own route, no annotation's
    return format("-unbound route of %s: %s: %s", err.method, err.pattern, err.problem), false
  end
  if err.method and not err.rule then
    return format("google.api.http of %s%s%s: %s: %s", err.method, err.line and format(" (%s:%d:%d)", err.file,
      err.line, err.column) or "", err.additional and format(", additional binding %d", err.additional) or "",
      err.pattern, err.problem), false
  end
  if not (rules and err.rule) then return "rest: " .. err.message, false end
  return placed(rules, err.path and offset_of(rules.http, err.path), err.message), true
end

-- Whether the failure `err` of a read means the upstream is not there
-- (yet): UNAVAILABLE from making the connection (channel.c's "connect to
-- HOST:PORT: why", refused, unreachable or timed out; "resolve NAME: why",
-- a DNS failure). A TLS handshake that fails ("TLS handshake with ...",
-- e.g. TLS against a plaintext port) or any other failure is not waited out.
local function unreachable_error(err)
  if getmetatable(err) ~= pc.Error or err.code ~= "UNAVAILABLE" then return false end
  local m = err.message or ""
  return m:sub(1, 11) == "connect to " or m:sub(1, 8) == "resolve "
end

-- What every call is answered while no schema was read (`err`: why, the
-- client channel's backoff hint left out, a failure of the gateway's
-- channel as its class without the upstream's address, which stderr has:
-- web.upstream_failure; `next_in`: seconds to the gateway's next read
-- after the last).
local function not_read(err, next_in)
  local text = upstream_failure(err)
  return pc.Error { code = "UNAVAILABLE", message = format("the upstream's schema is not read yet: %s; the gateway"
    .. " reads it again %.2g s after its last read", without_hint(text and err.code .. ": " .. text or err), next_in) }
end

-- Reads the upstream's schema again every `seconds` (a task of the
-- scheduler) and serves it on `listener` when it changed (`got`: the
-- schema served now); a read that fails or a schema that does not make a
-- server (no service, rules that do not compile) keeps the current one,
-- each said once on stderr. With `got` nil (the read at start found the
-- upstream down: `first`, the listener refusing every call UNAVAILABLE)
-- the reads come sooner, after 1 s and then 1.6 times longer each time up
-- to `seconds` (60 when 0), until one gives a schema, which is then served
-- with the REST option `rest` (`rules`: its -rules file, placed's).
local function refresh_task(flags, transport, listener, got, seconds, rest, rules, first)
  local opts = common.reflection_options(flags, "gateway")
  local say = sayer()
  local wait, channel_wait = 1, nil
  if first then say("reading the upstream's schema failed, trying again (calls fail UNAVAILABLE meanwhile): "
    .. without_hint(first)) end
  pc.spawn(function()
    while true do
      if got then
        if seconds == 0 then return end
        pc.sleep(seconds)
      else
        pc.sleep(channel_wait or wait)
        if not channel_wait then wait = math.min(wait * 1.6, seconds > 0 and seconds or 60) end
        channel_wait = nil
      end
      -- the client channel's reconnection backoff holding its next connection attempt
      -- back now: a read fails without trying (transport:next_attempt, seconds or nil)
      local held = not got and transport:next_attempt()
      local r = reflection.client(transport, opts)
      local ok, new = pcall(reflect, r)
      r.close()
      if not ok and got then
        say("reading the upstream's schema again failed, the current one stays: " .. gateway_hint(tostring(new)))
      elseif not ok then
        -- failed without trying (held): the next read comes just after the channel's next
        -- connection attempt is allowed, so that it tries
        channel_wait = held and transport:next_attempt()
        channel_wait = channel_wait and channel_wait + 0.05
        listener:refuse(not_read(new, channel_wait or wait))
        say("reading the upstream's schema failed, trying again (calls fail UNAVAILABLE meanwhile): "
          .. without_hint(new))
      elseif not got or new.key ~= got.key then
        local okS, err, server = #new.services > 0, "no service in the schema"
        if okS then
          okS, server = pcall(M.gateway_server, new.pool, transport, new.services, flags.validate,
            flags.timeout)
          if okS then
            okS, err = pcall(listener.set_server, listener, server, not got and rest or nil)
          else
            err = server -- (it said "no service in the schema" for any failure here)
          end
        end
        if okS then
          say(nil)
          say(format("the upstream's schema %s: serving it (%s)", got and "changed" or "read", served(new.services)))
          if flags["print-routes"] then print_routes(listener.rest) end
          got = new
        else
          -- rules that do not fit are the gateway's to fix, not the client's to wait out (nor
          -- to read: stderr has them); a schema with no service may yet get one
          local named, reworded = rules_error(err, rules)
          local misfit = named ~= nil
          named = named or tostring(err):gsub("^pc%.listen: ", "")
          if not got then
            listener:refuse(misfit and pc.Error { code = "INTERNAL",
              message = "gateway misconfigured: http rules do not fit the schema" }
              or pc.Error { code = "UNAVAILABLE", message = "the upstream's schema is not served: " .. named })
          end
          -- (the -rules file was read at start, once: a fixed file needs a restart)
          if reworded then
            named = named .. " (-rules is read at start: restart the gateway to take a fixed file)"
          end
          say((got and "the upstream's changed schema is not served, the current one stays: "
            or format("the upstream's schema is not served, calls fail %s meanwhile: ",
              misfit and "INTERNAL" or "UNAVAILABLE")) .. named)
        end
      else
        say(nil)
      end
    end
  end)
end

function M.gateway.run(flags, args)
  if #args < 1 then usage_error("gateway", "UPSTREAM expected") end
  if #args > 1 then usage_error("gateway", "unexpected argument '" .. args[2] .. "' (one UPSTREAM expected)") end
  for _, h in ipairs(flags.header or {}) do -- an HTTP field name is a token (RFC 9110 section 5.1)
    if not h:find("^[%w!#$%%&'*+%-.^_`|~]+$") then
      usage_error("gateway", "-header '" .. h:gsub("%c", "?") .. "': not a valid HTTP header name")
    end
  end
  -- (-H goes on the reflection calls: a bad one is a usage error now,
  -- not once a reflection task reads it, the gateway serving)
  common.metadata_of(flags, "gateway")
  if (flags["listen-cert"] == nil) ~= (flags["listen-key"] == nil) then
    usage_error("gateway", "-listen-cert and -listen-key go together")
  end
  if flags["cors-expose"] and not flags.cors then usage_error("gateway", "-cors-expose: with -cors") end
  local expose, expose_flag = cors_expose(flags["cors-expose"])
  common.no_fifo("-listen-cert", flags["listen-cert"])
  common.no_fifo("-listen-key", flags["listen-key"])
  local t = flags.timeout
  local bad = t ~= nil and seconds_problem("-timeout", t)
  if bad then usage_error("gateway", bad) end
  local refresh = flags.refresh
  if refresh ~= nil and common.has_schema(flags) then
    usage_error("gateway", "-refresh: for a schema from UPSTREAM's reflection, not with -proto/-protoset")
  end
  if refresh ~= nil and refresh > 0 and refresh < REFRESH_MIN then -- 1e-9 would re-read in a tight loop
    usage_error("gateway", format("-refresh: 0 (not again once read) or at least %d second expected, got %s",
      REFRESH_MIN, tostring(refresh)))
  end
  -- -rules checked as far as it goes without the schema (JSON, google.api.Http's
  -- shape, each rule's pattern and template); whether its selectors name methods,
  -- and its templates' variables fields, is known once the schema is read
  local rules
  if flags.rules then
    local text = common.read_input(flags.rules, "-rules")
    -- a leading UTF-8 byte order mark is skipped (RFC 8259 section 8.1 lets
    -- a parser ignore it); columns count bytes, its three too, as protoc
    -- counts them in a .proto file
    local bom = text:sub(1, 3) == "\239\187\191" and 3 or 0
    rules = { file = flags.rules, text = text, bom = bom, http = text:sub(bom + 1) }
    local http, why = http_rules.http_config(rules.http)
    if not http then fail(located(rules, why)) end
    -- a pattern or template wrong whatever the schema, at the file's line:col
    local place
    why, place = http_rules.binding_problem(http)
    if why then
      fail(placed(rules, offset_of(rules.http, place), why))
    end
  end
  local transport = common.connect(flags, args[1], "gateway")
  local pool, services, got, unreachable
  if common.has_schema(flags) then
    local names
    pool, names = common.load_schemas(flags)
    services = services_of(pool, names)
  else
    -- the upstream down (or slow) at start: serve anyway, refusing calls until a read answers
    local status
    got, status = common.with_reflection(flags, transport, function(r)
      local ok, res = pcall(reflect, r)
      if ok then return res end
      if unreachable_error(res) then
        unreachable = res
        return false
      end
      error(res, 0)
    end, nil, "gateway")
    if got then
      pool, services = got.pool, got.services
    elseif unreachable then
      got, services = nil, {}
    else
      return status
    end
  end
  if #services == 0 and not unreachable then fail("gateway: no service in the schema") end
  local rest = { validate = flags.validate or nil, timeout = t, unbound = flags.unbound or nil }
  if flags.header then
    rest.headers = { "authorization" }
    for _, h in ipairs(flags.header) do rest.headers[#rest.headers + 1] = h end
  end
  rest.http = rules and rules.http
  -- with the upstream unreachable, a server refusing every call until the schema is read (refresh_task)
  local okS, server = true, unreachable and pc.server({})
  if not unreachable then okS, server = pcall(M.gateway_server, pool, transport, services, flags.validate, t) end
  if not okS then fail(tostring(server)) end
  local addr = flags.listen or "127.0.0.1:8080"
  local ok, listener = pcall(pc.listen, server, addr, { rest = unreachable and {} or rest,
    cert_file = flags["listen-cert"], key_file = flags["listen-key"],
    cors = flags.cors and { origins = flags.cors, expose = expose } or nil, log = log_handler_error })
  if not ok then
    local n, why = tostring(listener):match("cors%.origins%[(%d+)%] (must be an origin .-), got ")
    if n then usage_error("gateway", format("-cors '%s': %s", flags.cors[tonumber(n)], why)) end
    n, why = tostring(listener):match("cors%.expose%[(%d+)%] (must be a header name), got ")
    if n then usage_error("gateway", format("-cors-expose '%s': %s", expose_flag[tonumber(n)], why)) end
    fail(rules_error(listener, rules)
      or common.listen_error(listener, { cert_file = "-listen-cert", key_file = "-listen-key" }))
  end
  if unreachable then listener:refuse(not_read(unreachable, 1)) end
  local host = addr:match("^(.*):%d+$") or "127.0.0.1"
  if host == "" then host = "0.0.0.0" end
  stderr:write(format("protocall gateway: listening on %s:%d, forwarding to %s (%s)\n", host,
    listener.port, args[1], unreachable and "the upstream's schema not read yet" or served(services)))
  stderr:flush()
  if flags["print-routes"] and not unreachable then print_routes(listener.rest) end
  pc.spawn(function() listener:serve() end)
  if common.has_schema(flags) then check_served(flags, args[1], services) end
  if unreachable or (refresh or 60) > 0 and got then
    refresh_task(flags, transport, listener, got, refresh or 60, rest, rules, unreachable)
  end
  pc.run()
  return 0
end

return M
