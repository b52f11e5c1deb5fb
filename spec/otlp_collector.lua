-- An OpenTelemetry collector stand-in for spec/nginx_otlp_spec.lua and
-- bench/otlp_nginx_bench.lua, served by `protocall serve SCRIPT -- PROTOS
-- OUT [FAILS]`: opentelemetry.proto.collector.trace.v1.TraceService/Export
-- loaded from the folder PROTOS (opentelemetry-proto's files), appending
-- one line per span received to the file OUT: its trace id, span id and
-- name in hex. FAILS, a comma-separated list of status names, fails the first
-- Exports in that order before reading them, each failure a line "FAIL
-- CODE" in OUT (RESOURCE_EXHAUSTED with a google.rpc.RetryInfo of 0.2 s,
-- EXHAUSTED as RESOURCE_EXHAUSTED without it; "REJECT" answers a partial
-- success rejecting the batch's first span, which it does not record).
local pc = require "protocall"

local protos, out_path, fails = arg[1], arg[2], arg[3] or ""
assert(protos and out_path, "usage: protocall serve spec/otlp_collector.lua -- PROTOS OUT [FAILS]")
assert(pc.load_file("opentelemetry/proto/collector/trace/v1/trace_service.proto", { import_paths = { protos } }))
local Response = pc.type("opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse")
local RetryInfo = pc.type("google.rpc.RetryInfo")

local plan = {}
for code in fails:gmatch("[%u_]+") do plan[#plan + 1] = code end
local calls = 0
local out = assert(io.open(out_path, "ab"))

local function hex(s) return ("%02x"):rep(#s):format(s:byte(1, -1)) end

return {
  ["opentelemetry.proto.collector.trace.v1.TraceService"] = {
    Export = function(req)
      calls = calls + 1
      local fail = plan[calls]
      if fail and fail ~= "REJECT" then
        local details
        if fail == "RESOURCE_EXHAUSTED" then details = { RetryInfo { retry_delay = { nanos = 200000000 } } } end
        out:write("FAIL ", fail, "\n")
        out:flush()
        if fail == "EXHAUSTED" then fail = "RESOURCE_EXHAUSTED" end
        error(pc.Error { code = fail, message = "collector stand-in: planned failure " .. calls, details = details })
      end
      local lines, skip = {}, fail == "REJECT"
      for _, rs in pc.ipairs(req.resource_spans) do
        for _, ss in pc.ipairs(rs.scope_spans) do
          for _, s in pc.ipairs(ss.spans) do
            if skip then
              skip = false
            else
              lines[#lines + 1] = hex(s.trace_id) .. " " .. hex(s.span_id) .. " " .. hex(s.name) .. "\n"
            end
          end
        end
      end
      out:write(table.concat(lines))
      out:flush()
      if fail == "REJECT" then
        return Response { partial_success = { rejected_spans = 1, error_message = "first span rejected" } }
      end
      return Response {}
    end,
  },
}
