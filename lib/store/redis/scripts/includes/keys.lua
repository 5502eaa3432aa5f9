--[[
  Index key names, derived from the bucket base "{<prefix>:<bucket>}:".
  Mirrors lib/store/redis/keys.ts (KeySpace); change both together.
]]
local function statusIndexKey(base, status) return base .. "st:" .. status end
local function statusToolIndexKey(base, status, tool) return base .. "stt:" .. status .. ":" .. tool end
local function statusScopeIndexKey(base, status, scope) return base .. "sts:" .. status .. ":" .. scope end
local function createdIndexKey(base) return base .. "created" end
local function toolIndexKey(base, tool) return base .. "tool:" .. tool end
local function scopeIndexKey(base, scope) return base .. "scope:" .. scope end
local function lexIndexKey(base) return base .. "lex" end
local function recordKeyOf(base, scope, key) return base .. "r:" .. scope .. ":" .. key end
