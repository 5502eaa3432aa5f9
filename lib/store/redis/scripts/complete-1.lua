--[[
  Stores the result of the reservation held under a token.
  Input:
    KEYS[1] record
    ARGV[1] bucket base "{<prefix>:<bucket>}:"
    ARGV[2] scope
    ARGV[3] key
    ARGV[4] token
    ARGV[5] completedAtMs
    ARGV[6] expiresAtMs
    ARGV[7] result status
    ARGV[8] result body
    ARGV[9] result final "1" | "0"
    ARGV[10] execution id (escaped) to record instead of the reserving one ("" keeps it): restoring a result
  Output:
    { "ok" | "stale_token" | "absent", record value (empty when absent) }
    A stuck reservation may still be completed by its holder: nobody else holds the token. An
    unknown one may not (stale_token): its holder already gave up on it.
  Publishes "done" on the record's change channel when ok.
]]
--- @include "keys"
--- @include "record"

local base = bucketBase(ARGV[1])
local scope, key = ARGV[2], ARGV[3]
local rec, refusal = heldRecord(KEYS[1], ARGV[4])
if refusal then return refusal end

changeStatus(base, scope, key, rec, "done", ARGV[6])
rec.completedAtMs = ARGV[5]
rec.expiresAtMs = ARGV[6]
rec.leaseUntilMs = ""
rec.resultStatus = ARGV[7]
rec.resultBody = ARGV[8]
rec.resultFinal = ARGV[9]
if ARGV[10] ~= "" then rec.executionId = ARGV[10] end
local value = encodeRecord(rec)
redis.call("SET", KEYS[1], value)
announceChange(base, scope, key, "done")
return { "ok", value }
