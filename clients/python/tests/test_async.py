"""Async guarding against the fake server: the decorator on ``async def``, AsyncIdemgate, cancellation, races."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from fake_server import FakeIdemgate, KeyStore, Raw, Seen, done, ok, problem, reserved

import idemgate
from idemgate import AsyncIdemgate, FinalError, Idemgate, NotAppliedError, OutcomeUnknownError, RetryPolicy, idempotent


@pytest.fixture
def fake() -> Iterator[FakeIdemgate]:
    server = FakeIdemgate()
    yield server
    server.close()


@pytest.fixture(params=["httpx", "threads"])
async def client(request: pytest.FixtureRequest, fake: FakeIdemgate) -> AsyncIterator[AsyncIdemgate]:
    c = AsyncIdemgate(fake.url, "idg_test", timeout=5, wait_seconds=3, retry=RetryPolicy(max_attempts=4, base_delay=0.01), flush_timeout=2, use_httpx=request.param == "httpx")
    yield c
    await c.aclose(timeout=2)


def sync_client(fake: FakeIdemgate) -> Idemgate:
    return Idemgate(fake.url, "idg_test", timeout=5, wait_seconds=3, retry=RetryPolicy(max_attempts=4, base_delay=0.01), flush_timeout=2)


class Ledger:
    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []

    async def post(self, account: str, amount_cents: int) -> dict[str, Any]:
        await asyncio.sleep(0)  # a real await: the function's body runs only when awaited
        self.entries.append({"account": account, "amountCents": amount_cents})
        return {"entry": len(self.entries), "account": account}


async def test_an_async_def_under_the_decorator_runs_once_and_its_result_is_stored(fake: FakeIdemgate, client: AsyncIdemgate) -> None:
    store = KeyStore()
    store.mount(fake)
    ledger = Ledger()

    @idempotent(client, tool="ledger.record", key=lambda account, amount_cents: f"{account}-{amount_cents}")
    async def post(account: str, amount_cents: int) -> dict[str, Any]:
        return await ledger.post(account, amount_cents)

    assert asyncio.iscoroutinefunction(post)
    assert post.__name__ == "post"
    first = await post("acct-1", 500)
    again = await post("acct-1", 500)
    assert first == {"entry": 1, "account": "acct-1"}
    assert again == first
    assert ledger.entries == [{"account": "acct-1", "amountCents": 500}]
    complete = [s for s in fake.seen if s.path.endswith("/complete")]
    assert [c.body["body"] for c in complete] == [first]


async def test_an_async_def_with_a_sync_client_runs_once_too(fake: FakeIdemgate) -> None:
    store = KeyStore()
    store.mount(fake)
    ledger = Ledger()
    with sync_client(fake) as client:

        @idempotent(client, tool="ledger.record", key=lambda account, amount_cents: f"{account}-{amount_cents}")
        async def post(account: str, amount_cents: int) -> dict[str, Any]:
            return await ledger.post(account, amount_cents)

        assert await post("a", 1) == await post("a", 1)
    assert len(ledger.entries) == 1


async def test_the_replay_cache_answers_a_second_call_without_a_request_and_reports_it(fake: FakeIdemgate, client: AsyncIdemgate) -> None:
    store = KeyStore()
    store.mount(fake)
    fake.on("/api/v1/replays", [ok({"recorded": 1, "ignored": 0})])
    ledger = Ledger()
    first = await client.guard("ledger.record", {"account": "a"}, lambda args: ledger.post(args["account"], 1), key="k-cache", session="run-1")
    requests = len(fake.seen)
    again = await client.guard("ledger.record", {"account": "a"}, lambda args: ledger.post(args["account"], 1), key="k-cache", session="run-1")
    assert again == first
    assert len(ledger.entries) == 1
    fake.wait_for(lambda seen: any(s.path == "/api/v1/replays" for s in seen))
    reports = [s for s in fake.seen if s.path == "/api/v1/replays"]
    assert len(fake.seen) == requests + 1
    (item,) = reports[0].body["replays"]
    assert item["key"] == "k-cache" and item["tool"] == "ledger.record" and item["session"] == "run-1"
    assert item["executionId"] == store.keys["k-cache"]["executionId"]


async def test_fifty_concurrent_calls_of_one_key_run_it_once(fake: FakeIdemgate, client: AsyncIdemgate) -> None:
    store = KeyStore()
    store.mount(fake)
    ledger = Ledger()
    gate = asyncio.Event()

    @idempotent(client, tool="ledger.record", key=lambda account, amount_cents: f"race-{account}")
    async def post(account: str, amount_cents: int) -> dict[str, Any]:
        await gate.wait()
        return await ledger.post(account, amount_cents)

    calls = [asyncio.ensure_future(post("a", 5)) for _ in range(50)]
    # the one that runs waits until all 50 have reserved or are held
    await asyncio.to_thread(fake.wait_for, lambda seen: len([s for s in seen if s.path.endswith("/reservations")]) >= 50)
    gate.set()
    results = await asyncio.gather(*calls)
    assert len(ledger.entries) == 1
    assert results == [results[0]] * 50


async def test_a_generator_is_refused_at_decoration(client: AsyncIdemgate) -> None:
    with pytest.raises(TypeError, match="generator"):

        @idempotent(client, tool="t", key=lambda: "k")
        async def agen() -> AsyncIterator[int]:
            yield 1

    with pytest.raises(TypeError, match="generator"):

        @idempotent(client, tool="t", key=lambda: "k")
        def gen() -> Iterator[int]:
            yield 1


async def test_a_final_error_and_not_applied_from_an_async_def(fake: FakeIdemgate, client: AsyncIdemgate) -> None:
    store = KeyStore()
    store.mount(fake)

    async def decline(_: Any) -> None:
        await asyncio.sleep(0)
        raise FinalError(402, {"code": "card_declined"})

    with pytest.raises(FinalError):
        await client.guard("t", {}, decline, key="f")
    with pytest.raises(FinalError) as again:
        await client.guard("t", {}, decline, key="f")
    assert again.value.replayed and again.value.body == {"code": "card_declined"}

    async def refuse(_: Any) -> None:
        raise NotAppliedError("the ledger was read-only")

    with pytest.raises(NotAppliedError):
        await client.guard("t", {}, refuse, key="n")
    assert "n" not in store.keys
    assert [s.body["outcome"] for s in fake.seen if s.path.endswith("/release")] == ["not_run"]


async def test_an_exception_from_an_async_def_holds_the_key_as_unknown(fake: FakeIdemgate, client: AsyncIdemgate) -> None:
    store = KeyStore()
    store.mount(fake)
    runs = []

    async def boom(_: Any) -> None:
        runs.append(1)
        raise ConnectionResetError("the answer was lost")

    with pytest.raises(OutcomeUnknownError) as first:
        await client.guard("t", {}, boom, key="u")
    assert isinstance(first.value.__cause__, ConnectionResetError)
    with pytest.raises(OutcomeUnknownError):
        await client.guard("t", {}, boom, key="u")
    assert runs == [1]


async def test_the_key_can_come_from_the_action_context(fake: FakeIdemgate, client: AsyncIdemgate) -> None:
    store = KeyStore()
    store.mount(fake)
    ledger = Ledger()

    @idempotent(client, tool="ledger.record")
    async def post(account: str, amount_cents: int) -> dict[str, Any]:
        return await ledger.post(account, amount_cents)

    key = idemgate.action_key("run-9", 3, "ledger.record", {"account": "a", "amount_cents": 1})
    with idemgate.action(key=key, session="run-9"):
        assert idemgate.current_action() == idemgate.Action(key, "run-9")
        await post("a", 1)
        await asyncio.gather(post("a", 1), post("a", 1))
    assert idemgate.current_action() is None
    assert len(ledger.entries) == 1
    reservation = next(s for s in fake.seen if s.path.endswith("/reservations"))
    assert reservation.headers["idempotency-key"] == key
    assert reservation.headers["idemgate-session"] == "run-9"
    with pytest.raises(TypeError, match="no key"):
        await post("a", 1)


# ---- cancellation ----------------------------------------------------------------------------------


async def test_cancelled_while_the_reservation_is_in_flight_releases_it_as_not_run(fake: FakeIdemgate, client: AsyncIdemgate) -> None:
    answer = threading.Event()
    arrived = threading.Event()

    def slow_reserve(_: Seen) -> Any:
        arrived.set()
        answer.wait(10)
        return reserved("exec-c1")

    fake.on("/reservations", slow_reserve)
    fake.on("/release", [ok()])
    ran = []

    async def fn(_: Any) -> None:
        ran.append(1)

    task = asyncio.ensure_future(client.guard("t", {}, fn, key="c1"))
    await asyncio.to_thread(arrived.wait, 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    answer.set()
    await asyncio.to_thread(fake.wait_for, lambda seen: any(s.path.endswith("/release") for s in seen))
    release = next(s for s in fake.seen if s.path.endswith("/release"))
    assert release.path == "/api/v1/executions/exec-c1/release"
    assert release.body["outcome"] == "not_run"
    assert ran == []


async def test_cancelled_while_the_function_runs_holds_the_key_as_unknown_and_reraises(fake: FakeIdemgate, client: AsyncIdemgate) -> None:
    fake.on("/reservations", [reserved("exec-c2")])
    fake.on("/release", [ok()])
    started = asyncio.Event()

    async def charge(_: Any) -> None:
        started.set()
        await asyncio.sleep(30)

    task = asyncio.ensure_future(client.guard("t", {}, charge, key="c2"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.to_thread(fake.wait_for, lambda seen: any(s.path.endswith("/release") for s in seen))
    release = next(s for s in fake.seen if s.path.endswith("/release"))
    assert release.body["outcome"] == "unknown"
    assert "CancelledError" in release.body["note"]
    assert not any(s.path.endswith("/complete") for s in fake.seen)


async def test_cancelled_while_the_result_is_being_stored_still_stores_it(fake: FakeIdemgate, client: AsyncIdemgate) -> None:
    arrived = threading.Event()
    answer = threading.Event()

    def slow_complete(_: Seen) -> Any:
        arrived.set()
        answer.wait(10)
        return problem(503, "unavailable")

    fake.on("/reservations", [reserved("exec-c3")])
    completes = iter([slow_complete])

    def complete(seen: Seen) -> Any:
        step = next(completes, None)
        return step(seen) if step else ok()

    fake.on("/complete", complete)

    async def fn(_: Any) -> dict[str, int]:
        return {"n": 1}

    task = asyncio.ensure_future(client.guard("t", {}, fn, key="c3"))
    await asyncio.to_thread(arrived.wait, 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    answer.set()
    await asyncio.to_thread(fake.wait_for, lambda seen: len([s for s in seen if s.path.endswith("/complete")]) >= 2)
    assert await client.flush(timeout=5)
    bodies = [s.body for s in fake.seen if s.path.endswith("/complete")]
    assert bodies == [{"token": 7, "status": 200, "body": {"n": 1}}] * len(bodies)


async def test_a_completion_in_flight_when_the_loop_shuts_down_is_still_delivered(fake: FakeIdemgate, client: AsyncIdemgate) -> None:
    # asyncio.run cancels every task left when its main coroutine ends (Ctrl-C included): the
    # request carrying the result is cancelled too, and the completion must go to the background
    arrived = threading.Event()
    answer = threading.Event()
    completes = iter([True])

    def complete(_: Seen) -> Any:
        if next(completes, False):
            arrived.set()
            answer.wait(10)
            return problem(503, "unavailable")
        return ok()

    fake.on("/reservations", [reserved("exec-c5")])
    fake.on("/complete", complete)

    async def fn(_: Any) -> dict[str, int]:
        return {"n": 5}

    task = asyncio.ensure_future(client.guard("t", {}, fn, key="c5"))
    await asyncio.to_thread(arrived.wait, 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for other in asyncio.all_tasks():
        if other is not asyncio.current_task():
            other.cancel()
    await asyncio.sleep(0)
    answer.set()
    await asyncio.to_thread(fake.wait_for, lambda seen: len([s for s in seen if s.path.endswith("/complete")]) >= 2)
    assert await client.flush(timeout=5)
    bodies = [s.body for s in fake.seen if s.path.endswith("/complete")]
    assert bodies == [{"token": 7, "status": 200, "body": {"n": 5}}] * len(bodies)


async def test_cancelled_during_the_reservations_backoff_reserves_nothing(fake: FakeIdemgate, client: AsyncIdemgate) -> None:
    conflict = (409, {"type": "/problems/conflict", "title": "c", "status": 409}, {"Content-Type": "application/problem+json", "Retry-After": "5"})
    fake.on("/reservations", [conflict])
    task = asyncio.ensure_future(client.guard("t", {}, lambda _: None, key="c4"))
    await asyncio.to_thread(fake.wait_for, lambda seen: len(seen) >= 1)
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert fake.paths() == ["reservations"]


# ---- heartbeats ------------------------------------------------------------------------------------


async def test_heartbeats_run_as_a_task_while_an_async_function_awaits(fake: FakeIdemgate, client: AsyncIdemgate) -> None:
    beats = []
    three = threading.Event()

    def heartbeat(seen: Seen) -> Any:
        beats.append(seen.body["token"])
        if len(beats) >= 3:
            three.set()
        return ok({"state": "reserved", "leaseMs": 300})

    fake.on("/reservations", [reserved(lease_seconds=0.3, lease_ms=True)])
    fake.on("/heartbeat", heartbeat)
    fake.on("/complete", [ok()])

    async def slow(_: Any) -> str:
        await asyncio.to_thread(three.wait, 10)
        return "done"

    assert await client.guard("t", {}, slow, key="hb") == "done"
    assert beats[:3] == [7, 7, 7]
    assert fake.paths()[-1] == "complete"


async def test_a_late_heartbeat_answer_after_the_completion_does_not_warn(fake: FakeIdemgate, client: AsyncIdemgate, caplog: pytest.LogCaptureFixture) -> None:
    in_flight = threading.Event()
    completed = threading.Event()

    def heartbeat(_: Seen) -> Any:
        in_flight.set()
        completed.wait(10)
        return problem(409, "stale_token")

    def complete(_: Seen) -> Any:
        completed.set()
        return ok()

    fake.on("/reservations", [reserved(lease_seconds=0.15, lease_ms=True)])
    fake.on("/heartbeat", heartbeat)
    fake.on("/complete", complete)

    async def fn(_: Any) -> str:
        await asyncio.to_thread(in_flight.wait, 10)
        return "ok"

    with caplog.at_level(logging.WARNING, logger="idemgate"):
        assert await client.guard("t", {}, fn, key="late-hb") == "ok"
        await asyncio.sleep(0.3)
    assert "no longer holds" not in caplog.text


def test_a_late_heartbeat_answer_after_the_completion_does_not_warn_sync(fake: FakeIdemgate, caplog: pytest.LogCaptureFixture) -> None:
    in_flight = threading.Event()
    answered = threading.Event()
    completed = threading.Event()

    def heartbeat(_: Seen) -> Any:
        in_flight.set()
        completed.wait(10)
        answered.set()
        return problem(409, "stale_token")

    def complete(_: Seen) -> Any:
        completed.set()
        return ok()

    fake.on("/reservations", [reserved(lease_seconds=0.15, lease_ms=True)])
    fake.on("/heartbeat", heartbeat)
    fake.on("/complete", complete)
    with sync_client(fake) as client, caplog.at_level(logging.WARNING, logger="idemgate"):
        assert client.guard("t", {}, lambda _: in_flight.wait(10) and "ok", key="late-hb") == "ok"
        answered.wait(10)
        threading.Event().wait(0.2)
    assert "no longer holds" not in caplog.text


async def test_a_replayed_done_answer_is_returned_without_running(fake: FakeIdemgate, client: AsyncIdemgate) -> None:
    fake.on("/reservations", [done({"chargeId": "ch_first"})])

    async def fn(_: Any) -> None:
        raise AssertionError("must not run")

    replay: Any = await client.guard("t", {}, fn, key="r")
    assert replay == {"chargeId": "ch_first"}


async def test_an_answer_httpx_cannot_decode_is_no_answer_the_result_is_returned_and_stored_later(fake: FakeIdemgate) -> None:
    # a proxy's broken gzip: httpx raises DecodingError, not a TransportError; the result must not be lost
    broken = (200, Raw("not gzip at all"), {"Content-Type": "application/json", "Content-Encoding": "gzip"})
    answers = iter([broken, broken])

    def complete(seen: Seen) -> Any:
        return next(answers, None) or ok({"state": "done", "status": 200, "body": seen.body.get("body"), "executionId": "exec-g"})

    fake.on("/reservations", [reserved("exec-g")])
    fake.on("/complete", complete)
    async with AsyncIdemgate(fake.url, "idg_test", timeout=5, retry=RetryPolicy(max_attempts=4, base_delay=0.01), flush_timeout=5, use_httpx=True) as client:

        async def fn(_: Any) -> dict[str, int]:
            return {"n": 9}

        assert await client.guard("t", {}, fn, key="gzip") == {"n": 9}
        assert await client.flush(timeout=5)
    bodies = [s.body for s in fake.seen if s.path.endswith("/complete")]
    assert len(bodies) == 3
    assert bodies == [{"token": 7, "status": 200, "body": {"n": 9}}] * 3
