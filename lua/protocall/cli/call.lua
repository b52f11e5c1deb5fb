--- `protocall call`: a gRPC call of any shape, JSON or text in and out,
-- with the schema from files or the server's reflection service.
local pc = require "protocall"
local common = require "protocall.cli.common"
local service_config = require "protocall.rpc.service_config"
local proto_print = require "protocall.schema.print"

local pairs, ipairs, tostring, pcall, getmetatable, setmetatable =
  pairs, ipairs, tostring, pcall, getmetatable, setmetatable
local format, concat = string.format, table.concat
local shown = require("protocall.internal").show
local stdout, stderr = common.stdout, common.stderr
local usage_error, fail, check_format, has_schema, load_schemas, write_message, json_documents =
  common.usage_error, common.fail, common.check_format, common.has_schema, common.load_schemas,
  common.write_message, common.json_documents
local metadata_of, print_error, connect, with_reflection = common.metadata_of, common.print_error,
  common.connect, common.with_reflection
local json_splitter = common.json_splitter
local core = require "protocall.core"
local read_ready, open_fifo, file_kind = core.read_ready, core.open_fifo, core.file_kind

local M = {}

--- Whether stderr is a terminal (progress lines of streams); cli/init.lua
-- sets it for each run.
M.terminal = false

M.call = {
  summary = "a gRPC call of any shape, JSON in and out",
  flags = common.with_schema {
    d = "string", H = "list", ["max-time"] = "number", ["retry-attempts"] = "number",
    gzip = "bool", plaintext = "bool", cacert = "string", format = "string",
    ["emit-defaults"] = "bool", v = "bool", cert = "string", key = "string",
    servername = "string", insecure = "bool", retry = "string", ["connect-timeout"] = "number",
    protocol = "string", get = "bool", http1 = "bool",
  },
  usage = "protocall call [schema flags] [-d JSON|@|@-|@FILE] [-H 'key: value']... [-max-time S]\n" ..
          "       [-connect-timeout S] [-retry-attempts N | -retry JSON] [-gzip] [-format json|text]\n" ..
          "       [-protocol grpc|grpcweb|connect [-get] [-http1]]\n" ..
          "       [-emit-defaults]\n" ..
          "       [-plaintext | [-cacert FILE | -insecure] [-cert FILE -key FILE] [-servername NAME]]\n" ..
          "       [-v] TARGET pkg.Service/Method",
  about = "Calls a method over gRPC, any call shape (TARGET is host:port, TLS unless\n" ..
          "-plaintext; a URL, http://host:port h2c and https://host:port TLS whatever\n" ..
          "-plaintext says; dns:///name:port, dns://IP:PORT/name:port, ipv4:/ipv6: lists,\n" ..
          "unix:/path, unix-abstract:name and xds:///name with -plaintext, as pc.grpc takes\n" ..
          "them). The request is JSON from -d (@ or @- reads standard input, @FILE a file or\n" ..
          "FIFO; none: an empty message); a client or bidirectional stream sends every\n" ..
          "JSON document of it (concatenated or one per line), from standard input or a\n" ..
          "FIFO or pipe each one as soon as it is whole, the call started (the sending side\n" ..
          "closes at its end; a file is read first). Each response is printed as it\n" ..
          "arrives. Without schema flags the schema comes from TARGET's server reflection\n" ..
          "service. Exits 0 on OK, otherwise 64 + the status code, with `ERROR: code = ...,\n" ..
          "message = ...` on stderr. TLS: -cacert verifies the server against FILE (default:\n" ..
          "the system store), -cert/-key give a client certificate, -servername the name to\n" ..
          "verify and send, -insecure skips verification (test servers only). -retry takes a\n" ..
          "service config retryPolicy,\n" ..
          "every field required ({\"maxAttempts\": 3, \"initialBackoff\": \"0.1s\",\n" ..
          "\"maxBackoff\": \"1s\", \"backoffMultiplier\": 2, \"retryableStatusCodes\":\n" ..
          "[\"UNAVAILABLE\"]}) or a whole service config. -v prints the response headers,\n" ..
          "trailers and timing to stderr.\n" ..
          "-max-time is the call's deadline (0: none, as without it), the wait for\n" ..
          "standard input (or a FIFO's or pipe's, -d @FIFO, its writer's coming too) included.\n" ..
          "-connect-timeout bounds connecting, TLS and the server's SETTINGS: UNAVAILABLE past it.\n" ..
          "-protocol picks the protocol over HTTP/2 (as buf curl's): grpc (the default),\n" ..
          "grpcweb (gRPC-Web) or connect (the Connect protocol); reflection then goes over it\n" ..
          "too. -get (with -protocol connect) sends a unary method marked idempotency_level =\n" ..
          "NO_SIDE_EFFECTS as Connect's GET. -http1 sends grpcweb and connect over HTTP/1.1\n" ..
          "instead (TLS: ALPN http/1.1): unary and server streaming calls, client streams\n" ..
          "sent as they are read (a chunked request body); it needs -proto or -protoset\n" ..
          "(reflection is a bidirectional stream, which needs HTTP/2).",
  example = "protocall call -plaintext -I examples -proto route.proto -retry-attempts 3 -d '{\"name\": \"r\"}' \\\n" ..
            "    127.0.0.1:50051 demo.Router/Measure\n" ..
            "  protocall call -plaintext -I examples -proto route.proto -d '{\"name\": \"s\"}' \\\n" ..
            "    -retry '{\"maxAttempts\": 3, \"initialBackoff\": \"0.1s\", \"maxBackoff\": \"1s\",\n" ..
            "    \"backoffMultiplier\": 2, \"retryableStatusCodes\": [\"UNAVAILABLE\"]}' \\\n" ..
            "    127.0.0.1:50051 demo.Router/Measure",
}

-- Metadata pairs as grpcurl prints them ("key: value", -bin values in
-- base64), or "(empty)".
local function print_pairs(title, pairs_list)
  stderr:write(title, "\n")
  if pairs_list == nil or #pairs_list == 0 then stderr:write("(empty)\n") end
  for _, kv in ipairs(pairs_list or {}) do
    local v = kv[2]
    if kv[1]:sub(-4) == "-bin" then
      v = pc.to_json(pc.type("google.protobuf.BytesValue") { value = v }):sub(2, -2)
    end
    stderr:write(kv[1], ": ", v, "\n")
  end
end

-- `transport` seen through: every call records where its response headers
-- and trailers are (for -v).
local function recording(transport, seen)
  return {
    unary = function(_, path, request, settings)
      local s = {}
      for k, v in pairs(settings or {}) do s[k] = v end
      s.with_metadata = true
      local bytes, md = transport:unary(path, request, s)
      seen.md = md
      return bytes
    end,
    server_stream = function(_, path, request, settings)
      local iter, state, ctl, call = transport:server_stream(path, request, settings)
      seen.md = nil
      seen.raw = call
      if call == nil then return iter, state, ctl end
      -- the loop closes the call at its end: its metadata is taken first
      local function close()
        if seen.raw == call then
          seen.md, seen.raw = call:metadata(), nil
        end
        call:close()
      end
      return iter, state, ctl, setmetatable({ close = close }, { __close = close })
    end,
    stream = function(_, path, settings)
      local call = transport:stream(path, settings)
      seen.md = nil
      seen.call = call
      return call
    end,
  }
end

-- The headers and trailers of the call `seen` recorded, or of the error.
local function seen_metadata(seen, err)
  if getmetatable(err) == pc.RetryError then err = err.cause end
  if getmetatable(err) == pc.Error and (err.headers or err.metadata) then
    return { headers = err.headers, trailers = err.metadata }
  end
  if seen.md then return seen.md end
  if seen.raw then return seen.raw:metadata() end
  if seen.call then return { headers = seen.call:headers(), trailers = seen.call:trailers() } end
  return {}
end

-- A -retry value, a retryPolicy object or a whole service config (with
-- "methodConfig"), as the service config table pc.client takes, and
-- whether it was a whole one. JSON errors name offsets in the flag's text.
local function retry_config(json)
  local ok, t = pcall(service_config.from_json, json)
  if not ok then
    fail("-retry: " .. (type(t) == "table" and t.service_config or tostring(t)))
  end
  if type(t) == "table" and t.methodConfig ~= nil then return t, true end
  return { methodConfig = { { name = { {} }, retryPolicy = t } } }, false
end

-- The services `method` ("pkg.Service/Method" or "pkg.Service.Method",
-- as given) may name, as no_method says them: "'t'" or
-- "'t' or 't.Nope'" (a name without '/' may be a whole service's).
local function service_names(service, method)
  local whole = method:gsub("^/", "")
  if whole:find("/", 1, true) then return "'" .. service .. "'" end
  return format("'%s' or '%s'", service, whole)
end

-- A pool of the server's files defining `service`, by reflection (or,
-- when the server has none, `whole`, the method argument as a symbol,
-- when it is one: a service the caller says so of, or what else it is),
-- and when it has neither, the server's services (for no_method); or nil
-- and the exit status.
local function reflection_pool(flags, transport, service, whole)
  local services
  local pool, status = with_reflection(flags, transport, function(r)
    local ok, err = pcall(r.symbol, service)
    if ok and r.pool:service(service) then return r.pool end
    -- (a server may know a package, "pkg" of "pkg.Service", as a symbol)
    if pcall(r.symbol, whole) then return r.pool end
    if not ok and not (getmetatable(err) == pc.Error and err.code == "NOT_FOUND") then error(err, 0) end
    services = r.services()
    return r.pool
  end, nil, "call")
  return pool, status, services
end

-- The names of the methods of the service `info` (pool:service's), in
-- order, as errors list them: "A, B", or "none".
local function method_names(info)
  local names = {}
  for i, m in ipairs(info.methods) do names[i] = m.name end
  return #names > 0 and concat(names, ", ") or "none"
end

-- Fails saying why `method` (split into `service` and `name`) names no
-- method of `pool`: what else its symbol is, or that no service of its
-- name is there, and which there are (`services`: the server's, by
-- reflection; nil: the pool's, of the schema flags: none when -protoset
-- files hold no file, an empty set).
local function no_method(pool, flags, service, method, services)
  local whole = method:gsub("^/", "")
  local syms = proto_print.symbols(proto_print.descriptors(pool, pool:files()))
  for _, sym in ipairs { (whole:gsub("/", ".")), service } do
    local s = syms[sym]
    if s then
      fail(format("'%s' is a%s %s, not a %s: pkg.Service/Method expected", sym, s.kind:find("^[aeiou]") and "n" or "",
        s.kind, sym == service and "service" or "method"))
    end
  end
  local names = services or proto_print.services_of(syms)
  local where = services and "on the server" or "in the schema"
  if #names > 0 then
    fail(format("no service %s %s (its services: %s)", service_names(service, method), where, concat(names, ", ")))
  end
  local sets = flags.protoset or {}
  local empty = not services and #sets > 0 and #pool:files() == 0
    and format(" (-protoset %s %s no file: %s)", concat(sets, ", "), #sets > 1 and "hold" or "holds",
      #sets > 1 and "empty descriptor sets" or "an empty descriptor set") or ""
  fail(format("no service %s %s: it has no service%s", service_names(service, method), where, empty))
end

-- How long the task reading a stream's standard input or FIFO sleeps when
-- nothing is there.
local INPUT_POLL = 0.01

-- A request document, read whole (-d @, -d @FILE) or each of a stream's,
-- is refused past this many bytes: gRPC's default maximum message size (a
-- server refuses a larger request RESOURCE_EXHAUSTED), which bounds a
-- REST body too (pc.listen's max_body_bytes), so that endless input (<
-- /dev/zero) fails instead of taking all memory.
local MAX_DOCUMENT = 4 * 1024 * 1024

local function too_big(what)
  fail(format("%s: the request document is over %d bytes (4 MiB, gRPC's default maximum message size)", what,
    MAX_DOCUMENT))
end

-- A json_splitter of a stream's requests from `what`, each document
-- bounded by MAX_DOCUMENT ("standard input at offset 8: the request
-- document is over ...").
local function request_splitter(what)
  return json_splitter(MAX_DOCUMENT, function(at) too_big(format("%s at offset %d", what, at)) end)
end

-- `doc`, a request document, as a message of type T, or nil and why: it
-- does not parse, or leaves a proto2 required field unset (which the stub
-- would not encode: said as bad input, not as the call's failure).
local function request_of(T, doc)
  local request, err = pc.from_json(T, doc)
  if request then
    local ok, why = pc.is_initialized(request)
    if not ok then return nil, why end
  end
  return request, err
end

-- The requests of a stream read from `source` (0: standard input; a FIFO
-- or pipe of open_fifo, -d @`path`), each JSON document (concatenated or
-- one per line) as soon as it is whole: next() -> a message of type T, or
-- nil at the end of the input or once stopped() (the call ended). Holds
-- the documents of one read (64 KiB) and the one it leaves open (4 MiB at
-- most), the sender's call:send waiting for the peer's window. Waits in
-- the task, the others running meanwhile (a FIFO no writer has opened
-- yet reads as an empty one); fails with "request N: why" ("-d @PATH:
-- request N: why" for a FIFO) for a document T does not take, naming
-- the source when a read fails, and as request_splitter does. Its second
-- result, open(), tells whether the input has not ended yet.
local function stream_requests(source, path, T, stopped)
  local what = path and "-d @" .. path or "standard input"
  local split, docs, k, count, eof = request_splitter(what), {}, 1, 0, false
  return function()
    while docs[k] == nil do
      if eof or stopped() then return nil end
      local chunk, why = read_ready(source)
      if why then fail(what .. ": " .. why) end
      if chunk == "" then
        pc.sleep(INPUT_POLL)
      else
        docs, k, eof = split(chunk), 1, chunk == nil
        -- (the other tasks' turn once per read: a bidi's responses print
        -- while an endless input flows, which call:send, waiting only for
        -- a closed window, would not leave them)
        pc.sleep(1e-6)
      end
    end
    local doc = docs[k]
    docs[k], k, count = nil, k + 1, count + 1
    local request, err = request_of(T, doc)
    if not request then fail(format("%srequest %d: %s", path and what .. ": " or "", count, err)) end
    return request
  end, function() return not eof end
end

-- What takes the request data of `what` read whole, chunk by chunk:
-- add(chunk), then add(nil) returns a client stream's (`stream`) list of
-- JSON documents, or the one document of another method; fails once a
-- document passes MAX_DOCUMENT bytes.
local function request_sink(what, stream)
  if stream then
    local split, docs = request_splitter(what), {}
    return function(chunk)
      for _, d in ipairs(split(chunk)) do docs[#docs + 1] = d end
      return chunk == nil and docs or nil
    end
  end
  local parts, size = {}, 0
  return function(chunk)
    if chunk == nil then return concat(parts) end
    size = size + #chunk
    if size > MAX_DOCUMENT then too_big(what) end
    parts[#parts + 1] = chunk
  end
end

-- `source` (0: standard input; a FIFO of open_fifo) read
-- whole into `add` (request_sink's) by `deadline` (pc.now()'s clock; nil:
-- none), waiting in poll(2) for each read (no other task runs: this is
-- before the call), checked after every read: add(nil), or nil when it
-- has not ended by then (-max-time of a call that reads one document);
-- fails naming `what` when a read does.
local function read_by(source, what, deadline, add)
  while true do
    local chunk, why = read_ready(source, nil, deadline and math.max(deadline - pc.now(), 0) or math.huge)
    if why then fail(what .. ": " .. why) end
    if chunk == nil then return add(nil) end
    add(chunk)
    if deadline and pc.now() >= deadline then return nil end
  end
end

-- What the FIFO `path` of -d @FIFO is called: a pipe when it is one by
-- its descriptor's name (bash's -d @<(cmd): /dev/fd/63), else a FIFO.
local function fifo_name(path)
  local pipe = path:find("^/dev/fd/%d+$") or path:find("^/proc/[%w]+/fd/%d+$")
  return (pipe and "pipe '" or "FIFO '") .. path .. "'"
end

-- The FIFO (or pipe: bash's -d @<(cmd)) `path` whole, by `deadline`, as
-- read_by reads it: its open waits for no writer, so -max-time bounds
-- the wait for one too.
local function fifo_by(path, deadline, add)
  local fifo, why = open_fifo(path)
  if not fifo then fail("-d @" .. path .. ": cannot be read: " .. why) end
  local ok, data = pcall(read_by, fifo, "-d @" .. path, deadline, add)
  fifo:close()
  if not ok then error(data, 0) end
  return data
end

-- File `path` whole, into `add`; fails as -cacert's file does ("-d
-- @x.json: cannot be read: No such file or directory").
local function file_by(path, add)
  local f, why = io.open(path, "rb")
  if not f then fail("-d @" .. path .. ": cannot be read: " .. common.io_reason(path, why)) end
  while true do
    local chunk, err = f:read(65536)
    if chunk == nil then
      f:close()
      if err then fail("-d @" .. path .. ": cannot be read: " .. common.io_reason(path, err)) end -- "Is a directory"
      return add(nil)
    end
    local ok, e = pcall(add, chunk)
    if not ok then
      f:close()
      error(e, 0)
    end
  end
end

-- Why the request document `doc` of the -d flag `d`, which pc.from_json
-- refused, is not one for method `m` (a unary or server-streaming one):
-- it is empty, or it is several documents; nil when it is one. (A file's
-- failure leads with "-d @FILE: ", which says where.)
local function one_document(doc, d, m)
  local ok, docs = pcall(json_documents, doc)
  if not ok or #docs == 1 then return nil end
  local stdin, file = d == "@" or d == "@-", d and d:sub(1, 1) == "@"
  if #docs == 0 then
    return format("the request document is empty%s: give a JSON object, {} for an empty message",
      stdin and " (standard input)" or file and "" or " (-d)")
  end
  return format("%s takes one request document (a %s method), %s holds %d", m.full_name,
    m.server_streaming and "server-streaming" or "unary", stdin and "standard input" or file and "it" or "-d", #docs)
end

function M.call.run(flags, args)
  local fmt = check_format("call", flags, { "json", "text" })
  if #args < 2 then usage_error("call", "TARGET and pkg.Service/Method expected") end
  if #args > 2 then
    usage_error("call", "unexpected argument '" .. args[3] .. "' (TARGET and pkg.Service/Method expected)")
  end
  local target, method = args[1], args[2]
  local service, name = method:match("^/?([%w_.]+)[/.]([%w_]+)$")
  if not service then usage_error("call", "method '" .. method .. "': pkg.Service/Method expected") end
  local metadata = metadata_of(flags, "call")
  -- -d @ with standard input closed (<&-): said now, before a connection
  -- made for the call takes descriptor 0 and is read as the input
  if (flags.d == "@" or flags.d == "@-") and select(3, io.stdin:seek("cur")) == 9 then -- EBADF
    fail("standard input: closed (Bad file descriptor)")
  end
  local pool, transport, services
  if has_schema(flags) then
    pool = load_schemas(flags)
  elseif flags.http1 then
    usage_error("call", "-http1 needs -proto or -protoset: server reflection is a bidirectional stream, "
      .. "which needs HTTP/2")
  else
    transport = connect(flags, target, "call")
    local status
    pool, status, services = reflection_pool(flags, transport, service, (method:gsub("^/", ""):gsub("/", ".")))
    if not pool then return status end
  end
  local info = pool:service(service)
  local whole = method:gsub("^/", "")
  local named = pool:service(whole)
  if not info and named then -- a service named, a method needed
    usage_error("call", format("'%s' is a service: pkg.Service/Method expected (its methods: %s)", whole,
      method_names(named)))
  end
  if not info then no_method(pool, flags, service, method, services) end
  local m = info.methods[name]
  if not m then fail(format("%s has no method '%s' (its methods: %s)", service, name, method_names(info))) end
  local data = flags.d
  local max_time = flags["max-time"] and flags["max-time"] > 0 and flags["max-time"] or nil -- 0: no limit
  local deadline = max_time and pc.now() + max_time
  -- A stream's requests from standard input or a FIFO (or pipe: bash's -d
  -- @<(cmd)) go as they come, the call started (stream_requests); the
  -- other shapes read their one document whole first, standard input and
  -- FIFOs by the -max-time deadline, and files are read whole (a regular
  -- file ends: its size is the disk's).
  local stdin = data == "@" or data == "@-"
  local at = not stdin and data and data:sub(1, 1) == "@" and data:sub(2) or nil
  local fifo_path = at and file_kind(at) == "fifo" and at or nil
  local streamed = m.client_streaming and (stdin or fifo_path ~= nil)
  -- a file's request failing names it ("-d @x.json: request: $.n: ...")
  local source = at and "-d " .. data .. ": " or nil
  if streamed then data = nil
  elseif stdin or fifo_path then
    local add = request_sink(fifo_path and "-d @" .. fifo_path or "standard input")
    if fifo_path then
      data = fifo_by(fifo_path, deadline, add)
    else
      data = read_by(0, "standard input", deadline, add)
    end
    if not data then
      stderr:write("ERROR: code = DEADLINE_EXCEEDED, message = deadline exceeded waiting for "
        .. (fifo_path and fifo_name(fifo_path) or "standard input") .. format(" (-max-time %g)\n", max_time))
      return 64 + pc.codes.DEADLINE_EXCEEDED
    end
  elseif at then
    data = file_by(at, request_sink("-d @" .. at, m.client_streaming))
  end
  -- A client stream sends every JSON document of the data (concatenated or
  -- one per line: a list once read from a file); the other shapes take one.
  if m.client_streaming and type(data) ~= "table" then data = json_documents(data or "") end
  local requests = {}
  for i, doc in ipairs(m.client_streaming and data or { data or "{}" }) do
    local request, err = request_of(m.input, doc)
    if err and not m.client_streaming then err = one_document(doc, flags.d, m) or err end
    if err then
      fail((source or "") .. "request" .. (m.client_streaming and format(" %d", i) or "") .. ": " .. tostring(err))
    end
    requests[i] = request
  end
  local request = requests[1]
  transport = transport or connect(flags, target, "call")
  local seen = {}
  if flags.v then transport = recording(transport, seen) end
  local opts = { transport = transport, pool = pool, metadata = metadata }
  -- (the call has what is left of -max-time once standard input is read)
  if deadline then opts.timeout = math.max(deadline - pc.now(), 0.001) end
  local attempts = flags["retry-attempts"]
  if attempts and (attempts ~= math.floor(attempts) or attempts < 1) then
    usage_error("call", "-retry-attempts: a whole number >= 1 expected, got " .. shown(attempts))
  end
  if attempts and attempts > 1 then opts.retry = pc.Retry { max_attempts = math.floor(attempts) } end
  local whole_config
  if flags.retry then
    if attempts then usage_error("call", "-retry and -retry-attempts exclude each other") end
    opts.service_config, whole_config = retry_config(flags.retry)
  end
  local okS, stub = pcall(pc.client, service, opts) -- its errors name no position here
  if not okS then -- a bad -retry policy, say: one line, without pc.client's prefix
    local msg = tostring(stub):gsub("^pc%.client: ", "")
    if flags.retry and not whole_config then
      msg = msg:gsub("^service_config: methodConfig%[0%]%.retryPolicy%.?", "-retry: ")
    end
    fail(msg)
  end
  -- (a stream's FIFO opens last before the call, closed after it whatever
  -- happens; it does not wait for a writer: -max-time bounds that wait too)
  local fifo
  if streamed and fifo_path then
    local why
    fifo, why = open_fifo(fifo_path)
    if not fifo then fail("-d @" .. fifo_path .. ": cannot be read: " .. why) end
  end
  local started = pc.now()
  local count = 0
  local function show(r)
    count = count + 1
    if M.terminal then stderr:write("\r\27[K") end -- the progress line off before the response
    if count > 1 and fmt == "text" then stdout:write("\n") end -- as decode -length-delimited
    write_message(r, fmt, flags, stdout)
    stdout:flush()
    if M.terminal then stderr:write(format("\r%d received, %.1f s ", count, pc.now() - started)) end
  end
  local input_open -- a streamed input's: whether it had not ended
  local okc, cerr = pcall(function()
    if m.client_streaming then -- one task sends while another prints or watches for the end
      local call = stub[name](stub)
      local failure, stop
      local function note(ok, e)
        if not ok and failure == nil then failure = e end
      end
      local next_request
      if streamed then
        next_request, input_open = stream_requests(fifo or 0, fifo_path, m.input, function() return stop end)
      else
        local i = 0
        next_request = function()
          i = i + 1
          return requests[i]
        end
      end
      pc.spawn(function()
        local ok, e = pcall(function()
          for r in next_request do call:send(r) end
          if m.server_streaming then call:close_send() else show(call:close_and_recv()) end
        end)
        if not ok then call:cancel() end -- a bad document: the server sees CANCELLED
        note(ok, e)
      end)
      if m.server_streaming then
        pc.spawn(function()
          note(pcall(function()
            for r in function() return call:recv() end do show(r) end
          end))
          stop = true
        end)
      elseif streamed then -- the call's end (its deadline) stops the reading
        pc.spawn(function()
          note(pcall(call.trailers, call))
          stop = true
        end)
      end
      pc.run()
      if failure ~= nil then error(failure, 0) end
      if M.terminal and m.server_streaming then stderr:write("\r\27[K") end
    elseif m.server_streaming then
      for r in stub[name](stub, request) do show(r) end
      if M.terminal then stderr:write("\r\27[K") end
    else
      write_message(stub[name](stub, request), fmt, flags, stdout)
      count = 1
    end
  end)
  if fifo then fifo:close() end
  if flags.v then
    local md = seen_metadata(seen, not okc and cerr or nil)
    print_pairs("Response headers received:", md.headers)
    stderr:write("\n")
    print_pairs("Response trailers received:", md.trailers)
    stderr:write(format("%d response message%s in %.3f s\n", count, count == 1 and "" or "s", pc.now() - started))
  end
  if not okc and getmetatable(cerr) == common.Failure then error(cerr, 0) end -- a bad request read
  -- (the deadline met while the stream's input had not ended: said as a
  -- unary call's wait for its one document says it)
  if not okc and input_open and input_open() and type(cerr) == "table" and cerr.code == "DEADLINE_EXCEEDED"
    and cerr.message == "deadline exceeded" then
    cerr.message = "deadline exceeded waiting for " .. (fifo_path and fifo_name(fifo_path) or "standard input")
      .. format(" (-max-time %g)", max_time)
  end
  if not okc then return print_error(cerr, flags) end
  return 0
end

return M
