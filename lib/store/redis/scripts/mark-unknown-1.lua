--[[
  The holder cannot tell whether its side effect happened: its reservation becomes "unknown" and
  holds the key until a probe or an operator decides. leaseUntilMs stays (when the call's lease
  ended); the record moves to the unknown status indexes, scored by unknownAtMs.
  Input:
    KEYS[1] record hash
    ARGV[1] bucket base "{<prefix>:<bucket>}:"
    ARGV[2] token
    ARGV[3] unknownAtMs
    ARGV[4] outcome note
  Output:
    { "ok" | "stale_token" | "absent", record (HGETALL pairs, empty when absent) }
    Like complete: refused unless the record is inflight (or stuck) under the token.
  Publishes "unknown" on the record's change channel when ok.
]]
--- @include "keys"
--- @include "record"

local base = bucketBase(ARGV[1])
local current = redis.call("HGETALL", KEYS[1])
if #current == 0 then return { "absent", {} } end
local rec = hashToTable(current)
if rec.status ~= "inflight" or rec.token ~= ARGV[2] then return { "stale_token", current } end

changeStatus(base, rec, "unknown", ARGV[3])
redis.call("HSET", KEYS[1], "status", "unknown", "unknownAtMs", ARGV[3], "outcomeNote", ARGV[4])
announceChange(base, rec, "unknown")
return { "ok", redis.call("HGETALL", KEYS[1]) }
