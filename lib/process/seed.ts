import { randomBytes } from "node:crypto";
import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { createApiToken } from "@/lib/auth/api-tokens";
import { createOperator } from "@/lib/auth/operators";
import type { Runtime } from "@/lib/server/runtime";

export const DEMO_OPERATOR_EMAIL = "admin@idemgate.local";
export const DEMO_SCOPE = "demo";
export const SEED_VIEWER_EMAIL = "viewer@idemgate.local";

/**
 * On a first start (no operator yet): an operator account and an API token for the demo scope.
 * The secrets are printed once and written to <dataDir>/credentials.txt, readable by the owner only.
 */
export async function seedIfEmpty(runtime: Runtime): Promise<{ created: boolean; credentials?: string }> {
  const seeded = await seedFirstOperator(runtime);
  await seedViewerFromEnv(runtime);
  return seeded;
}

/**
 * A read-only account for tests and demos: with IDEMGATE_SEED_VIEWER_PASSWORD set (at least 12
 * characters), start-up creates viewer@idemgate.local (or IDEMGATE_SEED_VIEWER_EMAIL) with the
 * viewer role, unless that account exists already. The end-to-end tests use it.
 */
async function seedViewerFromEnv(runtime: Runtime, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const password = env.IDEMGATE_SEED_VIEWER_PASSWORD;
  if (!password) return;
  const email = env.IDEMGATE_SEED_VIEWER_EMAIL?.trim() || SEED_VIEWER_EMAIL;
  if (await runtime.db.prisma.operator.findUnique({ where: { email } })) return;
  await createOperator(runtime.db.prisma, { email, password, role: "viewer" });
}

async function seedFirstOperator(runtime: Runtime): Promise<{ created: boolean; credentials?: string }> {
  const { prisma } = runtime.db;
  if ((await prisma.operator.count()) > 0) return { created: false };
  const password = randomBytes(12).toString("base64url");
  await createOperator(prisma, { email: DEMO_OPERATOR_EMAIL, password, role: "operator" });
  const token = await createApiToken(prisma, { scope: DEMO_SCOPE, label: "demo token (created on first start)", actor: "idemgate:first-start" });
  const credentials = [
    "Idemgate first start: keep these, they are shown once.",
    `  console:   http://localhost:${runtime.config.port}`,
    `  operator:  ${DEMO_OPERATOR_EMAIL}`,
    `  password:  ${password}`,
    `  API token: ${token.token}   (scope "${DEMO_SCOPE}")`,
    "",
  ].join("\n");
  await mkdir(runtime.config.dataDir, { recursive: true, mode: 0o700 });
  await writeFile(path.join(runtime.config.dataDir, "credentials.txt"), credentials, { mode: 0o600 });
  return { created: true, credentials };
}
