--[[
  `idemgate store rebuild-indexes`, one record at a time: a record in the hash encoding of earlier
  versions is rewritten in the current one (record-codec.ts), then the record is added to every
  index it belongs in, with members in the current form (includes/record.lua: a scope's own
  indexes without the scope); the caller has dropped the bucket's index keys before.
  Input:
    KEYS[1] record
    ARGV[1] bucket base "{<prefix>:<bucket>}:"
    ARGV[2] scope, ARGV[3] key: as named by the record's key (a hash record's own fields win)
  Output:
    1 when the record was rewritten, 0 when it was current already, -1 when it is gone
]]
--- @include "keys"
--- @include "record"

local base = bucketBase(ARGV[1])
local scope, key = ARGV[2], ARGV[3]
local kind = redis.call("TYPE", KEYS[1])["ok"]
if kind == "none" then return -1 end
local rewritten = 0
local rec
if kind == "hash" then
  local flat = redis.call("HGETALL", KEYS[1])
  local h = {}
  for i = 1, #flat, 2 do h[flat[i]] = flat[i + 1] end
  local function esc(text) return (string.gsub(string.gsub(text, "%%", "%%25"), "\n", "%%0A")) end
  local function optional(text) if text == nil then return "" end return "=" .. esc(text) end
  scope, key = h.scope or scope, h.key or key
  rec = {
    status = h.status, token = h.token, createdAtMs = h.createdAtMs, leaseUntilMs = h.leaseUntilMs,
    completedAtMs = h.completedAtMs, expiresAtMs = h.expiresAtMs, unknownAtMs = h.unknownAtMs,
    fallback = h.fallback or "0", tool = esc(h.tool), fingerprint = esc(h.fingerprint),
    executionId = esc(h.executionId or ""), session = optional(h.session), outcomeNote = optional(h.outcomeNote),
    resultStatus = h.resultStatus, resultFinal = h.resultStatus and (h.resultFinal or "0") or nil,
    resultBody = h.resultBody,
  }
  redis.call("DEL", KEYS[1])
  redis.call("SET", KEYS[1], encodeRecord(rec))
  rewritten = 1
else
  rec = decodeRecord(redis.call("GET", KEYS[1]))
end
addToIndexes(base, scope, key, rec)
return rewritten
