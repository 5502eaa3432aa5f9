import { isIdemgateError } from "@/lib/idempotency/errors";
import type { KeyRecord } from "@/lib/idempotency/record";
import type { ProbeAnswer } from "@/lib/idempotency/tool";
import type { ProbeKeyResult } from "@/lib/operator/probe-key";
import { recordKey, type CheckContext } from "./context";

/** How the trail names the reconciler when it acts on a tool's answer. */
export const RECONCILER_ACTOR = "reconciler";

/** The tools' status probes, as the reconciler uses them. */
export interface ReconcileProbes {
  /** the tools that have a status probe */
  tools: readonly string[];
  /** asks a key's tool and acts on its answer (lib/operator/probe-key.ts, with the reconciler as actor) */
  ask(target: { scope: string; key: string }, nowMs: number): Promise<ProbeKeyResult>;
  /**
   * Where the previous pass left each tool's lists (keep one across passes): a pass continues
   * there, so every held key gets its turn however many are listed before it. Without it each pass
   * starts at the newest keys.
   */
  rotation?: ProbeRotation;
}

/** Where the reconciler's probing continues: the (tool, state) list to start with, and each list's cursor. */
export class ProbeRotation {
  nextList = 0;
  readonly cursors = new Map<string, string | null>();
}

const HELD_STATES = ["unknown", "stuck"] as const;

export interface ProbeOptions {
  /** keys asked about per pass (default 20) */
  maxProbes?: number;
  /** probes running at once (default 4) */
  concurrency?: number;
  /** a key whose tool could not tell is asked again after this long (default 10 minutes) */
  reprobeAfterMs?: number;
  /**
   * a stuck key is asked about once it has been stuck this long (default 1 minute): its holder may
   * only be slow, and a "not applied" given before it commits would free the key for a second run
   */
  stuckProbeAfterMs?: number;
}

export interface ProbedKey {
  scope: string;
  key: string;
  tool: string;
  /** the key's state when it was asked about */
  state: "unknown" | "stuck";
  answer: ProbeAnswer["outcome"];
  action: ProbeKeyResult["action"];
}

/** pages each (tool, state) list reads per pass at most, of at most PAGE_SIZE keys */
const PAGES_PER_LIST = 5;
const PAGE_SIZE = 100;

/**
 * Asks the tools that can tell whether their unknown and stuck keys' calls happened, and lets
 * their answers resolve or release those keys (probeKey records each answer with the reconciler as
 * actor). Bounded per pass; a key whose tool could not tell is not asked again for a while. With a
 * rotation, each pass continues the lists where the previous one stopped, and starts with the
 * (tool, state) list after the one that filled it: no held key waits behind others forever, not
 * even a tool's stuck keys behind its many unknown ones.
 */
export async function probeHeldKeys(ctx: CheckContext, probes: ReconcileProbes, options: ProbeOptions = {}): Promise<{ examined: number; probed: ProbedKey[] }> {
  const maxProbes = options.maxProbes ?? 20;
  if (maxProbes <= 0 || probes.tools.length === 0) return { examined: 0, probed: [] };
  const recent = await recentlyAsked(ctx, options.reprobeAfterMs ?? 10 * 60_000);
  const stuckFor = options.stuckProbeAfterMs ?? 60_000;

  const rotation = probes.rotation ?? new ProbeRotation();
  const lists = probes.tools.flatMap((tool) => HELD_STATES.map((state) => ({ tool, state })));
  const first = rotation.nextList % lists.length;

  const targets: { record: KeyRecord; state: "unknown" | "stuck" }[] = [];
  const taken = new Set<string>();
  /** where each list continues, kept only once this pass's keys were asked */
  const cursors = new Map<string, string | null>();
  let nextList = rotation.nextList;
  const take = (records: KeyRecord[], state: "unknown" | "stuck") => {
    for (const record of records) {
      const id = recordKey(record);
      if (recent.has(id) || taken.has(id)) continue;
      taken.add(id);
      targets.push({ record, state });
    }
  };
  for (let l = 0; l < lists.length; l++) {
    const { tool, state } = lists[(first + l) % lists.length];
    // a stuck key is listed once it has been stuck `stuckFor`: lease passed by then
    const listAt = state === "stuck" ? ctx.nowMs - stuckFor : ctx.nowMs;
    const read = (cursor: string | null, limit: number) => ctx.store.list({ tool, state, limit, cursor, nowMs: listAt });
    // Half of the slots left go to the newest keys, so a key that has just become unknown or
    // stuck is asked soon; the rest continue the list where the previous pass left it. Those
    // pages are no larger than the slots left, so a pass ends at a page's end and the next one
    // continues after it: a key is listed there again only once every other held key was.
    const newest = Math.floor((maxProbes - targets.length) / 2);
    if (newest > 0) take((await read(null, Math.min(PAGE_SIZE, newest))).items, state);
    const list = `${tool}\n${state}`;
    let cursor = rotation.cursors.get(list) ?? null;
    for (let page = 1; page < PAGES_PER_LIST && targets.length < maxProbes; page++) {
      const listed = await read(cursor, Math.min(PAGE_SIZE, maxProbes - targets.length));
      take(listed.items, state);
      cursor = listed.nextCursor;
      if (!cursor) break;
    }
    // null: read to its end, the next pass starts it over
    cursors.set(list, cursor);
    if (targets.length >= maxProbes) {
      // the next pass starts with the next list, so one list's backlog does not hold the others'
      nextList = (first + l + 1) % lists.length;
      break;
    }
  }

  const probed: ProbedKey[] = [];
  let failure: unknown = null;
  let next = 0;
  const worker = async () => {
    while (next < targets.length && failure === null) {
      const { record, state } = targets[next++];
      try {
        const out = await probes.ask({ scope: record.scope, key: record.key }, ctx.nowMs);
        probed.push({ scope: record.scope, key: record.key, tool: record.tool, state, answer: out.answer.outcome, action: out.action });
      } catch (err) {
        // decided or gone since it was listed: nothing to ask any more
        if (!isIdemgateError(err)) failure = err;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(options.concurrency ?? 4, targets.length) }, worker));
  // a pass that failed leaves the rotation where it was: its keys are listed again next pass
  if (failure !== null) throw failure;
  for (const [list, cursor] of cursors) rotation.cursors.set(list, cursor);
  rotation.nextList = nextList;
  return { examined: targets.length, probed };
}

/**
 * Keys not to ask about this pass: those the reconciler asked about recently whose tool could not
 * tell (the trail is stamped with the wall clock), and those with a decision written and not yet
 * recorded (being carried out, or left by a process that stopped: the pass carries it out), which
 * a probe's answer must not decide a second time.
 */
async function recentlyAsked(ctx: CheckContext, withinMs: number): Promise<Set<string>> {
  const rows = await ctx.prisma.operatorAction.findMany({
    where: { actor: RECONCILER_ACTOR, action: "probe", at: { gte: new Date(Date.now() - withinMs) } },
    select: { scope: true, key: true },
  });
  const deciding = await ctx.prisma.keyDecision.findMany({ select: { scope: true, key: true } });
  return new Set([
    ...rows.filter((r) => r.scope !== null && r.key !== null).map((r) => recordKey({ scope: r.scope!, key: r.key! })),
    ...deciding.map((d) => recordKey(d)),
  ]);
}
