"""The Python client's share of `npm run bench` (bench/python-bench.ts starts it against its server).

Environment: IDEMGATE_URL, IDEMGATE_TOKEN, REDIS_URL, BENCH_PREFIX (Redis keys of the redis-py pair),
BENCH_TAG (unique per round), BENCH_CALLS. One caller, calls in sequence, a no-op guarded function
(what is measured is what guarding it adds):

- the function called directly (sync and ``async def``);
- a first execution (a fresh key per call) through ``Idemgate.guard`` (sync) and ``AsyncIdemgate.guard``;
- a replay (one key, done) through both, replay cache on (the default);
- the floor a hand-written Python decorator pays on Redis: ``SET key NX PX`` then ``SET key result``
  with redis-py, a fresh key per call.

Prints one JSON object: per contender its p50 and p99 in milliseconds and its calls/s.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

import redis
from idemgate import AsyncIdemgate, Idemgate

TOOL = "ledger.record"
ARGS = {"account": "acct-bench", "amountCents": 1000, "currency": "EUR"}
RESULT = {"ok": True}
URL = os.environ["IDEMGATE_URL"]
TOKEN = os.environ["IDEMGATE_TOKEN"]
TAG = os.environ.get("BENCH_TAG", "t")
CALLS = int(os.environ.get("BENCH_CALLS", "300"))


def fn(_args: Any) -> dict[str, Any]:
    return RESULT


async def afn(_args: Any) -> dict[str, Any]:
    return RESULT


def figures(latencies: list[float], elapsed: float) -> dict[str, float]:
    ordered = sorted(latencies)

    def q(p: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, int(-(-p * len(ordered) // 1)) - 1))]

    return {"p50": q(0.5) * 1000, "p99": q(0.99) * 1000, "throughput": len(latencies) / elapsed}


def time_sync(n: int, call: Callable[[int], Any]) -> dict[str, float]:
    latencies = []
    t0 = time.perf_counter()
    for i in range(n):
        s = time.perf_counter()
        call(i)
        latencies.append(time.perf_counter() - s)
    return figures(latencies, time.perf_counter() - t0)


async def time_async(n: int, call: Callable[[int], Awaitable[Any]]) -> dict[str, float]:
    latencies = []
    t0 = time.perf_counter()
    for i in range(n):
        s = time.perf_counter()
        await call(i)
        latencies.append(time.perf_counter() - s)
    return figures(latencies, time.perf_counter() - t0)


def main() -> None:
    out: dict[str, Any] = {}
    sync_client = Idemgate(URL, TOKEN)
    r = redis.Redis.from_url(os.environ["REDIS_URL"])
    prefix = os.environ["BENCH_PREFIX"]

    def pair(i: int, tag: str) -> Any:
        key = f"{prefix}:{tag}:{i}"
        if r.set(key, "inflight", nx=True, px=60_000):
            result = fn(ARGS)
            r.set(key, json.dumps(result), px=86_400_000)
            return result
        return json.loads(r.get(key) or b"null")

    # warm up: connections, the server's paths
    for i in range(50):
        sync_client.guard(TOOL, ARGS, fn, key=f"pywarm-{TAG}-s-{i}")
        pair(i, f"warm-{TAG}")
    sync_client.guard(TOOL, ARGS, fn, key=f"pyreplay-{TAG}-s")

    out["direct"] = time_sync(CALLS, lambda i: fn(ARGS))
    out["redis-py SET NX + SET"] = time_sync(CALLS, lambda i: pair(i, TAG))
    out["sync first execution"] = time_sync(CALLS, lambda i: sync_client.guard(TOOL, ARGS, fn, key=f"pyfirst-{TAG}-s-{i}"))
    out["sync replay"] = time_sync(CALLS * 10, lambda i: sync_client.guard(TOOL, ARGS, fn, key=f"pyreplay-{TAG}-s"))

    async def run_async() -> None:
        async with AsyncIdemgate(URL, TOKEN) as client:
            for i in range(50):
                await client.guard(TOOL, ARGS, afn, key=f"pywarm-{TAG}-a-{i}")
            await client.guard(TOOL, ARGS, afn, key=f"pyreplay-{TAG}-a")
            out["async direct"] = await time_async(CALLS, lambda i: afn(ARGS))
            out["async first execution"] = await time_async(CALLS, lambda i: client.guard(TOOL, ARGS, afn, key=f"pyfirst-{TAG}-a-{i}"))
            out["async replay"] = await time_async(CALLS * 10, lambda i: client.guard(TOOL, ARGS, afn, key=f"pyreplay-{TAG}-a"))

    asyncio.run(run_async())
    close = getattr(sync_client, "close", None)
    if callable(close):
        close()
    r.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
