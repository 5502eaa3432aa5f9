--[[
  The holder's change of its reservation: complete, mark unknown, extend the lease. Each of these
  scripts takes first
    KEYS[1] record
    ARGV[1] bucket base "{<prefix>:<bucket>}:"
    ARGV[2] scope
    ARGV[3] key
    ARGV[4] token
  and answers { "ok" | "stale_token" | "absent", record value (empty when absent) }: refused unless
  the record is inflight (or stuck) under the token (holderRefusal, rules.lua).
]]

-- The held record becomes `status`, scored `deadline` in its status indexes (a heartbeat stays
-- inflight, rescored by its new lease); `fill(rec)` sets the change's own fields; `executionId`
-- (escaped; "" keeps it) is the execution the record stands for from now on. A new status is
-- published on the record's change channel.
local function changeHeld(status, deadline, executionId, fill)
  local base = bucketBase(ARGV[1])
  local scope, key = ARGV[2], ARGV[3]
  local current = redis.call("GET", KEYS[1])
  local rec = decodeRecord(current)
  local refusal = holderRefusal(rec, ARGV[4])
  if refusal then return { refusal, current or "" } end
  local before = rec.status
  changeStatus(base, scope, key, rec, status, deadline)
  fill(rec)
  if executionId ~= "" then rec.executionId = executionId end
  local value = encodeRecord(rec)
  redis.call("SET", KEYS[1], value)
  if status ~= before then announceChange(base, scope, key, status) end
  return { "ok", value }
end
