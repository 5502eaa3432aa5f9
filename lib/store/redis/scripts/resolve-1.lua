--[[
  Operator: marks an inflight or stuck reservation done with the result the operator supplies.
  Input:
    KEYS[1] record hash
    ARGV[1] bucket base "{<prefix>:<bucket>}:"
    ARGV[2] completedAtMs
    ARGV[3] expiresAtMs
    ARGV[4] result status
    ARGV[5] result body
    ARGV[6] result final "1" | "0"
  Output:
    { "ok" | "absent" | "not_inflight", record before (pairs, empty when absent), record after (pairs) }
]]
--- @include "keys"
--- @include "record"

local base = bucketBase(ARGV[1])
local current = redis.call("HGETALL", KEYS[1])
if #current == 0 then return { "absent", {}, {} } end
local rec = hashToTable(current)
if rec.status ~= "inflight" then return { "not_inflight", current, {} } end

changeStatus(base, rec, "done", ARGV[3])
rec.completedAtMs = ARGV[2]
rec.expiresAtMs = ARGV[3]
rec.leaseUntilMs = nil
redis.call("HDEL", KEYS[1], "leaseUntilMs")
redis.call("HSET", KEYS[1], "status", "done", "completedAtMs", ARGV[2], "expiresAtMs", ARGV[3],
  "resultStatus", ARGV[4], "resultBody", ARGV[5], "resultFinal", ARGV[6])
return { "ok", current, redis.call("HGETALL", KEYS[1]) }
