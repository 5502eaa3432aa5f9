--[[
  Index key names, derived from the bucket base "{<prefix>:<bucket>}:".
  Mirrors lib/store/redis/key-names.ts (KeySpace); change both together.
]]
-- the scopes with records in the bucket (KeySpace.scopes), a sorted set
local function scopesKey(base) return base .. "scopes" end
-- unknown records only, members "scope \n key"; tool as stored (escaped)
local function unknownToolIndexKey(base, tool) return base .. "stt:unknown:" .. tool end
-- a scope's own indexes (KeySpace.scopeStatus, scopeCreated, scopeLex); members without the scope (record.lua)
local function scopeStatusIndexKey(base, scope, status) return base .. "s:" .. scope .. ":st:" .. status end
local function scopeCreatedIndexKey(base, scope) return base .. "s:" .. scope .. ":created" end
local function scopeLexIndexKey(base, scope) return base .. "s:" .. scope .. ":lx" end
local function recordKeyOf(base, scope, key) return base .. "r:" .. scope .. ":" .. key end
-- a pub/sub channel, not a key: see KeySpace.changeChannel
local function changeChannelOf(base, scope, key) return base .. "chg:" .. scope .. "\n" .. key end

--[[
  Redis Cluster. A script declares in KEYS only the keys its caller can name; the index keys above
  are derived here from the bucket base because which ones a call touches depends on the record's
  stored fields (tool, scope, status), which the caller cannot know before the script reads the
  record, and purge derives record keys from index members. This is safe on a cluster because:
  - the call is routed by its declared KEYS (ioredis: by the first), so it runs on the node that
    serves the bucket's slot;
  - every derived key starts with the base, and so carries the same hash tag "{<prefix>:<bucket>}"
    as every declared key: it is in the same slot, on the same node;
  - the server refuses a key served by another node ("Script attempted to access a non local
    key"), but not every version refuses an undeclared key in another slot of the same node
    (7.0 accepts it), which would then break when that slot moves. So bucketBase checks the
    premise itself, before anything is read or written: every declared key starts with the base
    the caller passed, and the base carries a hash tag.
  Limit: while an operator reshards a bucket's slot (MIGRATING), Redis checks only declared keys
  before running a script; an index key already moved makes the script fail midway (partial
  writes, no rollback). Declared keys would get TRYAGAIN instead. Reshard in a quiet period.
]]
local function bucketBase(base)
  if string.sub(base, 1, 1) ~= "{" or not string.find(base, "}", 2, true) then
    error(redis.error_reply("ERR idemgate: bucket base " .. base .. " carries no hash tag"))
  end
  for i = 1, #KEYS do
    if string.sub(KEYS[i], 1, #base) ~= base then
      error(redis.error_reply("ERR idemgate: key " .. KEYS[i] .. " lies outside bucket " .. base))
    end
  end
  return base
end
