--[[
  Reads one bucket's part of a list page, newest (highest score) first, ties by member descending,
  filtering by key prefix and tool while reading, within a budget of examined entries.
  Input:
    KEYS[1] index: a scored index (mode "score") or a lex index (mode "lex")
    ARGV[1] mode "score" | "lex"
    ARGV[2] score mode: max score ("+inf", "n" or "(n")
    ARGV[3] score mode: min score ("-inf", "n" or "(n")
    ARGV[4] cursor score, "" for the first page. Score mode: ARGV[2] is then this score and the
            entries with this score and a member >= ARGV[5] are skipped. Lex mode: only entries
            strictly after (score, member) are returned.
    ARGV[5] cursor member
    ARGV[6] how many matches to return at most
    ARGV[7] budget: how many entries to examine at most
    ARGV[8] the scope whose own index KEYS[1] is (members "key", lex "key \n createdAtMs"; entries
            an earlier version wrote there in the form "scope \n key", lex
            "key \n scope \n createdAtMs", are read alike, see includes/record.lua; one naming
            another scope is skipped); "" when KEYS[1] is an unknown-by-tool index, whose members
            are "scope \n key" (score mode only)
    ARGV[9] key prefix filter, "" for none (lex mode: required)
    ARGV[10] tool filter (escaped), "" for none: read from each examined entry's record
    ARGV[11] bucket base "{<prefix>:<bucket>}:", for reading records
  Output:
    { done, stopScore, stopMember, member1, score1, member2, score2, ... }
    Members are those of the index read. Lex mode answers for each entry the member its record has
    in the scope's created index beside the lex index, in the same form: a
    record's entries are written together, in one form (includes/record.lua), so positions of lex
    pages and of created-index pages are one order, and a cursor of one continues the other.
    done = 1 when the index has nothing more in range; otherwise every entry down to
    (stopScore, stopMember) has been examined. Lex mode answers { -1 } when more than the
    budget of keys match the prefix, so the caller reads another index instead. A tool filter
    reads the tool from the record of each entry the scope and prefix let through.
]]
--- @include "keys"
--- @include "paging"

local base = bucketBase(ARGV[11])
local limit = tonumber(ARGV[6])
local budget = tonumber(ARGV[7])
local scope = ARGV[8]
local prefix = ARGV[9]
local tool = ARGV[10]

local function toolOf(entryScope, entryKey) return toolOfRecord(base, entryScope, entryKey) end

-- A status or created index member's scope and key: "scope \n key", or in a scope's own index the
-- key alone (keys never hold "\n").
local function entryOf(member)
  local nl = string.find(member, "\n", 1, true)
  if nl then return string.sub(member, 1, nl - 1), string.sub(member, nl + 1) end
  return scope, member
end

local function matches(member)
  if prefix == "" and tool == "" and scope == "" then return true end
  local entryScope, entryKey = entryOf(member)
  -- a scope's own index answers for that scope alone, whatever an earlier version left in it
  if scope ~= "" and entryScope ~= scope then return false end
  if prefix ~= "" and string.sub(entryKey, 1, #prefix) ~= prefix then return false end
  if tool ~= "" and toolOf(entryScope, entryKey) ~= tool then return false end
  return true
end

if ARGV[1] == "lex" then
  local upper = "(" .. prefix .. "\127"
  local raw = redis.call("ZRANGEBYLEX", KEYS[1], "[" .. prefix, upper, "LIMIT", 0, budget + 1)
  if #raw > budget then return { -1 } end
  local hasCursor = ARGV[4] ~= ""
  local cursorScore = tonumber(ARGV[4])
  local found = {}
  for _, lexMember in ipairs(raw) do
    local nl1 = string.find(lexMember, "\n", 1, true)
    local nl2 = string.find(lexMember, "\n", nl1 + 1, true)
    local key = string.sub(lexMember, 1, nl1 - 1)
    local entryScope, createdAt, member
    if nl2 then
      -- "key \n scope \n createdAtMs": written by an earlier version
      entryScope, createdAt = string.sub(lexMember, nl1 + 1, nl2 - 1), string.sub(lexMember, nl2 + 1)
      member = entryScope .. "\n" .. key
    else
      -- "key \n createdAtMs" in the scope's own index
      entryScope, createdAt, member = scope, string.sub(lexMember, nl1 + 1), key
    end
    if (scope == "" or entryScope == scope) and (tool == "" or toolOf(entryScope, key) == tool) then
      local s = tonumber(createdAt)
      if not hasCursor or s < cursorScore or (s == cursorScore and bytesLess(member, ARGV[5])) then
        found[#found + 1] = { s, member, createdAt }
      end
    end
  end
  return lexAnswer(found, limit)
end

local key = KEYS[1]
local offset = 0
if ARGV[4] ~= "" then
  -- skip the entries tied on the cursor score whose member is >= the cursor member
  offset = tiesToSkip(key, ARGV[4], ARGV[5])
end

local out = { 0, "", "" }
local found, examined = 0, 0
while true do
  local want = math.min(256, budget - examined)
  local batch = redis.call("ZREVRANGEBYSCORE", key, ARGV[2], ARGV[3], "WITHSCORES", "LIMIT", offset, want)
  local n = #batch / 2
  for i = 1, #batch, 2 do
    examined = examined + 1
    out[2], out[3] = batch[i + 1], batch[i]
    if matches(batch[i]) then
      out[#out + 1] = batch[i]
      out[#out + 1] = batch[i + 1]
      found = found + 1
      if found >= limit then return out end
    end
  end
  if n < want then
    out[1] = 1
    return out
  end
  if examined >= budget then return out end
  offset = offset + n
end
