--[[
  Stores the result of the reservation held under a token.
  Input:
    KEYS[1] record hash
    ARGV[1] bucket base "{<prefix>:<bucket>}:"
    ARGV[2] token
    ARGV[3] completedAtMs
    ARGV[4] expiresAtMs
    ARGV[5] result status
    ARGV[6] result body
    ARGV[7] result final "1" | "0"
    ARGV[8] execution id to record instead of the reserving one ("" keeps it): restoring a result
  Output:
    { "ok" | "stale_token" | "absent", record (HGETALL pairs, empty when absent) }
    A stuck reservation may still be completed by its holder: nobody else holds the token. An
    unknown one may not (stale_token): its holder already gave up on it.
  Publishes "done" on the record's change channel when ok.
]]
--- @include "keys"
--- @include "record"

local base = bucketBase(ARGV[1])
local current = redis.call("HGETALL", KEYS[1])
if #current == 0 then return { "absent", {} } end
local rec = hashToTable(current)
if rec.status ~= "inflight" or rec.token ~= ARGV[2] then return { "stale_token", current } end

changeStatus(base, rec, "done", ARGV[4])
rec.completedAtMs = ARGV[3]
rec.expiresAtMs = ARGV[4]
rec.leaseUntilMs = nil
redis.call("HDEL", KEYS[1], "leaseUntilMs")
redis.call("HSET", KEYS[1], "status", "done", "completedAtMs", ARGV[3], "expiresAtMs", ARGV[4],
  "resultStatus", ARGV[5], "resultBody", ARGV[6], "resultFinal", ARGV[7])
if ARGV[8] and ARGV[8] ~= "" then redis.call("HSET", KEYS[1], "executionId", ARGV[8]) end
announceChange(base, rec, "done")
return { "ok", redis.call("HGETALL", KEYS[1]) }
