--- A first-in first-out queue of byte strings, counting the bytes it
-- holds: the read-ahead and send queues of a connection that
-- lua/protocall/resty.lua's owner ngx.timer shares with the requests.
--
-- The queue keeps explicit head and tail indices: once its first slots are
-- taken the table has holes at the front, where `#` may give any border
-- (0 among them), so `#` never decides where the next string goes or
-- whether the queue is empty.
local setmetatable, concat = setmetatable, table.concat

local Fifo = {}
Fifo.__index = Fifo

local M = {}

--- `fifo.new()` -> an empty queue: `q.bytes` is the number of bytes it
-- holds (read it, never set it).
function M.new()
  return setmetatable({ items = {}, head = 1, tail = 0, bytes = 0 }, Fifo)
end

--- `q:push(s)`: appends the string `s` (an empty one is not kept).
function Fifo:push(s)
  if #s == 0 then return end
  local tail = self.tail + 1
  self.items[tail] = s
  self.tail, self.bytes = tail, self.bytes + #s
end

--- `q:take(max)` -> the oldest bytes, at most `max` (>= 1) of them: the
-- first string whole when it has at most `max` bytes, else its first
-- `max` bytes (the rest stays first); nil when the queue is empty.
function Fifo:take(max)
  local head, items = self.head, self.items
  if head > self.tail then return nil end
  local s = items[head]
  if #s > max then
    items[head] = s:sub(max + 1)
    s = s:sub(1, max)
  else
    items[head] = nil
    if head == self.tail then
      self.head, self.tail = 1, 0 -- empty: the indices start over
    else
      self.head = head + 1
    end
  end
  self.bytes = self.bytes - #s
  return s
end

--- `q:take_all()` -> every byte held, in order, as one string ("" when
-- empty); the queue is empty afterwards.
function Fifo:take_all()
  local s = concat(self.items, "", self.head, self.tail)
  self.items, self.head, self.tail, self.bytes = {}, 1, 0, 0
  return s
end

return M
