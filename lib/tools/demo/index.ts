import type { PrismaClient } from "@/generated/prisma/client";
import type { ToolDefinition } from "../define-tool";
import type { ListEffects, SideEffect } from "../effects";
import * as email from "./email";
import * as payments from "./payments";
import * as tickets from "./tickets";

const families = [payments, email, tickets];

/** The built-in demo tools: they make the product useful on first start. */
export const demoTools: readonly ToolDefinition[] = families.flatMap((family) => family.tools);

/** Each demo family's reconcile hook. */
export const demoEffectListers: readonly ListEffects[] = families.map((family) => family.listEffects);

/** Every side effect the demo tools committed at or after `since`, oldest first. */
export async function listDemoEffects(db: PrismaClient, since: Date): Promise<SideEffect[]> {
  const lists = await Promise.all(demoEffectListers.map((list) => list(db, since)));
  return lists.flat().sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime());
}
