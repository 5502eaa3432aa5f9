import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { Config } from "@/lib/server/config";

/**
 * The key that signs and encrypts console sessions: IDEMGATE_SECRET, or one generated on first
 * start and kept (mode 600) in the data directory so sessions survive restarts.
 */
export function sessionSecret(config: Config): string {
  if (config.secret) return config.secret;
  const file = path.join(config.dataDir, "secret");
  try {
    const existing = readFileSync(file, "utf8").trim();
    if (existing.length >= 32) return existing;
  } catch {
    // first start
  }
  mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  const secret = randomBytes(32).toString("base64url");
  writeFileSync(file, secret + "\n", { mode: 0o600 });
  return secret;
}
