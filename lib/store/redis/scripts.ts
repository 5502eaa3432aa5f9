import { readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import type { Cluster, Redis, Result } from "ioredis";

/** Raw replies of the Lua scripts in ./scripts; see each file's header. */
/** A record value (record-codec.ts); "" when there is none. */
export type RecordValue = string;
export type BeginReply = [outcome: string, token: string, record: RecordValue, takenOver: RecordValue, epochMs: string];
export type CompleteReply = [outcome: string, record: RecordValue];
export type ReleaseReply = [outcome: string, before: RecordValue];
export type ResolveReply = [outcome: string, before: RecordValue, after: RecordValue];
export type CountReply = [future: number, past: number];
/** [done, stopScore, stopMember, member, score, member, score, ...] or [-1] (lex overflow) */
export type PageReply = (string | number)[];

declare module "ioredis" {
  interface RedisCommander<Context> {
    idgBegin(...args: [recordKey: string, tokenKey: string, epochKey: string, ...argv: string[]]): Result<BeginReply, Context>;
    idgComplete(...args: [recordKey: string, ...argv: string[]]): Result<CompleteReply, Context>;
    idgMarkUnknown(...args: [recordKey: string, ...argv: string[]]): Result<CompleteReply, Context>;
    idgExtendLease(...args: [recordKey: string, ...argv: string[]]): Result<CompleteReply, Context>;
    idgAbandon(...args: [recordKey: string, ...argv: string[]]): Result<number, Context>;
    idgRelease(...args: [recordKey: string, ...argv: string[]]): Result<ReleaseReply, Context>;
    idgResolve(...args: [recordKey: string, ...argv: string[]]): Result<ResolveReply, Context>;
    idgPurge(...args: [doneIndexKey: string, ...argv: string[]]): Result<number, Context>;
    idgPage(...args: [indexKey: string, ...argv: string[]]): Result<PageReply, Context>;
    idgPageAcross(...args: [scopesKey: string, ...argv: string[]]): Result<PageReply, Context>;
    idgCount(...args: [scopesKey: string, ...argv: string[]]): Result<CountReply, Context>;
    idgRebuild(...args: [recordKey: string, ...argv: string[]]): Result<number, Context>;
  }
}

/** script file (without `-<numberOfKeys>.lua`) → ioredis command name */
const COMMANDS: Record<string, { command: string; readOnly?: boolean }> = {
  begin: { command: "idgBegin" },
  complete: { command: "idgComplete" },
  "mark-unknown": { command: "idgMarkUnknown" },
  "extend-lease": { command: "idgExtendLease" },
  abandon: { command: "idgAbandon" },
  release: { command: "idgRelease" },
  resolve: { command: "idgResolve" },
  purge: { command: "idgPurge" },
  page: { command: "idgPage", readOnly: true },
  "page-across": { command: "idgPageAcross", readOnly: true },
  count: { command: "idgCount", readOnly: true },
  rebuild: { command: "idgRebuild" },
};

export interface LoadedScript {
  name: string;
  command: string;
  numberOfKeys: number;
  lua: string;
  readOnly: boolean;
}

/** Next.js copies the scripts next to the build output under the same relative path. */
export function scriptsDir(): string {
  return path.join(process.cwd(), "lib", "store", "redis", "scripts");
}

const INCLUDE = /^--- @include "([\w-]+)"\s*$/gm;

function expandIncludes(lua: string, dir: string, seen: Set<string> = new Set()): string {
  return lua.replace(INCLUDE, (_line, name: string) => {
    if (seen.has(name)) return ""; // each fragment once per script
    seen.add(name);
    const fragment = readFileSync(path.join(dir, "includes", `${name}.lua`), "utf8");
    return expandIncludes(fragment, dir, seen);
  });
}

let loaded: LoadedScript[] | null = null;

/** Reads and expands the script files once per process. */
export function loadScripts(): LoadedScript[] {
  if (loaded) return loaded;
  const dir = scriptsDir();
  const scripts: LoadedScript[] = [];
  for (const file of readdirSync(dir)) {
    const match = /^([a-z][a-z-]*)-(\d+)\.lua$/.exec(file);
    if (!match) continue;
    const [, name, keys] = match;
    const spec = COMMANDS[name];
    if (!spec) throw new Error(`Redis script ${file} has no command registered in scripts.ts`);
    const lua = expandIncludes(readFileSync(path.join(dir, file), "utf8"), dir);
    scripts.push({ name, command: spec.command, numberOfKeys: Number(keys), lua, readOnly: spec.readOnly ?? false });
  }
  const missing = Object.keys(COMMANDS).filter((name) => !scripts.some((s) => s.name === name));
  if (missing.length > 0) throw new Error(`Redis scripts missing in ${dir}: ${missing.join(", ")}`);
  loaded = scripts;
  return scripts;
}

const registered = new WeakSet<object>();

/** Registers every script as a command on the client (EVALSHA, NOSCRIPT handled by ioredis). */
export function defineScripts(redis: Redis | Cluster): void {
  if (registered.has(redis)) return;
  for (const script of loadScripts()) {
    redis.defineCommand(script.command, {
      lua: script.lua,
      numberOfKeys: script.numberOfKeys,
      readOnly: script.readOnly,
    });
  }
  registered.add(redis);
}
