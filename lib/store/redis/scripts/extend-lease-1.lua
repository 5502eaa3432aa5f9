--[[
  The holder's heartbeat: its inflight reservation is trusted until a later time, so a long call
  is not taken for a crashed one. The record stays inflight (a stuck one, whose lease passed but
  which nobody took over, is inflight again); its entry in its scope's status index is
  rescored by the new lease.
  Input: KEYS[1] and ARGV[1..4] as every holder's change (includes/held.lua), then
    ARGV[5] leaseUntilMs
  Output: as every holder's change.
]]
--- @include "keys"
--- @include "record"
--- @include "rules"
--- @include "held"

return changeHeld("inflight", ARGV[5], "", function(rec) rec.leaseUntilMs = ARGV[5] end)
