--- Spec helper for Debian's protoc (from PATH): the FileDescriptorSet it
-- compiles for a file under core/schema/protos, with every import, for
-- specs that compare protocall's reading of a built-in file with protoc's.
local M = {}

--- The serialized FileDescriptorSet of `file` (a path under
-- core/schema/protos), or nil when protoc is absent or fails.
function M.set(file)
  local out = os.tmpname()
  local ok = os.execute("protoc --include_imports -I core/schema/protos -o " .. out .. " " .. file
    .. " >/dev/null 2>&1")
  local f = io.open(out, "rb")
  local bytes = f and f:read("*a")
  if f then f:close() end
  os.remove(out)
  if ok and bytes and #bytes > 0 then return bytes end
end

return M
