--[[
  Counts one bucket's records of one stored status across every scope the bucket lists, split at
  a time: the entries scored after it and those scored up to it (each scope's status index is
  scored by the status' deadline). Without a tool filter, a ZCOUNT per scope; with one, every
  entry's record is read: for counts by tool, which no console page asks for (unknown records by
  tool are counted from their tool's index instead).
  Input:
    KEYS[1] the bucket's scopes (KeySpace.scopes)
    ARGV[1] bucket base "{<prefix>:<bucket>}:"
    ARGV[2] nowMs
    ARGV[3] stored status: inflight | unknown | done
    ARGV[4] tool filter (escaped), "" for none
  Output:
    { entries scored after nowMs, entries scored up to nowMs }
]]
--- @include "keys"
--- @include "record"

local base = bucketBase(ARGV[1])
local now = ARGV[2]
local nowMs = tonumber(now)
local status, tool = ARGV[3], ARGV[4]
local future, past = 0, 0
for _, scope in ipairs(redis.call("ZRANGE", KEYS[1], 0, -1)) do
  local index = scopeStatusIndexKey(base, scope, status)
  if tool == "" then
    future = future + redis.call("ZCOUNT", index, "(" .. now, "+inf")
    past = past + redis.call("ZCOUNT", index, "-inf", now)
  else
    local offset = 0
    while true do
      local batch = redis.call("ZRANGE", index, offset, offset + 999, "WITHSCORES")
      for i = 1, #batch, 2 do
        local member = batch[i]
        -- "key", or "scope \n key" as an earlier version wrote it
        local nl = string.find(member, "\n", 1, true)
        local entryScope, entryKey = scope, member
        if nl then entryScope, entryKey = string.sub(member, 1, nl - 1), string.sub(member, nl + 1) end
        if entryScope == scope then
          local rec = decodeRecord(redis.call("GET", recordKeyOf(base, scope, entryKey)))
          if rec ~= nil and rec.tool == tool then
            if tonumber(batch[i + 1]) > nowMs then future = future + 1 else past = past + 1 end
          end
        end
      end
      if #batch < 2000 then break end
      offset = offset + 1000
    end
  end
end
return { future, past }
