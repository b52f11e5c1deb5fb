--- Spec helper for Debian's protoc (from PATH): the FileDescriptorSet it
-- compiles for a file under core/schema/protos, with every import, for
-- specs that compare protocall's reading of a built-in file with protoc's.
local M = {}

--- The serialized FileDescriptorSet of `file` (a path under `root`,
-- default core/schema/protos; the built-in files are found after it), or
-- nil when protoc is absent or fails.
function M.set(file, root)
  local out = os.tmpname()
  local dirs = (root and "-I " .. root .. " " or "") .. "-I core/schema/protos"
  local ok = os.execute("protoc --include_imports " .. dirs .. " -o " .. out .. " " .. file
    .. " >/dev/null 2>&1")
  local f = io.open(out, "rb")
  local bytes = f and f:read("*a")
  if f then f:close() end
  os.remove(out)
  if ok and bytes and #bytes > 0 then return bytes end
end

return M
