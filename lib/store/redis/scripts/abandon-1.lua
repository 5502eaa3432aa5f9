--[[
  The holder gives its reservation back (the tool said its side effect did not happen).
  Input: KEYS[1] and ARGV[1..4] as every holder's change (includes/held.lua).
  Output:
    1 when deleted, 0 when the record is absent, unknown, done, or held under another token
  Publishes "absent" on the record's change channel when deleted.
]]
--- @include "keys"
--- @include "record"
--- @include "rules"

local base = bucketBase(ARGV[1])
local rec = decodeRecord(redis.call("GET", KEYS[1]))
if holderRefusal(rec, ARGV[4]) then return 0 end
deleteRecord(base, ARGV[2], ARGV[3], KEYS[1], rec)
return 1
