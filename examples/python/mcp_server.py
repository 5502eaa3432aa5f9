"""An MCP server written with the MCP Python SDK whose write tool is guarded in-process.

The tool ``record_entry`` books one line in a ledger file (the side effect, counted where it
happens) through Idemgate's ``ledger.record``, a tool declared ``runs: client``: Idemgate holds the
key, stores and replays the result, and never runs the function itself. The key is the caller's:
the tool's ``idempotency_key`` argument, or ``_meta["io.idemgate/idempotency-key"]`` on the
``tools/call`` request (the names Idemgate's own MCP endpoint reads). A client that retries a call
with the same key (after a timeout, a dropped connection, a restart) gets the first call's result
and the entry is booked once; a client's timeout does not cut a booking short (the booking runs in
a task of its own, shielded from the request's cancellation). A call without a key is refused before anything happens.

Run it as a stdio server (what an MCP host such as Claude Desktop starts), with a server up
(``npm start``): ``IDEMGATE_URL=http://localhost:3000 IDEMGATE_TOKEN=idg_...
PYTHONPATH=clients/python python3 examples/python/mcp_server.py``. ``EXAMPLE_LEDGER_FILE`` names the
ledger file; ``EXAMPLE_SLOW_ACCOUNT`` names an account whose first booking takes long enough for a
client's request timeout (what the test of this example uses to make its client retry).
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import uuid
from typing import Any

import idemgate
from idemgate import AsyncIdemgate, idempotent
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

META_KEY = "io.idemgate/idempotency-key"
LEDGER = os.environ.get("EXAMPLE_LEDGER_FILE") or os.path.join(tempfile.gettempdir(), "idemgate-mcp-ledger.jsonl")
SLOW_ACCOUNT = os.environ.get("EXAMPLE_SLOW_ACCOUNT", "")

client = AsyncIdemgate(os.environ["IDEMGATE_URL"], os.environ["IDEMGATE_TOKEN"], session=f"mcp-server-{os.getpid()}")
server = MCPServer("ledger")
slow_once: set[str] = set()


def ledger_arguments(account: str, amount_cents: int, currency: str, memo: str | None = None) -> dict[str, Any]:
    """The arguments Idemgate validates (ledger.record's schema) and fingerprints."""
    return {"account": account, "amountCents": amount_cents, "currency": currency, **({"memo": memo} if memo else {})}


# no key= here: the key comes from the action context the tool sets from its caller's key
@idempotent(client, tool="ledger.record", arguments=ledger_arguments)
async def book(account: str, amount_cents: int, currency: str, memo: str | None = None) -> dict[str, Any]:
    """The side effect: one line in the ledger file. Runs at most once per key."""
    if account == SLOW_ACCOUNT and account not in slow_once:
        # the first booking for this account is slow: the client's request times out and it retries
        slow_once.add(account)
        await asyncio.sleep(float(os.environ.get("EXAMPLE_SLOW_SECONDS", "3")))
    entry = {"entryId": f"ent_{uuid.uuid4().hex[:10]}", "account": account, "amountCents": amount_cents, "currency": currency}
    # one line per effect, appended with O_APPEND so concurrent writers never interleave
    fd = os.open(LEDGER, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(entry) + "\n").encode())
    finally:
        os.close(fd)
    return entry


def caller_key(idempotency_key: str | None, ctx: Context) -> str:
    """The caller's key: the argument, else the request's ``_meta``; never one minted here."""
    if idempotency_key:
        return idempotency_key
    meta = ctx.request_context.meta
    extra = (meta.model_extra or {}) if meta is not None and hasattr(meta, "model_extra") else (dict(meta) if isinstance(meta, dict) else {})
    key = extra.get(META_KEY)
    if isinstance(key, str) and key:
        return key
    raise ToolError(f"record_entry needs an idempotency key: pass idempotency_key, or _meta[{META_KEY!r}]")


@server.tool()
async def record_entry(account: str, amount_cents: int, currency: str, ctx: Context, memo: str | None = None, idempotency_key: str | None = None) -> dict[str, Any]:
    """Book an entry in the ledger, once per idempotency key (a retry gets the first result)."""
    key = caller_key(idempotency_key, ctx)
    with idemgate.action(key=key):
        # its own task (which takes the action context along), shielded: a client that gives up on
        # the call (its request timeout cancels the request here) does not cut the booking short;
        # it finishes, its result is stored, and the client's retry with the key gets it
        booking = asyncio.ensure_future(book(account, amount_cents, currency, memo))
    return await asyncio.shield(booking)


if __name__ == "__main__":
    server.run()
