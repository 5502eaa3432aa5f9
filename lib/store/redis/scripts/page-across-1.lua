--[[
  Reads one bucket's part of a list page across scopes: the own indexes of every scope the bucket
  lists, merged into the order one index shared by them would have (members "scope \n key",
  highest score first, ties by member descending), filtering by key prefix and tool while reading,
  within a budget of examined entries. It answers what page-1.lua answers for one index, so a list
  across scopes pages, stops and continues as a list of one scope does. The merge reads each
  scope's index in short batches as it reaches it: about one read per scope it opens (by creation
  time only those it reaches, see openReached) plus one per `BATCH` entries examined, however
  many entries the scopes hold.
  Input:
    KEYS[1] the bucket's scopes, scored by their newest creation time (KeySpace.scopes)
    ARGV[1] mode "score" | "lex"
    ARGV[2] score mode: which index of each scope: "created" | "st:<stored status>"
    ARGV[3] score mode: max score ("+inf" or "n"; with a cursor, its score: ARGV[5])
    ARGV[4] score mode: min score ("-inf", "n" or "(n")
    ARGV[5] cursor score, "" for the first page. Score mode: ARGV[3] is then this score and the
            entries with this score and a member >= ARGV[6] are skipped. Lex mode: only entries
            strictly after (score, member) are returned.
    ARGV[6] cursor member, "scope \n key"
    ARGV[7] how many matches to return at most
    ARGV[8] budget: how many entries to examine at most
    ARGV[9] key prefix filter, "" for none (lex mode: required)
    ARGV[10] tool filter (escaped), "" for none: read from each examined entry's record
    ARGV[11] bucket base "{<prefix>:<bucket>}:"
  Output:
    as page-1.lua: { done, stopScore, stopMember, member1, score1, ... }, members "scope \n key";
    lex mode { -1 } when more than the budget of keys match the prefix (the caller then reads the
    created indexes). Fails on an entry an earlier version wrote into a scope's index in the form
    "scope \n key" (lex "key \n scope \n createdAtMs"): beside the current form it sorts out of
    this order among the keys of its score, so a merge could stop on it page after page. Those
    versions kept no scopes index either: `idemgate store rebuild-indexes` is the upgrade step
    (docs/operate.md), and rewrites every entry in the current form.
]]
--- @include "keys"
--- @include "paging"

local base = bucketBase(ARGV[11])
local limit = tonumber(ARGV[7])
local budget = tonumber(ARGV[8])
local prefix = ARGV[9]
local tool = ARGV[10]
local hasCursor = ARGV[5] ~= ""
local cursorScore = ARGV[5]
local cursorMember = ARGV[6]
local cursorScope, cursorKey = "", ""
if hasCursor then
  local nl = string.find(cursorMember, "\n", 1, true)
  if not nl then return redis.error_reply("ERR idemgate: a cursor across scopes names a scope") end
  cursorScope, cursorKey = string.sub(cursorMember, 1, nl - 1), string.sub(cursorMember, nl + 1)
end
-- { scope, its newest creation time, ... }, newest first: all of them, or by creation time read 16
-- at a time as the merge reaches them (moreScopes)
local scopes = {}
local scopesRead, allScopes = 0, false
local function moreScopes(count)
  local batch = redis.call("ZREVRANGE", KEYS[1], scopesRead, count < 0 and -1 or scopesRead + count - 1, "WITHSCORES")
  for _, v in ipairs(batch) do scopes[#scopes + 1] = v end
  scopesRead = scopesRead + #batch / 2
  allScopes = count < 0 or #batch < 2 * count
end
if ARGV[1] == "lex" or ARGV[2] ~= "created" then moreScopes(-1) end

local function earlierForm(index)
  return redis.error_reply("ERR idemgate: " .. index .. " holds entries of an earlier version; run `idemgate store rebuild-indexes`")
end

local function matches(s, key)
  if prefix ~= "" and string.sub(key, 1, #prefix) ~= prefix then return false end
  if tool ~= "" and toolOfRecord(base, s, key) ~= tool then return false end
  return true
end

if ARGV[1] == "lex" then
  local upper = "(" .. prefix .. "\127"
  local found = {}
  local total = 0
  for i = 1, #scopes, 2 do
    local s = scopes[i]
    local raw = redis.call("ZRANGEBYLEX", scopeLexIndexKey(base, s), "[" .. prefix, upper, "LIMIT", 0, budget + 1 - total)
    total = total + #raw
    if total > budget then return { -1 } end
    for _, lexMember in ipairs(raw) do
      -- "key \n createdAtMs"
      local nl1 = string.find(lexMember, "\n", 1, true)
      if string.find(lexMember, "\n", nl1 + 1, true) then return earlierForm(scopeLexIndexKey(base, s)) end
      local key = string.sub(lexMember, 1, nl1 - 1)
      local createdAt = string.sub(lexMember, nl1 + 1)
      local member = s .. "\n" .. key
      local score = tonumber(createdAt)
      if matches(s, key)
        and (not hasCursor or score < tonumber(cursorScore) or (score == tonumber(cursorScore) and bytesLess(member, cursorMember))) then
        found[#found + 1] = { score, member, createdAt }
      end
    end
  end
  return lexAnswer(found, limit)
end

local kind, min = ARGV[2], ARGV[4]
local BATCH = 8

-- One source per scope: its index read from `max` down, `offset` entries in, a batch at a time.
local function indexOf(s)
  if kind == "created" then return scopeCreatedIndexKey(base, s) end
  return scopeStatusIndexKey(base, s, string.sub(kind, 4))
end

-- Moves a source to its next entry (reading a batch when its buffer is used up); false when none
-- is left. Its members are keys ("scope \n key" is an earlier version's: see above).
local function advance(src)
  src.pos = src.pos + 2
  if src.pos > #src.buf then
    if src.last then return false end
    src.buf = redis.call("ZREVRANGEBYSCORE", src.index, src.max, min, "WITHSCORES", "LIMIT", src.offset, BATCH)
    src.offset = src.offset + #src.buf / 2
    src.last = #src.buf < 2 * BATCH
    src.pos = 1
    if #src.buf == 0 then return false end
  end
  local key = src.buf[src.pos]
  if string.find(key, "\n", 1, true) then error(earlierForm(src.index)) end
  src.key, src.member, src.scoreText = key, src.scope .. "\n" .. key, src.buf[src.pos + 1]
  src.score = tonumber(src.scoreText)
  return true
end

-- whether source a's entry comes first: higher score, then the greater member
local function before(a, b)
  if a.score ~= b.score then return a.score > b.score end
  return bytesLess(b.member, a.member)
end

local heap = {}
local function siftUp(i)
  while i > 1 do
    local parent = math.floor(i / 2)
    if not before(heap[i], heap[parent]) then return end
    heap[i], heap[parent] = heap[parent], heap[i]
    i = parent
  end
end
local function siftDown(i)
  local n = #heap
  while true do
    local best, l, r = i, 2 * i, 2 * i + 1
    if l <= n and before(heap[l], heap[best]) then best = l end
    if r <= n and before(heap[r], heap[best]) then best = r end
    if best == i then return end
    heap[i], heap[best] = heap[best], heap[i]
    i = best
  end
end

local cursorScopeKey = cursorScope .. "\n"
local function open(s)
  local src = { scope = s, index = indexOf(s), max = ARGV[3], offset = 0, buf = {}, pos = -1, last = false }
  if hasCursor then
    if s == cursorScope then
      -- its entries tied on the cursor score from the cursor's key up were listed
      src.offset = tiesToSkip(src.index, cursorScore, cursorKey)
    elseif bytesLess(cursorScopeKey, s .. "\n") then
      -- every entry it has tied on the cursor score sorts before the cursor: listed
      src.max = "(" .. cursorScore
    end
    -- a scope sorting before the cursor's: its tied entries all come after the cursor
  end
  if advance(src) then
    heap[#heap + 1] = src
    siftUp(#heap)
  end
end

-- Scopes are opened as the merge reaches them. By creation time, a scope's score in the scopes
-- index is an upper bound of its created index: one whose bound is below the merge's next entry
-- cannot hold an entry before it, and is opened only once the merge comes down to its bound, so a
-- page of recent keys reads the scopes written to lately, not every scope. By deadline (a status
-- index) there is no such bound: every scope is opened.
local unopened = 1
local function openReached()
  while true do
    if unopened > #scopes then
      if allScopes then return end
      moreScopes(16)
      if unopened > #scopes then return end
    end
    local bound = kind == "created" and tonumber(scopes[unopened + 1]) or math.huge
    if heap[1] and bound < heap[1].score then return end
    open(scopes[unopened])
    unopened = unopened + 2
  end
end
local out = { 0, "", "" }
local found, examined = 0, 0
while true do
  openReached()
  local src = heap[1]
  if not src then
    out[1] = 1
    return out
  end
  if examined >= budget then return out end
  examined = examined + 1
  out[2], out[3] = src.scoreText, src.member
  if matches(src.scope, src.key) then
    out[#out + 1] = src.member
    out[#out + 1] = src.scoreText
    found = found + 1
    if found >= limit then return out end
  end
  if not advance(src) then
    heap[1] = heap[#heap]
    heap[#heap] = nil
  end
  if heap[1] then siftDown(1) end
end
