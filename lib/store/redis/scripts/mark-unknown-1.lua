--[[
  The holder cannot tell whether its side effect happened: its reservation becomes "unknown" and
  holds the key until a probe or an operator decides. leaseUntilMs stays (when the call's lease
  ended); the record moves to the unknown status indexes, scored by unknownAtMs.
  Input:
    KEYS[1] record
    ARGV[1] bucket base "{<prefix>:<bucket>}:"
    ARGV[2] scope
    ARGV[3] key
    ARGV[4] token
    ARGV[5] unknownAtMs
    ARGV[6] outcome note ("=" + escaped text)
    ARGV[7] the execution the record stands for from now on (escaped; "": the reserving call's)
  Output:
    { "ok" | "stale_token" | "absent", record value (empty when absent) }
    Like complete: refused unless the record is inflight (or stuck) under the token.
  Publishes "unknown" on the record's change channel when ok.
]]
--- @include "keys"
--- @include "record"

local base = bucketBase(ARGV[1])
local scope, key = ARGV[2], ARGV[3]
local rec, refusal = heldRecord(KEYS[1], ARGV[4])
if refusal then return refusal end

changeStatus(base, scope, key, rec, "unknown", ARGV[5])
rec.unknownAtMs = ARGV[5]
rec.outcomeNote = ARGV[6]
if ARGV[7] ~= "" then rec.executionId = ARGV[7] end
local value = encodeRecord(rec)
redis.call("SET", KEYS[1], value)
announceChange(base, scope, key, "unknown")
return { "ok", value }
