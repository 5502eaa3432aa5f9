import { createHmac, hkdfSync, timingSafeEqual } from "node:crypto";
import { sessionSecret } from "@/lib/auth/secret";
import type { Config } from "@/lib/server/config";

const PREFIX = "idgtask1";
const MAC_BYTES = 32;

/** What a task handle names: the proxied tool that created the task, and the task's id at its server. */
export interface TaskTarget {
  tool: string;
  taskId: string;
}

/**
 * The task ids Idemgate hands its callers for tasks that a guarded MCP server created. Idemgate
 * holds one connection per server for every tenant, so the server cannot tell tenants' tasks apart:
 * the handle binds the task to the caller's scope with an HMAC-SHA256 (under a key derived from the
 * server's secret), and `tasks/get`, `tasks/result` and `tasks/cancel` only follow a handle made for
 * the scope asking. The handle is deterministic: a retry with the same key, answered from the stored
 * result, gets exactly the handle the first call got, from any server process.
 *
 * Form: `idgtask1.<base64url(JSON [tool, taskId])>.<base64url(mac)>`. Not encrypted: what it names
 * (the tool, the server's task id) is the caller's own.
 */
export class TaskHandles {
  private readonly key: Buffer;

  constructor(secret: string) {
    this.key = Buffer.from(hkdfSync("sha256", Buffer.from(secret, "utf8"), Buffer.alloc(0), "idemgate mcp task handle v1: hmac-sha256", 32));
  }

  handle(scope: string, target: TaskTarget): string {
    const payload = Buffer.from(JSON.stringify([target.tool, target.taskId]), "utf8").toString("base64url");
    return `${PREFIX}.${payload}.${this.mac(scope, payload).toString("base64url")}`;
  }

  /** What `handle` names, or null unless this server made it for `scope`. */
  open(scope: string, handle: string): TaskTarget | null {
    const parts = handle.split(".");
    if (parts.length !== 3 || parts[0] !== PREFIX) return null;
    const [, payload, mac] = parts;
    const given = Buffer.from(mac, "base64url");
    // one spelling per handle: a decoder ignores the last character's unused bits, and what it skips
    // would let other strings name the same task
    if (given.toString("base64url") !== mac) return null;
    if (given.length !== MAC_BYTES || !timingSafeEqual(given, this.mac(scope, payload))) return null;
    try {
      const value: unknown = JSON.parse(Buffer.from(payload, "base64url").toString("utf8"));
      if (Array.isArray(value) && value.length === 2 && typeof value[0] === "string" && typeof value[1] === "string") {
        return { tool: value[0], taskId: value[1] };
      }
    } catch {
      // a handle this server made always parses
    }
    return null;
  }

  private mac(scope: string, payload: string): Buffer {
    return createHmac("sha256", this.key).update(scope).update("\0").update(payload).digest();
  }
}

const handles = new WeakMap<Config, TaskHandles>();

/** The server's task handles, keyed by its secret (IDEMGATE_SECRET, or the one generated on first start). */
export function taskHandles(config: Config): TaskHandles {
  let found = handles.get(config);
  if (!found) {
    found = new TaskHandles(sessionSecret(config));
    handles.set(config, found);
  }
  return found;
}
