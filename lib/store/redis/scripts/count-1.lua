--[[
  Counts one bucket's entries of a status index that match a scope and/or tool filter, split at a
  time: the entries scored after it and those scored up to it. Reads every entry of the index
  (and, with a tool filter, its record): for filtered counts, which no console page asks for;
  unfiltered counts are ZCOUNTs.
  Input:
    KEYS[1] one of the bucket's shared status indexes (scored by deadline; members "scope \n key")
    ARGV[1] bucket base "{<prefix>:<bucket>}:"
    ARGV[2] nowMs
    ARGV[3] scope filter, "" for none
    ARGV[4] tool filter (escaped), "" for none
  Output:
    { entries scored after nowMs, entries scored up to nowMs }
]]
--- @include "keys"
--- @include "record"

local base = bucketBase(ARGV[1])
local nowMs = tonumber(ARGV[2])
local scope, tool = ARGV[3], ARGV[4]
local future, past = 0, 0
local offset = 0
while true do
  local batch = redis.call("ZRANGE", KEYS[1], offset, offset + 999, "WITHSCORES")
  for i = 1, #batch, 2 do
    local member = batch[i]
    local nl = string.find(member, "\n", 1, true)
    local entryScope = string.sub(member, 1, nl - 1)
    local match = scope == "" or entryScope == scope
    if match and tool ~= "" then
      local rec = decodeRecord(redis.call("GET", recordKeyOf(base, entryScope, string.sub(member, nl + 1))))
      match = rec ~= nil and rec.tool == tool
    end
    if match then
      if tonumber(batch[i + 1]) > nowMs then future = future + 1 else past = past + 1 end
    end
  end
  if #batch < 2000 then return { future, past } end
  offset = offset + 1000
end
