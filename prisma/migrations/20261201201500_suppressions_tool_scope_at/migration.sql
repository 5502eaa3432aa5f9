-- The reconciler learns retry gaps per tool and scope (one tenant's replays no longer change what
-- is flagged for another): one tool's replays in one scope by time. INCLUDE is added here, as in
-- 20261129040000, for index-only scans of the gaps; schema.prisma declares the key.
-- CreateIndex
CREATE INDEX "suppressions_tool_scope_at_idx" ON "suppressions"("tool", "scope", "at") INCLUDE ("kind", "gap_ms");
