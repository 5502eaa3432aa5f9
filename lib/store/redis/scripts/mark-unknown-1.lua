--[[
  The holder cannot tell whether its side effect happened: its reservation becomes "unknown" and
  holds the key until a probe or an operator decides. leaseUntilMs stays (when the call's lease
  ended); the record moves to the unknown status indexes, scored by unknownAtMs.
  Input: KEYS[1] and ARGV[1..4] as every holder's change (includes/held.lua), then
    ARGV[5] unknownAtMs
    ARGV[6] outcome note ("=" + escaped text)
    ARGV[7] the execution the record stands for from now on (escaped; "": the reserving call's)
  Output: as every holder's change.
  Publishes "unknown" on the record's change channel when ok.
]]
--- @include "keys"
--- @include "record"
--- @include "rules"
--- @include "held"

return changeHeld("unknown", ARGV[5], ARGV[7], function(rec)
  rec.unknownAtMs = ARGV[5]
  rec.outcomeNote = ARGV[6]
end)
