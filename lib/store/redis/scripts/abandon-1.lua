--[[
  The holder gives its reservation back (the tool said its side effect did not happen).
  Input:
    KEYS[1] record hash
    ARGV[1] bucket base "{<prefix>:<bucket>}:"
    ARGV[2] token
  Output:
    1 when deleted, 0 when the record is absent, unknown, done, or held under another token
  Publishes "absent" on the record's change channel when deleted.
]]
--- @include "keys"
--- @include "record"

local base = bucketBase(ARGV[1])
local current = redis.call("HGETALL", KEYS[1])
if #current == 0 then return 0 end
local rec = hashToTable(current)
if rec.status ~= "inflight" or rec.token ~= ARGV[2] then return 0 end
removeFromIndexes(base, rec)
redis.call("DEL", KEYS[1])
announceChange(base, rec, "absent")
return 1
