--[[
  Operator: deletes a stuck or unknown reservation (an inflight one within its lease only when
  forced).
  Input:
    KEYS[1] record hash
    ARGV[1] bucket base "{<prefix>:<bucket>}:"
    ARGV[2] nowMs
    ARGV[3] force "1" | "0"
  Output:
    { "ok" | "absent" | "not_inflight" | "running", record before (HGETALL pairs, empty when absent) }
  Publishes "absent" on the record's change channel when ok.
]]
--- @include "keys"
--- @include "record"
--- @include "operator"

local base = bucketBase(ARGV[1])
local current = redis.call("HGETALL", KEYS[1])
if #current == 0 then return { "absent", {} } end
local rec = hashToTable(current)
local refusal = operatorRefusal(rec, tonumber(ARGV[2]), ARGV[3] == "1")
if refusal then return { refusal, current } end
removeFromIndexes(base, rec)
redis.call("DEL", KEYS[1])
announceChange(base, rec, "absent")
return { "ok", current }
