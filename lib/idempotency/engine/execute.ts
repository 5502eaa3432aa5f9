import { exceptionNote, noteWithDetail, PUBLIC_THREW_NOTE } from "../outcome-note";
import { redactAnswerText } from "../redaction";
import { isAbandonCall, isFinalToolError, isNotRunError, isOutcomeUnknown, type RunTool, type ToolResult } from "../tool";
import { serialize, type CallContext, type Ended } from "./call";
import type { EngineCore } from "./core";

/** Step 3: runs the tool and sorts how it ended into the outcome classes. */
export async function execute(core: EngineCore, call: CallContext, run: RunTool, args: unknown): Promise<Ended> {
  const started = performance.now();
  const took = () => Math.round(performance.now() - started);
  try {
    const result: ToolResult = await run(args, { scope: call.scope, key: call.key, session: call.session, executionId: call.executionId });
    return { class: "done", stored: { status: result.status ?? 200, body: serialize(result.body), final: false }, atMs: core.now(), durationMs: took() };
  } catch (err) {
    if (isFinalToolError(err)) return { class: "done", stored: { status: err.status, body: serialize(err.body), final: true }, atMs: core.now(), durationMs: took() };
    if (isNotRunError(err)) return { class: "not_run", message: err.message, upstreamStatus: err.upstreamStatus, durationMs: took() };
    if (isAbandonCall(err)) return { class: "abandoned" };
    // Only the tool's own word that nothing happened frees a key: anything else may have happened.
    // a tool's detail (another server's error text) is for operators too
    if (isOutcomeUnknown(err)) return { class: "unknown", note: noteWithDetail(err.note, err.detail), publicNote: err.note, timedOut: err.timedOut, durationMs: took(), answer: keptAnswer(err.answer) };
    // the exception's message is for operators (key detail, audit log), not for the caller
    const message = err instanceof Error ? err.message : String(err);
    return { class: "unknown", note: exceptionNote(message), publicNote: PUBLIC_THREW_NOTE, timedOut: false, durationMs: took() };
  }
}

/** The most of a service's answer an unknown outcome keeps (as the kept arguments, 8 KiB). */
export const MAX_KEPT_ANSWER_BYTES = 8 * 1024;

/** A service's answer as an unknown outcome keeps it: its body cut to MAX_KEPT_ANSWER_BYTES (a cut body is not JSON any more). */
function keptAnswer(answer: { status: number; body: string } | undefined): { status: number; body: string } | null {
  if (!answer) return null;
  // for operators only (never replayed): secrets in it are not kept (lib/idempotency/redaction.ts)
  // (read whole when it may be whole JSON; a longer one is cut anyway, and read as text)
  answer = { status: answer.status, body: redactAnswerText(answer.body.length <= 1024 * 1024 ? answer.body : answer.body.slice(0, 4 * MAX_KEPT_ANSWER_BYTES)) };
  const cut = Buffer.byteLength(answer.body) <= MAX_KEPT_ANSWER_BYTES ? answer.body : Buffer.from(answer.body).subarray(0, MAX_KEPT_ANSWER_BYTES).toString("utf8").replace(/\uFFFD$/, "");
  // PostgreSQL refuses U+0000 in text (and in the batch's JSON): one such body would hold back every audit row behind it
  return { status: answer.status, body: cut.replace(/\u0000/g, "\uFFFD") };
}
