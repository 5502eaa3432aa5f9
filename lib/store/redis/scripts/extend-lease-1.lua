--[[
  The holder's heartbeat: its inflight reservation is trusted until a later time, so a long call
  is not taken for a crashed one. The record stays inflight (a stuck one, whose lease passed but
  which nobody took over, is inflight again); its status index entries (the shared one and its scope's) are rescored by the new lease.
  Input:
    KEYS[1] record
    ARGV[1] bucket base "{<prefix>:<bucket>}:"
    ARGV[2] scope
    ARGV[3] key
    ARGV[4] token
    ARGV[5] leaseUntilMs
  Output:
    { "ok" | "stale_token" | "absent", record value (empty when absent) }
    Like complete: refused unless the record is inflight (or stuck) under the token.
]]
--- @include "keys"
--- @include "record"

local base = bucketBase(ARGV[1])
local scope, key = ARGV[2], ARGV[3]
local rec, refusal = heldRecord(KEYS[1], ARGV[4])
if refusal then return refusal end

rec.leaseUntilMs = ARGV[5]
local member = scope .. "\n" .. key
redis.call("ZADD", statusIndexKey(base, "inflight"), ARGV[5], member)
redis.call("ZADD", scopeStatusIndexKey(base, scope, "inflight"), ARGV[5], member)
local value = encodeRecord(rec)
redis.call("SET", KEYS[1], value)
return { "ok", value }
