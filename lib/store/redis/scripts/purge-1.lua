--[[
  Deletes up to a batch of one scope's done records in one bucket that expired before a cutoff,
  with all their index entries.
  Input:
    KEYS[1] the scope's own done-status index (scored by expiresAtMs; members "key", or
            "scope \n key" as an earlier version wrote them)
    ARGV[1] bucket base "{<prefix>:<bucket>}:"
    ARGV[2] cutoff: records with expiresAtMs < cutoff go
    ARGV[3] batch size
    ARGV[4] the scope
  Output:
    number of index members removed (a batch-sized answer means: call again)
  Inflight and unknown records are never purged: only the done index is read.
  Publishes "absent" on the change channel of each record deleted.
]]
--- @include "keys"
--- @include "record"

local base = bucketBase(ARGV[1])
local members = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", "(" .. ARGV[2], "LIMIT", 0, tonumber(ARGV[3]))
for _, member in ipairs(members) do
  local nl = string.find(member, "\n", 1, true)
  local scope, key = ARGV[4], member
  if nl then scope, key = string.sub(member, 1, nl - 1), string.sub(member, nl + 1) end
  local recordKey = recordKeyOf(base, scope, key)
  local rec = scope == ARGV[4] and decodeRecord(redis.call("GET", recordKey))
  if rec and rec.status == "done" then
    removeFromIndexes(base, scope, key, rec)
    redis.call("DEL", recordKey)
    announceChange(base, scope, key, "absent")
  end
  -- a member without its done record (or naming another scope) is a leftover: drop it so purge
  -- cannot loop on it
  redis.call("ZREM", KEYS[1], member)
end
return #members
