--[[
  Reserves a key, or answers with the record that prevents it.
  Input:
    KEYS[1] record hash
    KEYS[2] the bucket's last fencing token
    KEYS[3] the bucket's epoch: since when (ms) it holds data; set when absent (new or lost data)
    ARGV[1] bucket base "{<prefix>:<bucket>}:"
    ARGV[2] scope
    ARGV[3] key
    ARGV[4] tool
    ARGV[5] fingerprint
    ARGV[6] nowMs
    ARGV[7] leaseUntilMs
    ARGV[8] fallback "1" | "0"
    ARGV[9] session ("" when ARGV[10] is "0")
    ARGV[10] has session "1" | "0"
    ARGV[11] executionId
    ARGV[12] take over a stuck reservation "1" | "0"
    ARGV[13] bucket number
    ARGV[14] retry an unknown or stuck reservation (the tool's service deduplicates) "1" | "0"
  Output:
    { outcome, token, record (HGETALL pairs), takenOver (HGETALL pairs or empty), epochMs }
    outcome: "reserved" | "replay" | "conflict" | "stuck" | "unknown" | "mismatch"; token 0 unless
    reserved. An expired done record is replaced whatever its fingerprint; otherwise mismatch wins
    over state.
  Publishes "inflight" on the record's change channel when it replaces a record (expired, or
  taken over); a new record is not announced (nobody waits on a record that does not exist).
]]
--- @include "keys"
--- @include "record"

-- Tokens never fall below Redis' clock in microseconds, so they keep increasing after FLUSHALL,
-- and are congruent to the bucket mod 16, so two buckets never hand out the same token.
local function nextToken(tokenKey, bucket)
  local t = redis.call("TIME")
  local nowUs = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local last = tonumber(redis.call("GET", tokenKey) or "0")
  local token = math.max(last, nowUs) + 1
  token = token + ((bucket - token) % 16)
  redis.call("SET", tokenKey, string.format("%d", token))
  return token
end

local base = bucketBase(ARGV[1])
local nowMs = tonumber(ARGV[6])
-- A bucket without an epoch is new, or lost its data (flush, restart without persistence): from
-- now on it only knows records written since, and the caller consults the audit log for older ones.
local epoch = redis.call("GET", KEYS[3])
if not epoch then
  epoch = ARGV[6]
  redis.call("SET", KEYS[3], epoch)
end
local current = redis.call("HGETALL", KEYS[1])
local takenOver = {}
local replaced = nil

if #current > 0 then
  local rec = hashToTable(current)
  local expired = rec.status == "done" and tonumber(rec.expiresAtMs) <= nowMs
  if not expired then
    if rec.fingerprint ~= ARGV[5] then return { "mismatch", 0, current, {}, epoch } end
    if rec.status == "done" then return { "replay", 0, current, {}, epoch } end
    local retryUnknown = ARGV[14] == "1"
    if rec.status == "unknown" then
      if not retryUnknown then return { "unknown", 0, current, {}, epoch } end
    else
      if tonumber(rec.leaseUntilMs) > nowMs then return { "conflict", 0, current, {}, epoch } end
      if ARGV[12] ~= "1" and not retryUnknown then return { "stuck", 0, current, {}, epoch } end
    end
    takenOver = current
  end
  removeFromIndexes(base, rec)
  redis.call("DEL", KEYS[1])
  replaced = rec
end

local token = nextToken(KEYS[2], tonumber(ARGV[13]))
local fresh = {
  scope = ARGV[2], key = ARGV[3], tool = ARGV[4], fingerprint = ARGV[5], status = "inflight",
  token = string.format("%d", token), createdAtMs = ARGV[6], leaseUntilMs = ARGV[7],
  fallback = ARGV[8], executionId = ARGV[11],
}
if ARGV[10] == "1" then fresh.session = ARGV[9] end
local fields = {}
for name, value in pairs(fresh) do
  fields[#fields + 1] = name
  fields[#fields + 1] = value
end
redis.call("HSET", KEYS[1], unpack(fields))
addToIndexes(base, fresh)
if replaced then announceChange(base, replaced, "inflight") end
return { "reserved", token, fields, takenOver, epoch }
