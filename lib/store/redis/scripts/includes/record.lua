--[[
  Record hashes and their index entries. A record's fields are strings; a null field is absent.
  Index members are "scope \n key"; lex members are "key \n scope \n createdAtMs".
]]
local function hashToTable(flat)
  local t = {}
  for i = 1, #flat, 2 do t[flat[i]] = flat[i + 1] end
  return t
end

-- The score of a record in its status indexes: inflight by leaseUntilMs (stuck once it passed),
-- unknown by unknownAtMs (held whatever the time), done by expiresAtMs (expired once it passed).
local function deadlineOf(rec)
  if rec.status == "inflight" then return rec.leaseUntilMs end
  if rec.status == "unknown" then return rec.unknownAtMs end
  return rec.expiresAtMs
end

local function removeFromIndexes(base, rec)
  local member = rec.scope .. "\n" .. rec.key
  redis.call("ZREM", statusIndexKey(base, rec.status), member)
  redis.call("ZREM", statusToolIndexKey(base, rec.status, rec.tool), member)
  redis.call("ZREM", statusScopeIndexKey(base, rec.status, rec.scope), member)
  redis.call("ZREM", createdIndexKey(base), member)
  redis.call("ZREM", toolIndexKey(base, rec.tool), member)
  redis.call("ZREM", scopeIndexKey(base, rec.scope), member)
  redis.call("ZREM", lexIndexKey(base), rec.key .. "\n" .. rec.scope .. "\n" .. rec.createdAtMs)
end

local function addToIndexes(base, rec)
  local member = rec.scope .. "\n" .. rec.key
  local deadline = deadlineOf(rec)
  redis.call("ZADD", statusIndexKey(base, rec.status), deadline, member)
  redis.call("ZADD", statusToolIndexKey(base, rec.status, rec.tool), deadline, member)
  redis.call("ZADD", statusScopeIndexKey(base, rec.status, rec.scope), deadline, member)
  redis.call("ZADD", createdIndexKey(base), rec.createdAtMs, member)
  redis.call("ZADD", toolIndexKey(base, rec.tool), rec.createdAtMs, member)
  redis.call("ZADD", scopeIndexKey(base, rec.scope), rec.createdAtMs, member)
  redis.call("ZADD", lexIndexKey(base), 0, rec.key .. "\n" .. rec.scope .. "\n" .. rec.createdAtMs)
end

-- A status change (inflight -> unknown -> done) moves the record between the status-keyed indexes only; the
-- indexes keyed by creation time (created, tool, scope, lex) do not change. Half the writes of a
-- full remove and add.
local function changeStatus(base, rec, status, deadline)
  local member = rec.scope .. "\n" .. rec.key
  redis.call("ZREM", statusIndexKey(base, rec.status), member)
  redis.call("ZREM", statusToolIndexKey(base, rec.status, rec.tool), member)
  redis.call("ZREM", statusScopeIndexKey(base, rec.status, rec.scope), member)
  redis.call("ZADD", statusIndexKey(base, status), deadline, member)
  redis.call("ZADD", statusToolIndexKey(base, status, rec.tool), deadline, member)
  redis.call("ZADD", statusScopeIndexKey(base, status, rec.scope), deadline, member)
  rec.status = status
end

-- Tells the processes waiting for this record (KeyStore.waitForChange) that it changed; `status`
-- is the new stored status or "absent". PUBLISH to a channel nobody listens on costs next to
-- nothing; on a cluster it is broadcast to every node, whose subscribers then read the record on
-- its master, where this script's writes are already applied.
local function announceChange(base, rec, status)
  redis.call("PUBLISH", changeChannelOf(base, rec.scope, rec.key), status)
end
