--[[
  What the page scripts share (page-1.lua reads one index, page-across-1.lua the own indexes of
  every scope of a bucket).
]]

-- byte order, as sorted sets compare members (Lua's < follows the server's collation locale)
local function bytesLess(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

-- The tool of the record of (scope, key) as stored (escaped), or nil when the record is gone: one
-- match over the value's first fields (record-codec.ts: the tool is the tenth line), no decoding.
local TOOL_PATTERN = "^2\n.\n[^\n]*\n[^\n]*\n[^\n]*\n[^\n]*\n[^\n]*\n[^\n]*\n[^\n]*\n([^\n]*)\n"
local function toolOfRecord(base, entryScope, entryKey)
  local value = redis.call("GET", recordKeyOf(base, entryScope, entryKey))
  if not value then return nil end
  return string.match(value, TOOL_PATTERN)
end

-- How many entries tied on `score` whose member is >= `member` a ZREVRANGEBYSCORE from `score`
-- down skips. Ties sit at consecutive ranks, members descending, so a binary search over those
-- ranks finds the first one after `member`, whether or not `member` itself is (still) in the index.
local function tiesToSkip(index, score, member)
  local above = redis.call("ZCOUNT", index, "(" .. score, "+inf")
  local lo, hi = 0, redis.call("ZCOUNT", index, score, score)
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    local m = redis.call("ZREVRANGE", index, above + mid, above + mid)[1]
    if bytesLess(m, member) then hi = mid else lo = mid + 1 end
  end
  return lo
end

-- A lex page's answer from its matches { score, member, createdAt text } (any order): newest first,
-- ties by member descending, at most `limit`; done unless more matched, else stopped at the last.
local function lexAnswer(found, limit)
  table.sort(found, function(a, b)
    if a[1] ~= b[1] then return a[1] > b[1] end
    return bytesLess(b[2], a[2])
  end)
  local out = { 1, "", "" }
  for i = 1, math.min(limit, #found) do
    out[#out + 1] = found[i][2]
    out[#out + 1] = found[i][3]
  end
  if #found > limit then out[1], out[2], out[3] = 0, found[limit][3], found[limit][2] end
  return out
end
