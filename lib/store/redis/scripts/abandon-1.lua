--[[
  The holder gives its reservation back (the tool said its side effect did not happen).
  Input:
    KEYS[1] record
    ARGV[1] bucket base "{<prefix>:<bucket>}:"
    ARGV[2] scope
    ARGV[3] key
    ARGV[4] token
  Output:
    1 when deleted, 0 when the record is absent, unknown, done, or held under another token
  Publishes "absent" on the record's change channel when deleted.
]]
--- @include "keys"
--- @include "record"

local base = bucketBase(ARGV[1])
local scope, key = ARGV[2], ARGV[3]
local rec = decodeRecord(redis.call("GET", KEYS[1]))
if not rec then return 0 end
if rec.status ~= "inflight" or rec.token ~= ARGV[4] then return 0 end
removeFromIndexes(base, scope, key, rec)
redis.call("DEL", KEYS[1])
announceChange(base, scope, key, "absent")
return 1
