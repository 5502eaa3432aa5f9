"""A Python resolver in a process of its own, for the fault suite's probe runs.

It resolves held calls of a client-run tool with a probe that asks the "counting service": the ledger
files the guarded workers append one line to per effect (``<LEDGER_DIR>/<key>.jsonl``, O_APPEND). A
call whose ledger has a line happened: Applied with that line as its result; none: NotApplied. A
ledger with more than one line is a double effect: the probe cannot vouch for it and answers None.

Environment: IDEMGATE_URL, IDEMGATE_TOKEN, TOOL (default ``ledger.record``), LEDGER_DIR, MODE
(``sync``: the sync client's resolver thread; ``async``: AsyncIdemgate's task with an ``async def``
probe), INTERVAL (seconds between sweeps, default 0.5), PROBE_TIMEOUT (seconds, default 5), HOLDER.
Prints one JSON line when it runs (``{"ready": true}``), one per answer Idemgate took (``{"key",
"executionId", "said", "decision"}``) and, on SIGTERM or SIGINT, its stats (``{"stats": {...}}``)
before it exits 0.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import threading
from typing import Any, Optional

from idemgate import Applied, AsyncIdemgate, HeldCall, Idemgate, NotApplied

URL = os.environ["IDEMGATE_URL"]
TOKEN = os.environ["IDEMGATE_TOKEN"]
TOOL = os.environ.get("TOOL", "ledger.record")
LEDGER_DIR = os.environ["LEDGER_DIR"]
MODE = os.environ.get("MODE", "sync")
INTERVAL = float(os.environ.get("INTERVAL", "0.5"))
PROBE_TIMEOUT = float(os.environ.get("PROBE_TIMEOUT", "5"))
HOLDER = os.environ.get("HOLDER") or f"python-resolver:{os.getpid()}"

# the resolver's warnings (a gateway it cannot reach, a probe that failed) on stderr, with the time
logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(message)s")
out_lock = threading.Lock()


def say(line: Any) -> None:
    with out_lock:
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()


def ledger_of(key: str) -> Optional[str]:
    """The ledger file of a key (the workers name it after the key); None for a key of another run."""
    if "/" in key or key.startswith("."):
        return None
    return os.path.join(LEDGER_DIR, f"{key}.jsonl")


def probe(call: HeldCall) -> Any:
    path = ledger_of(call.key)
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            lines = [line for line in f.read().split("\n") if line]
    except FileNotFoundError:
        lines = []
    if len(lines) > 1:
        return None  # applied more than once: not this probe's to vouch for
    if lines:
        return Applied({"by": "probe", "effect": json.loads(lines[0])})
    return NotApplied("the ledger has no entry for this key")


async def probe_async(call: HeldCall) -> Any:
    return await asyncio.to_thread(probe, call)


def told(call: HeldCall, said: str, decision: str) -> None:
    say({"key": call.key, "executionId": call.execution_id, "state": call.state, "said": said, "decision": decision})


def stats_of(resolver: Any) -> dict[str, Any]:
    s = resolver.stats
    return {name: getattr(s, name) for name in ("sweeps", "probed", "applied", "not_applied", "unknown", "skipped", "late", "errors", "last_error")}


def run_sync() -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    client = Idemgate(URL, TOKEN, timeout=10, probe_timeout=PROBE_TIMEOUT)
    resolver = client.start_resolver({TOOL: probe}, interval=INTERVAL, holder=HOLDER, on_decision=told)
    say({"ready": True, "mode": "sync"})
    while not stop.wait(0.5):
        pass
    resolver.stop(10)
    client.close(5)
    say({"stats": stats_of(resolver)})


async def run_async() -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    async with AsyncIdemgate(URL, TOKEN, timeout=10, probe_timeout=PROBE_TIMEOUT) as client:
        resolver = client.start_resolver({TOOL: probe_async}, interval=INTERVAL, holder=HOLDER, on_decision=told)
        say({"ready": True, "mode": "async"})
        await stop.wait()
        await resolver.stop(10)
    say({"stats": stats_of(resolver)})


if MODE == "async":
    asyncio.run(run_async())
else:
    run_sync()
