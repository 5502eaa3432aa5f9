--[[
  Deletes up to a batch of done records of one bucket that expired before a cutoff, with all
  their index entries.
  Input:
    KEYS[1] the bucket's shared done-status index (scored by expiresAtMs; members "scope \n key")
    ARGV[1] bucket base "{<prefix>:<bucket>}:"
    ARGV[2] cutoff: records with expiresAtMs < cutoff go
    ARGV[3] batch size
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
  local scope, key = string.sub(member, 1, nl - 1), string.sub(member, nl + 1)
  local recordKey = recordKeyOf(base, scope, key)
  local rec = decodeRecord(redis.call("GET", recordKey))
  if rec and rec.status == "done" then
    removeFromIndexes(base, scope, key, rec)
    redis.call("DEL", recordKey)
    announceChange(base, scope, key, "absent")
  end
  -- a member without its done record is a leftover: drop it so purge cannot loop on it
  redis.call("ZREM", KEYS[1], member)
end
return #members
