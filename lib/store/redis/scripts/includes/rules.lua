--[[
  The state rules of lib/idempotency/transitions.ts, as the scripts apply them: change both
  together. lib/store/redis/scripts-follow-rules.test.ts runs random operations against both and
  requires the same answers. `rec` is a decoded record (record.lua), nil when there is none.
]]

-- decideBegin: nil when the caller reserves the key, otherwise the answer
-- ("replay" | "conflict" | "stuck" | "unknown" | "mismatch"). An expired record is replaced
-- whatever its fingerprint; otherwise a mismatch wins over the state. A stuck reservation is taken
-- over when the tool's policy says so or its service deduplicates (retryUnknown), an unknown one
-- only in the latter case.
local function beginAnswer(rec, fingerprint, nowMs, takeoverStuck, retryUnknown)
  if not rec or (rec.status == "done" and tonumber(rec.expiresAtMs) <= nowMs) then return nil end
  if rec.fingerprint ~= fingerprint then return "mismatch" end
  if rec.status == "done" then return "replay" end
  if rec.status == "unknown" then
    if retryUnknown then return nil end
    return "unknown"
  end
  if tonumber(rec.leaseUntilMs) > nowMs then return "conflict" end
  if takeoverStuck or retryUnknown then return nil end
  return "stuck"
end

-- holderRefusal: nil when the holder of `token` may change rec (inflight, a stuck one too: nobody
-- else holds its token); otherwise "absent" | "stale_token" (an unknown one: its holder gave up on it)
local function holderRefusal(rec, token)
  if not rec then return "absent" end
  if rec.status ~= "inflight" or rec.token ~= token then return "stale_token" end
  return nil
end

-- operatorRefusal: nil when an operator may release or resolve rec, otherwise "absent" |
-- "not_inflight" | "changed" | "running". Stuck and unknown records, and an inflight one whose lease
-- is still valid only when forced (its call may still complete); with an expected token (not ""),
-- only the reservation holding that token (the call the decision is about).
local function operatorRefusal(rec, nowMs, force, token)
  if not rec then return "absent" end
  if rec.status == "done" then return "not_inflight" end
  if token ~= "" and rec.token ~= token then return "changed" end
  if rec.status == "inflight" and not force and tonumber(rec.leaseUntilMs) > nowMs then return "running" end
  return nil
end

-- donePatch: done with a result (the holder's completion, an operator's resolve), no lease and no
-- unknown outcome left. The status itself changes with the record's indexes (changeStatus).
local function applyDone(rec, completedAtMs, expiresAtMs, resultStatus, resultBody, resultFinal)
  rec.leaseUntilMs, rec.unknownAtMs, rec.outcomeNote = "", "", ""
  rec.completedAtMs, rec.expiresAtMs = completedAtMs, expiresAtMs
  rec.resultStatus, rec.resultBody, rec.resultFinal = resultStatus, resultBody, resultFinal
end
