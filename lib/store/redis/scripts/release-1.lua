--[[
  Operator: deletes an inflight or stuck reservation.
  Input:
    KEYS[1] record hash
    ARGV[1] bucket base "{<prefix>:<bucket>}:"
  Output:
    { "ok" | "absent" | "not_inflight", record before (HGETALL pairs, empty when absent) }
]]
--- @include "keys"
--- @include "record"

local base = bucketBase(ARGV[1])
local current = redis.call("HGETALL", KEYS[1])
if #current == 0 then return { "absent", {} } end
local rec = hashToTable(current)
if rec.status ~= "inflight" then return { "not_inflight", current } end
removeFromIndexes(base, rec)
redis.call("DEL", KEYS[1])
return { "ok", current }
