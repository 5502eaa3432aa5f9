import { randomUUID } from "node:crypto";
import type { PrismaClient } from "@/generated/prisma/client";
import { recordOperatorAction } from "@/lib/audit/operator-actions";
import { revokeOperatorSessions } from "./console-sessions";
import { hashPassword, MIN_PASSWORD_LENGTH, passwordHashingGate, verifyPassword, type HashingGate } from "./passwords";
import { isRole, type OperatorIdentity } from "./roles";

export class OperatorInputError extends Error {}

const EMAIL = /^[^\s@]+@[^\s@]+$/;

export async function createOperator(
  prisma: PrismaClient,
  input: { email: string; password: string; role: string },
): Promise<OperatorIdentity> {
  const email = input.email.trim().toLowerCase();
  if (!EMAIL.test(email)) throw new OperatorInputError(`"${input.email}" is not an email address`);
  if (!isRole(input.role)) throw new OperatorInputError(`role must be viewer or operator, not "${input.role}"`);
  if (input.password.length < MIN_PASSWORD_LENGTH) {
    throw new OperatorInputError(`the password must have at least ${MIN_PASSWORD_LENGTH} characters`);
  }
  const existing = await prisma.operator.findUnique({ where: { email } });
  if (existing) throw new OperatorInputError(`an operator with the email ${email} exists already`);
  const row = await prisma.operator.create({
    data: { id: randomUUID(), email, passwordHash: await hashPassword(input.password), role: input.role, createdAt: new Date() },
  });
  return { id: row.id, email: row.email, role: input.role };
}

// Verifying against a dummy hash when the email is unknown keeps the answer time the same,
// so response timing does not tell which emails exist. That verification costs as much as a real
// one, so it goes through the same hashing gate (lib/auth/passwords.ts) as every other.
let dummyHash: Promise<string> | null = null;

function dummyPasswordHash(gate: HashingGate): Promise<string> {
  dummyHash ??= hashPassword("not-a-real-password-" + randomUUID(), gate).catch((err: unknown) => {
    dummyHash = null; // refused (the gate was full) or failed: the next call makes it
    throw err;
  });
  return dummyHash;
}

/**
 * The operator with this email and password, or null. Throws PasswordCheckBusyError when the
 * process is checking as many passwords as it allows.
 */
export async function verifyOperatorCredentials(
  prisma: PrismaClient,
  email: string,
  password: string,
  gate: HashingGate = passwordHashingGate(),
): Promise<OperatorIdentity | null> {
  const row = await prisma.operator.findUnique({ where: { email: email.trim().toLowerCase() } });
  if (!row || row.disabledAt || !isRole(row.role)) {
    await verifyPassword(await dummyPasswordHash(gate), password, gate);
    return null;
  }
  if (!(await verifyPassword(row.passwordHash, password, gate))) return null;
  return { id: row.id, email: row.email, role: row.role };
}

export async function findOperator(prisma: PrismaClient, id: string): Promise<OperatorIdentity | null> {
  const row = await prisma.operator.findUnique({ where: { id } });
  if (!row || row.disabledAt || !isRole(row.role)) return null;
  return { id: row.id, email: row.email, role: row.role };
}

/**
 * Disables an operator: they can no longer sign in, and every session of theirs ends at once (the
 * console answers their next request as signed out). Recorded as `operator_disable` in the
 * operator audit trail, in the same transaction. Disabling a disabled operator ends any session
 * left and records nothing new.
 */
export async function disableOperator(
  prisma: PrismaClient,
  input: { email: string; actor: string; reason: string },
  nowMs = Date.now(),
): Promise<{ operator: { id: string; email: string }; alreadyDisabled: boolean; sessionsEnded: number }> {
  const email = input.email.trim().toLowerCase();
  return prisma.$transaction(async (tx) => {
    const row = await tx.operator.findUnique({ where: { email } });
    if (!row) throw new OperatorInputError(`no operator with the email ${email}`);
    const alreadyDisabled = row.disabledAt !== null;
    if (!alreadyDisabled) await tx.operator.update({ where: { id: row.id }, data: { disabledAt: new Date(nowMs) } });
    const sessionsEnded = await revokeOperatorSessions(tx, row.id, nowMs);
    if (!alreadyDisabled) {
      await recordOperatorAction(tx, {
        actor: input.actor,
        action: "operator_disable",
        reason: input.reason,
        after: { operatorId: row.id, email: row.email, sessionsEnded },
      });
    }
    return { operator: { id: row.id, email: row.email }, alreadyDisabled, sessionsEnded };
  });
}

/**
 * Enables a disabled operator again: they can sign in with their password (their earlier sessions
 * stay ended). Recorded as `operator_enable` in the operator audit trail, in the same transaction.
 * Enabling an enabled operator changes and records nothing.
 */
export async function enableOperator(
  prisma: PrismaClient,
  input: { email: string; actor: string; reason: string },
): Promise<{ operator: { id: string; email: string }; alreadyEnabled: boolean }> {
  const email = input.email.trim().toLowerCase();
  return prisma.$transaction(async (tx) => {
    const row = await tx.operator.findUnique({ where: { email } });
    if (!row) throw new OperatorInputError(`no operator with the email ${email}`);
    const alreadyEnabled = row.disabledAt === null;
    if (!alreadyEnabled) {
      await tx.operator.update({ where: { id: row.id }, data: { disabledAt: null } });
      await recordOperatorAction(tx, {
        actor: input.actor,
        action: "operator_enable",
        reason: input.reason,
        before: { operatorId: row.id, email: row.email, disabledAt: row.disabledAt!.toISOString() },
        after: { operatorId: row.id, email: row.email, disabledAt: null },
      });
    }
    return { operator: { id: row.id, email: row.email }, alreadyEnabled };
  });
}
