--[[
  Which records an operator's release or resolve may change: stuck and unknown ones, and an
  inflight one whose lease is still valid only when forced (its call may still complete).
]]
-- nil when the operator may act on rec, otherwise the refusal: "not_inflight" | "running"
local function operatorRefusal(rec, nowMs, force)
  if rec.status == "unknown" then return nil end
  if rec.status ~= "inflight" then return "not_inflight" end
  if not force and tonumber(rec.leaseUntilMs) > nowMs then return "running" end
  return nil
end
