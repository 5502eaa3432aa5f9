--[[
  Operator: marks a stuck or unknown reservation (an inflight one within its lease only when
  forced) done with the result the operator supplies.
  Input:
    KEYS[1] record
    ARGV[1] bucket base "{<prefix>:<bucket>}:"
    ARGV[2] scope
    ARGV[3] key
    ARGV[4] nowMs: completedAtMs, and the time the lease is judged at
    ARGV[5] expiresAtMs
    ARGV[6] result status
    ARGV[7] result body
    ARGV[8] result final "1" | "0"
    ARGV[9] force "1" | "0"
    ARGV[10] the reservation's token the decision is about ("": whichever holds the key)
  Output:
    { "ok" | "absent" | "not_inflight" | "running" | "changed", record value before (empty when absent),
      record value after (empty unless ok) }
  Publishes "done" on the record's change channel when ok.
]]
--- @include "keys"
--- @include "record"
--- @include "rules"

local base = bucketBase(ARGV[1])
local scope, key = ARGV[2], ARGV[3]
local current = redis.call("GET", KEYS[1])
local rec = decodeRecord(current)
local refusal = operatorRefusal(rec, tonumber(ARGV[4]), ARGV[9] == "1", ARGV[10])
if refusal then return { refusal, current or "", "" } end
changeStatus(base, scope, key, rec, "done", ARGV[5])
applyDone(rec, ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8])
local value = encodeRecord(rec)
redis.call("SET", KEYS[1], value)
announceChange(base, scope, key, "done")
return { "ok", current, value }
