--[[
  Records and their index entries. A record is one string value (lib/store/redis/record-codec.ts):
  "2", then the fields in the order of decodeRecord, joined by "\n", the result body last (raw). Scope and
  key are not stored in it: scripts get them as arguments, purge from index members.
  rec.status is the full word (inflight | unknown | done); the value holds its first letter.
  Each record is in its scope's own indexes (keys.lua: by status, created and key), whose members
  leave the scope out (it is in their names): "key", lex "key \n createdAtMs"; an unknown record
  also in its tool's unknown index, member "scope \n key". The bucket's scopes index names every
  scope that has a record in it (lists across scopes merge those), scored by the newest creation
  time it has had there. Earlier versions wrote the form
  "scope \n key" (lex "key \n scope \n createdAtMs") into a scope's own indexes too, and such
  entries remain until `idemgate store rebuild-indexes`: every removal from a scope's own index
  removes both forms (ZREM of both members), so no entry of either form outlives its record's
  status or the record.
]]
-- Every script runs this file's top level on each call: constants are literals, no tables built.
-- One string.match (in C) reads every field, far cheaper than a loop of finds and subs:
-- "^2\n(.)\n" then 14 times "([^\n]*)\n", then "(.*)$".
local RECORD_PATTERN = "^2\n(.)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n(.*)$"
local function statusWord(letter)
  if letter == "d" then return "done" elseif letter == "i" then return "inflight" elseif letter == "u" then return "unknown" end
  return nil
end

-- nil for an absent record (GET answered false)
local function decodeRecord(value)
  if not value then return nil end
  local status, token, createdAtMs, leaseUntilMs, completedAtMs, expiresAtMs, unknownAtMs, fallback, tool,
    fingerprint, executionId, session, outcomeNote, resultStatus, resultFinal, resultBody = string.match(value, RECORD_PATTERN)
  if not status or not statusWord(status) then
    error(redis.error_reply("ERR idemgate: a record in an encoding this version does not read; run `idemgate store rebuild-indexes`"))
  end
  return {
    status = statusWord(status), token = token, createdAtMs = createdAtMs, leaseUntilMs = leaseUntilMs,
    completedAtMs = completedAtMs, expiresAtMs = expiresAtMs, unknownAtMs = unknownAtMs, fallback = fallback,
    tool = tool, fingerprint = fingerprint, executionId = executionId, session = session, outcomeNote = outcomeNote,
    resultStatus = resultStatus, resultFinal = resultFinal, resultBody = resultBody,
  }
end

-- one concatenation expression: a single allocation of the value
local function encodeRecord(r)
  return "2\n" .. string.sub(r.status, 1, 1) .. "\n" .. r.token .. "\n" .. r.createdAtMs .. "\n" .. (r.leaseUntilMs or "") .. "\n" ..
    (r.completedAtMs or "") .. "\n" .. (r.expiresAtMs or "") .. "\n" .. (r.unknownAtMs or "") .. "\n" .. r.fallback .. "\n" ..
    r.tool .. "\n" .. r.fingerprint .. "\n" .. r.executionId .. "\n" .. (r.session or "") .. "\n" .. (r.outcomeNote or "") .. "\n" ..
    (r.resultStatus or "") .. "\n" .. (r.resultFinal or "") .. "\n" .. (r.resultBody or "")
end

-- The score of a record in its status indexes: inflight by leaseUntilMs (stuck once it passed),
-- unknown by unknownAtMs (held whatever the time), done by expiresAtMs (expired once it passed).
local function deadlineOf(rec)
  if rec.status == "inflight" then return rec.leaseUntilMs end
  if rec.status == "unknown" then return rec.unknownAtMs end
  return rec.expiresAtMs
end

-- Only unknown records are in a per-tool index (KeySpace.byUnknownTool).
local function hasToolIndex(status) return status == "unknown" end

local function removeFromIndexes(base, scope, key, rec)
  local member = scope .. "\n" .. key
  if hasToolIndex(rec.status) then redis.call("ZREM", unknownToolIndexKey(base, rec.tool), member) end
  -- the current form and the earlier one
  redis.call("ZREM", scopeStatusIndexKey(base, scope, rec.status), key, member)
  local created = scopeCreatedIndexKey(base, scope)
  redis.call("ZREM", created, key, member)
  redis.call("ZREM", scopeLexIndexKey(base, scope), key .. "\n" .. rec.createdAtMs, key .. "\n" .. scope .. "\n" .. rec.createdAtMs)
  -- the scope's last record in the bucket: lists across scopes need not read its indexes any more
  if redis.call("EXISTS", created) == 0 then redis.call("ZREM", scopesKey(base), scope) end
end

local function addToIndexes(base, scope, key, rec)
  local deadline = deadlineOf(rec)
  -- scored by the newest creation time the scope has had in the bucket: lists across scopes by
  -- creation time read no scope whose newest record is older than what they list (page-across-1.lua)
  redis.call("ZADD", scopesKey(base), "GT", rec.createdAtMs, scope)
  redis.call("ZADD", scopeStatusIndexKey(base, scope, rec.status), deadline, key)
  if hasToolIndex(rec.status) then redis.call("ZADD", unknownToolIndexKey(base, rec.tool), deadline, scope .. "\n" .. key) end
  redis.call("ZADD", scopeCreatedIndexKey(base, scope), rec.createdAtMs, key)
  redis.call("ZADD", scopeLexIndexKey(base, scope), 0, key .. "\n" .. rec.createdAtMs)
end

-- A status change (inflight -> unknown -> done) moves the record between the status-keyed indexes
-- only; the indexes keyed by creation time and key do not change.
local function changeStatus(base, scope, key, rec, status, deadline)
  local member = scope .. "\n" .. key
  if hasToolIndex(rec.status) then redis.call("ZREM", unknownToolIndexKey(base, rec.tool), member) end
  redis.call("ZREM", scopeStatusIndexKey(base, scope, rec.status), key, member)
  redis.call("ZADD", scopeStatusIndexKey(base, scope, status), deadline, key)
  if hasToolIndex(status) then redis.call("ZADD", unknownToolIndexKey(base, rec.tool), deadline, member) end
  rec.status = status
end

-- Tells the processes waiting for this record (KeyStore.waitForChange) that it changed; `status`
-- is the new stored status or "absent". PUBLISH to a channel nobody listens on costs next to
-- nothing; on a cluster it is broadcast to every node, whose subscribers then read the record on
-- its master, where this script's writes are already applied.
local function announceChange(base, scope, key, status)
  redis.call("PUBLISH", changeChannelOf(base, scope, key), status)
end

-- Deletes the record at `recordKey` (rec, decoded) with its index entries, and tells its waiters.
local function deleteRecord(base, scope, key, recordKey, rec)
  removeFromIndexes(base, scope, key, rec)
  redis.call("DEL", recordKey)
  announceChange(base, scope, key, "absent")
end
