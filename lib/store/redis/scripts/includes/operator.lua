--[[
  Which records an operator's release or resolve may change: stuck and unknown ones, and an
  inflight one whose lease is still valid only when forced (its call may still complete); with an
  expected token (not ""), only the reservation holding that token (the call the decision is about).
]]
-- nil when the operator may act on rec, otherwise the refusal: "changed" | "not_inflight" | "running"
local function operatorRefusal(rec, nowMs, force, token)
  if rec.status ~= "done" and token ~= "" and rec.token ~= token then return "changed" end
  if rec.status == "unknown" then return nil end
  if rec.status ~= "inflight" then return "not_inflight" end
  if not force and tonumber(rec.leaseUntilMs) > nowMs then return "running" end
  return nil
end
