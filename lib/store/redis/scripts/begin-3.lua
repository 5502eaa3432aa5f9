--[[
  Reserves a key, or answers with the record that prevents it.
  Input:
    KEYS[1] record
    KEYS[2] the bucket's last fencing token
    KEYS[3] the bucket's epoch: since when (ms) it holds data; set when absent (new or lost data)
    ARGV[1] bucket base "{<prefix>:<bucket>}:"
    ARGV[2] scope
    ARGV[3] key
    ARGV[4] tool (escaped)
    ARGV[5] fingerprint (escaped)
    ARGV[6] nowMs
    ARGV[7] leaseUntilMs
    ARGV[8] flags, one "1" | "0" each: fallback key; take over a stuck reservation; retry an unknown
            or stuck reservation (the tool's service deduplicates)
    ARGV[9] session ("" or "=" + escaped text)
    ARGV[10] executionId
    ARGV[11] bucket number
  Output:
    { outcome, token, record value, taken-over record value or "", epochMs or "" }
    outcome: "reserved" | "replay" | "conflict" | "stuck" | "unknown" | "mismatch"; token 0 and
    epochMs "" unless reserved. An expired done record is replaced whatever its fingerprint;
    otherwise mismatch wins over state.
  Publishes "inflight" on the record's change channel when it replaces a record (expired, or
  taken over); a new record is not announced (nobody waits on a record that does not exist).
]]

-- The replay, the commonest answer after a first execution, comes first: one GET and one match
-- over the value (record-codec.ts: status on line 2, expiresAtMs on line 7, fingerprint on line 11),
-- before anything else of this script is even defined. It writes nothing and names no other key.
local current = redis.call("GET", KEYS[1])
local nowMs = tonumber(ARGV[6])
if current then
  local status, expiresAtMs, fingerprint = string.match(current,
    "^2\n(.)\n[^\n]*\n[^\n]*\n[^\n]*\n[^\n]*\n([^\n]*)\n[^\n]*\n[^\n]*\n[^\n]*\n([^\n]*)\n")
  if status == "d" and fingerprint == ARGV[5] and tonumber(expiresAtMs) > nowMs then
    return { "replay", 0, current, "", "" }
  end
end

--- @include "keys"
--- @include "record"
--- @include "rules"

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
local scope, key = ARGV[2], ARGV[3]
local takenOver = ""
local replaced = nil

if current then
  local rec = decodeRecord(current)
  local answer = beginAnswer(rec, ARGV[5], nowMs, string.sub(ARGV[8], 2, 2) == "1", string.sub(ARGV[8], 3, 3) == "1")
  if answer then return { answer, 0, current, "", "" } end
  -- a stuck or unknown reservation is taken over; an expired record is only replaced
  if rec.status ~= "done" then takenOver = current end
  removeFromIndexes(base, scope, key, rec)
  replaced = rec
end

-- A bucket without an epoch is new, or lost its data (flush, restart without persistence): from
-- now on it only knows records written since, and the caller consults the audit log for older ones.
local epoch = redis.call("GET", KEYS[3])
if not epoch then
  epoch = ARGV[6]
  redis.call("SET", KEYS[3], epoch)
end

local token = string.format("%d", nextToken(KEYS[2], tonumber(ARGV[11])))
local fresh = {
  status = "inflight", token = token, createdAtMs = ARGV[6], leaseUntilMs = ARGV[7],
  fallback = string.sub(ARGV[8], 1, 1), tool = ARGV[4], fingerprint = ARGV[5], executionId = ARGV[10],
  session = ARGV[9],
}
local value = encodeRecord(fresh)
redis.call("SET", KEYS[1], value)
addToIndexes(base, scope, key, fresh)
if replaced then announceChange(base, scope, key, "inflight") end
return { "reserved", token, value, takenOver, epoch }
