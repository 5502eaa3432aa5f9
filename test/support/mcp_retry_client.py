"""A real MCP client (the MCP Python SDK's) retrying calls to examples/python/mcp_server.py.

It starts the example as a stdio server (environment passed through: IDEMGATE_URL, IDEMGATE_TOKEN,
PYTHONPATH, EXAMPLE_LEDGER_FILE, EXAMPLE_SLOW_ACCOUNT) and:

1. calls ``record_entry`` for the slow account with key K1 and a short read timeout: the call times
   out at the client while the tool is still running;
2. retries it with the same key (the SDK's client has no retry of its own: this is the caller's);
3. calls a second action (key K2) once;
4. from a new session (a new server process) calls K1 again, the key in ``_meta`` this time;
5. calls without any key (refused: nothing is booked).

Prints one JSON line with what each call answered.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python", "mcp_server.py")


def structured(result: Any) -> Any:
    if result.is_error:
        return {"error": " ".join(getattr(c, "text", "") for c in result.content)}
    if result.structured_content is not None:
        return result.structured_content.get("result", result.structured_content)
    return json.loads(result.content[0].text)


async def main() -> None:
    params = StdioServerParameters(command=sys.executable, args=[EXAMPLE], env=dict(os.environ))
    slow = os.environ["EXAMPLE_SLOW_ACCOUNT"]
    k1 = f"mcp-{uuid.uuid4()}"
    k2 = f"mcp-{uuid.uuid4()}"
    args = {"account": slow, "amount_cents": 1250, "currency": "EUR"}
    out: dict[str, Any] = {"keys": [k1, k2]}
    async with Client(params) as client:
        try:
            await client.call_tool("record_entry", {**args, "idempotency_key": k1}, read_timeout_seconds=1.0)
            out["first"] = "answered"
        except (MCPError, TimeoutError) as err:
            out["first"] = f"timed out: {type(err).__name__}"
        out["retry"] = structured(await client.call_tool("record_entry", {**args, "idempotency_key": k1}))
        out["second"] = structured(await client.call_tool("record_entry", {**args, "account": "other", "idempotency_key": k2}))
    # a new session (a new server process, as after a restart of the host) retrying with the key in _meta
    async with Client(params) as client:
        out["meta"] = structured(await client.call_tool("record_entry", args, meta={"io.idemgate/idempotency-key": k1}))  # type: ignore[arg-type]
        out["keyless"] = structured(await client.call_tool("record_entry", {**args, "account": "keyless"}))
    print(json.dumps(out))


asyncio.run(main())
