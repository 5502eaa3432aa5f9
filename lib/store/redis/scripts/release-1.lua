--[[
  Operator: deletes a stuck or unknown reservation (an inflight one within its lease only when
  forced).
  Input:
    KEYS[1] record
    ARGV[1] bucket base "{<prefix>:<bucket>}:"
    ARGV[2] scope
    ARGV[3] key
    ARGV[4] nowMs
    ARGV[5] force "1" | "0"
    ARGV[6] the reservation's token the decision is about ("": whichever holds the key)
  Output:
    { "ok" | "absent" | "not_inflight" | "running" | "changed", record value before (empty when absent) }
  Publishes "absent" on the record's change channel when ok.
]]
--- @include "keys"
--- @include "record"
--- @include "rules"

local base = bucketBase(ARGV[1])
local current = redis.call("GET", KEYS[1])
local rec = decodeRecord(current)
local refusal = operatorRefusal(rec, tonumber(ARGV[4]), ARGV[5] == "1", ARGV[6])
if refusal then return { refusal, current or "" } end
deleteRecord(base, ARGV[2], ARGV[3], KEYS[1], rec)
return { "ok", current }
