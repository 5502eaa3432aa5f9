--[[
  Stores the result of the reservation held under a token.
  Input: KEYS[1] and ARGV[1..4] as every holder's change (includes/held.lua), then
    ARGV[5] completedAtMs
    ARGV[6] expiresAtMs
    ARGV[7] result status
    ARGV[8] result body
    ARGV[9] result final "1" | "0"
    ARGV[10] execution id (escaped) to record instead of the reserving one ("" keeps it): restoring a result
  Output: as every holder's change. A stuck reservation may still be completed by its holder:
    nobody else holds the token. An unknown one may not (stale_token): its holder already gave up on it.
  Publishes "done" on the record's change channel when ok.
]]
--- @include "keys"
--- @include "record"
--- @include "rules"
--- @include "held"

return changeHeld("done", ARGV[6], ARGV[10], function(rec) applyDone(rec, ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9]) end)
