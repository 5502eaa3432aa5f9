import { ProtocolError, SdkError, SdkErrorCode, SdkHttpError } from "@modelcontextprotocol/client";
import { notSentCode } from "@/lib/tools/upstream";

/** A call to a guarded MCP server that the server never processed: the call is "not run". */
export class McpNotSentError extends Error {
  constructor(
    readonly reason: string,
    /** the server answered that it does not know the session: the connection needs a new one */
    readonly sessionGone = false,
    /** the connection could not be made: the server is down now */
    readonly refused = false,
  ) {
    super(reason);
    this.name = "McpNotSentError";
  }
}

/**
 * Why a failed request to a guarded MCP server was certainly not processed, as an McpNotSentError;
 * null when it may have been (a timeout, a reset after sending, a 5xx, an answer that is not MCP):
 * that outcome is unknown. As the v2 SDK client reports them, on either revision:
 * - the connection could not be made: the HTTP upstreams' rule (lib/tools/upstream.ts, notSentCode),
 *   read from the error fetch throws, which the Streamable HTTP transport passes on as it is;
 * - the SDK had no transport, or no process to write to ("Not connected", SdkErrorCode.NotConnected):
 *   nothing was written;
 * - an HTTP 4xx to the POST (an SdkHttpError with that status): the Streamable HTTP transport answers
 *   a message it cannot accept with an HTTP error status instead of processing it, and tool errors
 *   come back as results, never as HTTP statuses. A 404 to a request that carried a session id
 *   (2025-11-25; the stateless 2026-07-28 revision has none) is the server saying it no longer knows
 *   that session (it restarted, or ended it), before processing anything. On 2026-07-28 the
 *   transport passes a 400 that carries a JSON-RPC error on as that error (a ProtocolError):
 *   `postStatus`, the status of the POST that carried the request, tells it apart from an error
 *   the server answered with HTTP 200 after it dispatched the call (unknown, as any other).
 * Never not-sent: SdkErrorCode.RequestTimeout and ConnectionClosed (the request was out), a 5xx, a
 * body that is not MCP (ClientHttpUnexpectedContent, InvalidResult), and any JSON-RPC error answer.
 */
export function notSentError(err: unknown, sentSessionId: boolean, postStatus?: number): McpNotSentError | null {
  if (err instanceof McpNotSentError) return err;
  const code = notSentCode(err);
  if (code !== null) return new McpNotSentError(`the connection could not be made (${code})`, false, true);
  if ((err instanceof SdkError && err.code === SdkErrorCode.NotConnected) || (err instanceof Error && err.message === "Not connected")) {
    return new McpNotSentError("the connection was closed before the call was written");
  }
  const status = err instanceof SdkHttpError ? err.status : err instanceof ProtocolError ? postStatus : undefined;
  if (typeof status === "number" && status >= 400 && status < 500) {
    if (status === 404 && sentSessionId) return new McpNotSentError("the server no longer knows the session (HTTP 404); it processed nothing", true);
    return new McpNotSentError(`the server refused the request with HTTP ${status} before processing it`);
  }
  return null;
}
