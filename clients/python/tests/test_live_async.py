"""Async guarding, invoke(), list_tools() and the replay cache against a live Idemgate (IDEMGATE_URL,
IDEMGATE_TOKEN): the fault suite (test/faults/python-client.test.ts) starts one and runs these."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

import idemgate
from idemgate import AsyncIdemgate, FinalError, Idemgate, OutcomeUnknownError, idempotent

URL = os.environ.get("IDEMGATE_URL", "")
TOKEN = os.environ.get("IDEMGATE_TOKEN", "")
TOOL = "ledger.record"

pytestmark = pytest.mark.live


@pytest.fixture(params=["httpx", "threads"])
async def client(request: pytest.FixtureRequest) -> AsyncIterator[AsyncIdemgate]:
    assert URL, "needs a live Idemgate: set IDEMGATE_URL and IDEMGATE_TOKEN"
    c = AsyncIdemgate(URL, TOKEN, timeout=15, use_httpx=request.param == "httpx")
    yield c
    assert await c.aclose()


class Ledger:
    def __init__(self) -> None:
        self.account = f"acct-{uuid.uuid4().hex[:10]}"
        self.entries: list[dict[str, Any]] = []

    def args(self, amount: int = 500) -> dict[str, Any]:
        return {"account": self.account, "amountCents": amount, "currency": "EUR"}

    async def book(self, args: Any) -> dict[str, Any]:
        await asyncio.sleep(0.01)
        self.entries.append(dict(args))
        return {"entryId": f"e{len(self.entries)}", "account": args["account"], "amountCents": args["amountCents"]}


async def test_an_async_def_under_idempotent_runs_once_per_key_and_its_result_is_replayed(client: AsyncIdemgate) -> None:
    ledger = Ledger()

    @idempotent(client, tool=TOOL, key=lambda order_id, **_: f"order-{order_id}-{ledger.account}", arguments=lambda order_id, amount_cents: ledger.args(amount_cents))
    async def record(order_id: str, amount_cents: int) -> dict[str, Any]:
        return await ledger.book(ledger.args(amount_cents))

    first = await record("o-1", 700)
    assert first["entryId"] == "e1"
    assert [await record("o-1", 700) for _ in range(2)] == [first, first]
    assert len(ledger.entries) == 1
    # another process (a client without this one's replay cache) gets the stored result from Idemgate
    other = AsyncIdemgate(URL, TOKEN, replay_cache=False)
    assert await other.guard(TOOL, ledger.args(700), ledger.book, key=f"order-o-1-{ledger.account}") == first
    await other.aclose()
    await record("o-2", 700)
    assert len(ledger.entries) == 2


async def test_an_async_def_decorated_with_the_sync_client_runs_once_per_key() -> None:
    ledger = Ledger()
    with Idemgate(URL, TOKEN, timeout=15) as client:

        @idempotent(client, tool=TOOL, key=lambda order_id: f"order-{order_id}-{ledger.account}", arguments=lambda order_id: ledger.args())
        async def record(order_id: str) -> dict[str, Any]:
            return await ledger.book(ledger.args())

        first = await record("o-1")
        assert await record("o-1") == first
    assert len(ledger.entries) == 1


async def test_fifty_concurrent_async_calls_of_one_key_run_it_once(client: AsyncIdemgate) -> None:
    ledger = Ledger()
    key = f"race-{uuid.uuid4()}"

    async def slow(args: Any) -> dict[str, Any]:
        await asyncio.sleep(0.3)
        return await ledger.book(args)

    results = await asyncio.gather(*(client.guard(TOOL, ledger.args(), slow, key=key) for _ in range(50)))
    assert len(ledger.entries) == 1
    assert results == [results[0]] * 50


async def test_a_task_cancelled_while_its_function_runs_holds_the_key_as_unknown(client: AsyncIdemgate) -> None:
    ledger = Ledger()
    key = f"cancel-{uuid.uuid4()}"
    started = asyncio.Event()

    async def charge(args: Any) -> None:
        await ledger.book(args)
        started.set()
        await asyncio.sleep(60)

    task = asyncio.ensure_future(client.guard(TOOL, ledger.args(), charge, key=key))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await client.flush(timeout=10)
    with pytest.raises(OutcomeUnknownError) as again:
        await client.guard(TOOL, ledger.args(), ledger.book, key=key)
    assert (again.value.status, again.value.code) == (409, "outcome_unknown")
    assert len(ledger.entries) == 1


async def test_the_key_from_the_action_context(client: AsyncIdemgate) -> None:
    ledger = Ledger()
    run_id = f"run-{uuid.uuid4()}"

    @idempotent(client, tool=TOOL)
    async def record(account: str, amountCents: int, currency: str) -> dict[str, Any]:  # noqa: N803 - the tool's argument names
        return await ledger.book({"account": account, "amountCents": amountCents, "currency": currency})

    args = ledger.args()
    for _ in range(3):  # a resumed run, a model re-emitting the call: the same action, the same key
        with idemgate.action(key=idemgate.action_key(run_id, 1, TOOL, args), session=run_id):
            await record(**args)
    assert len(ledger.entries) == 1


async def test_the_replay_cache_answers_from_memory_and_reports_the_replay(client: AsyncIdemgate) -> None:
    ledger = Ledger()
    key = f"cache-{uuid.uuid4()}"
    first = await client.guard(TOOL, ledger.args(), ledger.book, key=key, session="py-cache")
    core = client._core
    assert core.memory is not None
    hits = core.memory.hits
    assert await client.guard(TOOL, ledger.args(), ledger.book, key=key, session="py-cache") == first
    assert core.memory.hits == hits + 1
    assert await client.flush(timeout=10)
    assert core.reporter.delivered >= 1 and core.reporter.dropped == 0
    assert len(ledger.entries) == 1


async def test_invoke_and_list_tools_for_the_tools_idemgate_runs(client: AsyncIdemgate) -> None:
    tools = {t["name"]: t for t in await client.list_tools()}
    assert tools[TOOL]["source"] == "client"
    assert tools["payments.charge"]["source"] != "client"
    key = f"inv-{uuid.uuid4()}"
    args = {"customerId": f"cus_{uuid.uuid4().hex[:6]}", "amountCents": 1250, "currency": "EUR"}
    charge = await client.invoke("payments.charge", args, key=key)
    assert isinstance(charge, dict) and charge.get("amountCents") == 1250
    assert await client.invoke("payments.charge", args, key=key) == charge
    with pytest.raises(FinalError) as declined:
        await client.invoke("payments.charge", {**args, "simulate": {"outcome": "decline"}}, key=f"inv-{uuid.uuid4()}")
    assert declined.value.status == 402


async def test_guarding_a_tool_idemgate_runs_is_its_400_and_nothing_runs(client: AsyncIdemgate) -> None:
    ledger = Ledger()
    with pytest.raises(idemgate.InvalidRequestError) as caught:
        await client.guard("payments.charge", {"customerId": "c", "amountCents": 1, "currency": "EUR"}, ledger.book, key=f"k-{uuid.uuid4()}")
    assert caught.value.status == 400
    assert "runs: client" in str(caught.value)
    assert ledger.entries == []


def test_sync_invoke_and_list_tools() -> None:
    with Idemgate(URL, TOKEN, timeout=15) as client:
        names = [t["name"] for t in client.list_tools()]
        assert TOOL in names
        args = {"customerId": f"cus_{uuid.uuid4().hex[:6]}", "amountCents": 10, "currency": "EUR"}
        key = f"inv-{uuid.uuid4()}"
        assert client.invoke("payments.charge", args, key=key) == client.invoke("payments.charge", args, key=key)
