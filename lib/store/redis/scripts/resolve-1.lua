--[[
  Operator: marks a stuck or unknown reservation (an inflight one within its lease only when
  forced) done with the result the operator supplies.
  Input:
    KEYS[1] record hash
    ARGV[1] bucket base "{<prefix>:<bucket>}:"
    ARGV[2] nowMs: completedAtMs, and the time the lease is judged at
    ARGV[3] expiresAtMs
    ARGV[4] result status
    ARGV[5] result body
    ARGV[6] result final "1" | "0"
    ARGV[7] force "1" | "0"
  Output:
    { "ok" | "absent" | "not_inflight" | "running", record before (pairs, empty when absent),
      record after (pairs, empty unless ok) }
  Publishes "done" on the record's change channel when ok.
]]
--- @include "keys"
--- @include "record"
--- @include "operator"

local base = bucketBase(ARGV[1])
local current = redis.call("HGETALL", KEYS[1])
if #current == 0 then return { "absent", {}, {} } end
local rec = hashToTable(current)
local refusal = operatorRefusal(rec, tonumber(ARGV[2]), ARGV[7] == "1")
if refusal then return { refusal, current, {} } end

changeStatus(base, rec, "done", ARGV[3])
-- a done record keeps no lease and no unknown outcome
redis.call("HDEL", KEYS[1], "leaseUntilMs", "unknownAtMs", "outcomeNote")
redis.call("HSET", KEYS[1], "status", "done", "completedAtMs", ARGV[2], "expiresAtMs", ARGV[3],
  "resultStatus", ARGV[4], "resultBody", ARGV[5], "resultFinal", ARGV[6])
announceChange(base, rec, "done")
return { "ok", current, redis.call("HGETALL", KEYS[1]) }
