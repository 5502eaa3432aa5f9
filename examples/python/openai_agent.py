"""An agent loop on the official ``openai`` SDK whose tool is guarded, keys derived from the run.

The model asks for ``record_entry`` (one line in a ledger file: the side effect, counted where it
happens), guarded through Idemgate's ``ledger.record`` (declared ``runs: client``). The key of each
call is ``action_key(run_id, step, tool, arguments)``: what the orchestrator knows, never the model's
tool-call id (a model that emits a call again, or an SDK retry that gets a fresh answer, mints a new
id for the same action). ``step`` is the orchestrator's step (here, the user's request being served),
not the model's turn: a call re-emitted within the step is the same action and is not booked again,
and the whole run started over with the same run id (after a crash) books nothing twice.

Run with a server up (``npm start``) and an OpenAI-compatible endpoint: ``IDEMGATE_URL=...
IDEMGATE_TOKEN=idg_... OPENAI_BASE_URL=... OPENAI_API_KEY=... PYTHONPATH=clients/python python3
examples/python/openai_agent.py``. ``EXAMPLE_RUN_ID`` names the run (default: a new one),
``EXAMPLE_LEDGER_FILE`` the ledger, ``OPENAI_TIMEOUT`` the SDK's request timeout in seconds.
Prints one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import uuid
from typing import Any

import idemgate
from idemgate import AsyncIdemgate, action_key, idempotent
from openai import AsyncOpenAI

LEDGER = os.environ.get("EXAMPLE_LEDGER_FILE") or os.path.join(tempfile.gettempdir(), "idemgate-openai-ledger.jsonl")
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "record_entry",
            "description": "Book an entry in the ledger.",
            "parameters": {
                "type": "object",
                "properties": {"account": {"type": "string"}, "amount_cents": {"type": "integer"}, "currency": {"type": "string"}, "memo": {"type": "string"}},
                "required": ["account", "amount_cents", "currency"],
            },
        },
    }
]

gate = AsyncIdemgate(os.environ["IDEMGATE_URL"], os.environ["IDEMGATE_TOKEN"])
booked = {"runs": 0}


def ledger_arguments(account: str, amount_cents: int, currency: str, memo: str | None = None) -> dict[str, Any]:
    return {"account": account, "amountCents": amount_cents, "currency": currency, **({"memo": memo} if memo else {})}


# the key comes from the action context the loop sets for each call (no key= here)
@idempotent(gate, tool="ledger.record", arguments=ledger_arguments)
async def record_entry(account: str, amount_cents: int, currency: str, memo: str | None = None) -> dict[str, Any]:
    booked["runs"] += 1
    entry = {"entryId": f"ent_{uuid.uuid4().hex[:10]}", "account": account, "amountCents": amount_cents, "currency": currency}
    fd = os.open(LEDGER, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(entry) + "\n").encode())
    finally:
        os.close(fd)
    return entry


async def run_agent(model: AsyncOpenAI, run_id: str, step: int, request: str) -> tuple[str, list[dict[str, Any]]]:
    """One user request served to the end: the model's turns, each tool call guarded under its action key."""
    messages: list[Any] = [{"role": "system", "content": "You book ledger entries."}, {"role": "user", "content": request}]
    calls: list[dict[str, Any]] = []
    for _turn in range(10):
        response = await model.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS)
        message = response.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            return message.content or "", calls
        for call in message.tool_calls:
            function = call.function
            args = json.loads(function.arguments)
            # the key is the orchestrator's: run, step, tool, arguments; not call.id
            key = action_key(run_id, step, function.name, args)
            with idemgate.action(key=key, session=run_id):
                result = await record_entry(**args)
            calls.append({"toolCallId": call.id, "key": key, "entryId": result["entryId"]})
            messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)})
    raise RuntimeError("the model did not finish within 10 turns")


async def main() -> None:
    run_id = os.environ.get("EXAMPLE_RUN_ID") or f"run-{uuid.uuid4().hex[:12]}"
    model = AsyncOpenAI(timeout=float(os.environ.get("OPENAI_TIMEOUT", "60")), max_retries=2)
    async with gate:
        text, calls = await run_agent(model, run_id, 1, "Book 10.00 EUR to acct-A and 25.00 EUR to acct-B.")
    await model.close()
    print(json.dumps({"example": "openai", "runId": run_id, "text": text, "calls": calls, "functionRuns": booked["runs"]}))


if __name__ == "__main__":
    asyncio.run(main())
