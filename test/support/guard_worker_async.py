"""One asyncio process guarding an ``async def`` through AsyncIdemgate, for the fault suite.

Environment: IDEMGATE_URL, IDEMGATE_TOKEN, KEY, ACCOUNT, LEDGER (a file: one line appended per
effect), TOOL (default ``ledger.record``), MODE:

- ``ok``: one guarded call;
- ``crash_before``: the function SIGKILLs its process before its effect;
- ``crash_after``: the function SIGKILLs its process after its effect;
- ``concurrent``: CALLS (default 50) tasks guard the same key at once;
- ``cancel_before``: the task is cancelled before the function starts (right after it is
  scheduled, while its reservation is on its way), then the call is made again;
- ``cancel_during``: the task is cancelled while the function runs (after its effect), then the
  call is made again;
- ``down``: IDEMGATE_URL names a port nothing listens on.

Prints one JSON line: how often the function ran here, and what each call ended with (and, for
``concurrent``, how many milliseconds after the first call each one ended: a failure's timeline).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from typing import Any

from idemgate import AsyncIdemgate, IdemgateError, RetryPolicy

MODE = os.environ.get("MODE", "ok")
KEY = os.environ["KEY"]
TOOL = os.environ.get("TOOL", "ledger.record")
ARGS = {"account": os.environ.get("ACCOUNT", "acct-async"), "amountCents": 100, "currency": "EUR"}
runs = {"started": 0, "effects": 0}
started = asyncio.Event()


def effect() -> None:
    runs["effects"] += 1
    fd = os.open(os.environ["LEDGER"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps({"lang": "python-async", "pid": os.getpid()}) + "\n").encode())
    finally:
        os.close(fd)


async def fn(args: Any) -> dict[str, Any]:
    runs["started"] += 1
    if MODE == "crash_before":
        os.kill(os.getpid(), signal.SIGKILL)
    effect()
    if MODE == "crash_after":
        os.kill(os.getpid(), signal.SIGKILL)
    if MODE == "cancel_during" and runs["started"] == 1:
        started.set()
        await asyncio.Event().wait()  # cancelled here
    # the others hold the key a moment, so the concurrent calls overlap it
    await asyncio.sleep(float(os.environ.get("DELAY_MS", "0")) / 1000)
    return {"by": "python-async", "pid": os.getpid()}


def outcome(result: Any) -> dict[str, Any]:
    if isinstance(result, asyncio.CancelledError):
        return {"outcome": "cancelled"}
    if isinstance(result, IdemgateError):
        return {"outcome": type(result).__name__, "status": result.status, "type": result.type}
    if isinstance(result, BaseException):
        return {"outcome": type(result).__name__, "message": str(result)}
    return {"outcome": "returned", "body": result}


async def main() -> None:
    retry = RetryPolicy(max_attempts=2, base_delay=0.05) if MODE == "down" else None
    client = AsyncIdemgate(os.environ["IDEMGATE_URL"], os.environ["IDEMGATE_TOKEN"], timeout=30, wait_seconds=20, retry=retry)
    calls: list[Any] = []
    ended_ms: list[int] = []
    async with client:
        if MODE == "concurrent":
            n = int(os.environ.get("CALLS", "50"))
            began = time.monotonic()
            ended_ms = [-1] * n

            async def timed(i: int) -> Any:
                try:
                    return await client.guard(TOOL, ARGS, fn, key=KEY)
                finally:
                    ended_ms[i] = round((time.monotonic() - began) * 1000)

            calls = list(await asyncio.gather(*(timed(i) for i in range(n)), return_exceptions=True))
        elif MODE in ("cancel_before", "cancel_during"):
            task = asyncio.ensure_future(client.guard(TOOL, ARGS, fn, key=KEY))
            if MODE == "cancel_before":
                await asyncio.sleep(0)  # the task has started its reservation, not the function
            else:
                await started.wait()
            task.cancel()
            try:
                calls.append(await task)
            except BaseException as err:  # noqa: BLE001 - the cancellation is what is reported
                calls.append(err)
            # the same call again, as a retry would make it
            try:
                calls.append(await client.guard(TOOL, ARGS, fn, key=KEY))
            except BaseException as err:  # noqa: BLE001
                calls.append(err)
        else:
            try:
                calls.append(await client.guard(TOOL, ARGS, fn, key=KEY))
            except BaseException as err:  # noqa: BLE001
                calls.append(err)
    print(json.dumps({"lang": "python-async", "started": runs["started"], "effects": runs["effects"], "calls": [outcome(c) for c in calls], "endedMs": ended_ms}))
    sys.stdout.flush()


asyncio.run(main())
