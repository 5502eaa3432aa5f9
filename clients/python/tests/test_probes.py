"""Probes against the fake server: a guard's own probe, asked once before an unknown outcome is
reported, and the resolver (sync thread and asyncio task) that lists held calls, claims them one at a
time and answers with what the probe said."""

from __future__ import annotations

import asyncio
import threading
from datetime import datetime, timezone
from typing import Any

import pytest
from fake_server import FakeIdemgate, KeyStore, ProbeStore, ok, problem, reserved

from idemgate import Applied, AsyncIdemgate, FinalError, HeldCall, Idemgate, NotApplied, NotAppliedError, OutcomeUnknownError, RetryPolicy, idempotent


@pytest.fixture
def fake() -> Any:
    server = FakeIdemgate()
    yield server
    server.close()


def sync_client(fake: FakeIdemgate, **options: Any) -> Idemgate:
    return Idemgate(fake.url, "idg_test", timeout=5, wait_seconds=0, retry=RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.05), flush_timeout=0.5, **options)


def async_client(fake: FakeIdemgate, **options: Any) -> AsyncIdemgate:
    return AsyncIdemgate(fake.url, "idg_test", timeout=5, wait_seconds=0, retry=RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.05), flush_timeout=0.5, **options)


def timed_out(_: Any) -> Any:
    raise TimeoutError("the payment provider did not answer in 30 s")


ARGS = {"orderId": "o-42", "amountCents": 500}


# ---- guard(probe=...) -------------------------------------------------------------------------------


def settled(fake: FakeIdemgate) -> list[Any]:
    return [s.body for s in fake.seen if s.path.endswith(("/complete", "/release"))]


def test_guard_probe_applied_stores_and_returns_the_probes_result(fake: FakeIdemgate) -> None:
    fake.on("/reservations", [reserved("exec-9")])
    fake.on("/complete", [ok()])
    asked: list[HeldCall] = []

    def probe(call: HeldCall) -> Any:
        asked.append(call)
        return Applied({"chargeId": "ch_1", "orderId": call.arguments["orderId"] if call.arguments else None})

    with sync_client(fake) as client:
        result = client.guard("payments.charge", ARGS, timed_out, key="order-o-42", probe=probe)
    assert result == {"chargeId": "ch_1", "orderId": "o-42"}
    assert settled(fake) == [{"token": 7, "status": 200, "body": {"chargeId": "ch_1", "orderId": "o-42"}}]
    (call,) = asked
    assert (call.tool, call.key, call.execution_id, call.arguments, call.state, call.lease_ended) == ("payments.charge", "order-o-42", "exec-9", ARGS, "running", False)
    assert isinstance(call.error, TimeoutError)
    assert call.started_at is not None and call.started_at.tzinfo is not None
    assert call.note is not None and "TimeoutError" in call.note


def test_guard_probe_not_applied_releases_the_key_and_raises_the_functions_error(fake: FakeIdemgate) -> None:
    fake.on("/reservations", [reserved()])
    fake.on("/release", [ok()])
    with sync_client(fake) as client, pytest.raises(TimeoutError, match="did not answer in 30 s"):
        client.guard("payments.charge", ARGS, timed_out, key="order-o-42", probe=lambda call: {"applied": False, "note": "no charge for o-42"})
    (release,) = settled(fake)
    assert release["outcome"] == "not_run"
    assert "no charge for o-42" in release["note"] and "TimeoutError" in release["note"]


@pytest.mark.parametrize(
    ("probe", "said"),
    [
        (lambda call: None, "answered None"),
        (lambda call: "yes", "answered str"),
        (lambda call: Applied(object()), "not JSON-serialisable"),
        (lambda call: Applied({"x": 1}, status=302), "status 302"),
        (timed_out, "raised TimeoutError"),
    ],
)
def test_guard_probe_that_cannot_tell_holds_the_key_as_unknown(fake: FakeIdemgate, probe: Any, said: str) -> None:
    fake.on("/reservations", [reserved()])
    fake.on("/release", [ok()])
    with sync_client(fake) as client, pytest.raises(OutcomeUnknownError) as caught:
        client.guard("payments.charge", ARGS, timed_out, key="order-o-42", probe=probe)
    assert isinstance(caught.value.__cause__, TimeoutError)
    (release,) = settled(fake)
    assert release["outcome"] == "unknown"
    assert said in release["note"]


def test_guard_probe_not_applied_then_the_retry_runs_once(fake: FakeIdemgate) -> None:
    store = KeyStore()
    store.mount(fake)
    runs: list[int] = []

    def flaky(_: Any) -> Any:
        runs.append(1)
        if len(runs) == 1:
            raise TimeoutError("connect timed out")
        return {"chargeId": "ch_2"}

    with sync_client(fake) as client:
        with pytest.raises(TimeoutError):
            client.guard("payments.charge", ARGS, flaky, key="order-o-42", probe=lambda call: NotApplied())
        assert client.guard("payments.charge", ARGS, flaky, key="order-o-42", probe=lambda call: NotApplied()) == {"chargeId": "ch_2"}
        assert client.guard("payments.charge", ARGS, flaky, key="order-o-42") == {"chargeId": "ch_2"}
    assert len(runs) == 2


def test_guard_probe_that_does_not_answer_in_time_is_unknown(fake: FakeIdemgate) -> None:
    fake.on("/reservations", [reserved()])
    fake.on("/release", [ok()])
    hang = threading.Event()
    try:
        with sync_client(fake, probe_timeout=0.2) as client, pytest.raises(OutcomeUnknownError):
            client.guard("payments.charge", ARGS, timed_out, key="order-o-42", probe=lambda call: hang.wait(30))
    finally:
        hang.set()
    (release,) = settled(fake)
    assert release["outcome"] == "unknown" and "did not answer within 0.2 s" in release["note"]


def test_guard_probe_applied_with_a_4xx_status_is_stored_and_raised_as_final(fake: FakeIdemgate) -> None:
    fake.on("/reservations", [reserved()])
    fake.on("/complete", [ok()])
    with sync_client(fake) as client, pytest.raises(FinalError) as caught:
        client.guard("payments.charge", ARGS, timed_out, key="order-o-42", probe=lambda call: Applied({"code": "card_declined"}, status=402))
    assert (caught.value.status, caught.value.body) == (402, {"code": "card_declined"})
    assert settled(fake) == [{"token": 7, "status": 402, "body": {"code": "card_declined"}}]


def test_guard_probe_is_not_asked_when_the_outcome_is_known(fake: FakeIdemgate) -> None:
    store = KeyStore()
    store.mount(fake)
    asked: list[HeldCall] = []

    def probe(call: HeldCall) -> Any:
        asked.append(call)
        return Applied({"wrong": True})

    def not_applied(_: Any) -> Any:
        raise NotAppliedError("refused before sending")

    def declined(_: Any) -> Any:
        raise FinalError(402, {"code": "card_declined"})

    with sync_client(fake) as client:
        assert client.guard("payments.charge", ARGS, lambda a: {"chargeId": "ch_ok"}, key="k-ok", probe=probe) == {"chargeId": "ch_ok"}
        with pytest.raises(NotAppliedError):
            client.guard("payments.charge", ARGS, not_applied, key="k-na", probe=probe)
        with pytest.raises(FinalError):
            client.guard("payments.charge", ARGS, declined, key="k-final", probe=probe)
    assert asked == []


def test_guard_refuses_a_probe_that_is_not_callable(fake: FakeIdemgate) -> None:
    with sync_client(fake) as client, pytest.raises(TypeError, match="probe must be a function"):
        client.guard("payments.charge", ARGS, timed_out, key="k", probe="ask stripe")  # type: ignore[arg-type]
    assert fake.seen == []


def test_idempotent_probe_gets_the_sent_arguments_and_a_retry_replays_its_result(fake: FakeIdemgate) -> None:
    store = KeyStore()
    store.mount(fake)
    runs: list[str] = []
    with sync_client(fake) as client:

        @idempotent(client, tool="payments.charge", key=lambda order_id, **_: f"order-{order_id}", probe=lambda call: Applied({"chargeId": f"ch_{call.arguments['order_id']}"}))  # type: ignore[index]
        def charge(order_id: str, amount_cents: int) -> dict[str, Any]:
            runs.append(order_id)
            raise ConnectionResetError("reset after the request was sent")

        assert charge("o-7", 500) == {"chargeId": "ch_o-7"}
        assert charge("o-7", 500) == {"chargeId": "ch_o-7"}
    assert runs == ["o-7"]


async def test_async_guard_awaits_an_async_probe(fake: FakeIdemgate) -> None:
    fake.on("/reservations", [reserved()])
    fake.on("/complete", [ok()])

    async def charge(_: Any) -> Any:
        await asyncio.sleep(0)
        raise TimeoutError("read timed out")

    async def probe(call: HeldCall) -> Any:
        await asyncio.sleep(0)
        return {"applied": True, "result": {"chargeId": "ch_async"}}

    async with async_client(fake, use_httpx=False) as client:
        assert await client.guard("payments.charge", ARGS, charge, key="order-o-42", probe=probe) == {"chargeId": "ch_async"}
    assert settled(fake) == [{"token": 7, "status": 200, "body": {"chargeId": "ch_async"}}]


async def test_async_decorator_with_a_sync_probe_that_says_not_applied(fake: FakeIdemgate) -> None:
    fake.on("/reservations", [reserved()])
    fake.on("/release", [ok()])
    async with async_client(fake, use_httpx=False) as client:

        @idempotent(client, tool="payments.charge", key=lambda order_id: f"order-{order_id}", probe=lambda call: NotApplied("no such charge"))
        async def charge(order_id: str) -> Any:
            raise TimeoutError("read timed out")

        with pytest.raises(TimeoutError):
            await charge("o-1")
    (release,) = settled(fake)
    assert release["outcome"] == "not_run" and "no such charge" in release["note"]


async def test_async_guard_cancelled_while_its_probe_runs_holds_the_key_as_unknown(fake: FakeIdemgate) -> None:
    fake.on("/reservations", [reserved()])
    fake.on("/release", [ok()])
    started = asyncio.Event()

    async def probe(call: HeldCall) -> Any:
        started.set()
        await asyncio.sleep(30)

    async with async_client(fake, use_httpx=False) as client:
        task = asyncio.ensure_future(client.guard("payments.charge", ARGS, timed_out, key="order-o-42", probe=probe))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await client.flush(5)
    (release,) = settled(fake)
    assert release["outcome"] == "unknown" and "interrupted while its probe ran" in release["note"]


# ---- the resolver -----------------------------------------------------------------------------------


def test_resolver_claims_asks_and_answers_each_held_call(fake: FakeIdemgate) -> None:
    store = ProbeStore(page_size=2)
    store.mount(fake)
    charged = {"o-1": {"chargeId": "ch_1"}}
    refunded_never = {"o-2"}
    ids = {order: store.hold("payments.charge", f"order-{order}", {"orderId": order, "amountCents": 500}) for order in ("o-1", "o-2", "o-3")}
    asked: list[HeldCall] = []

    def probe(call: HeldCall) -> Any:
        asked.append(call)
        order = str((call.arguments or {})["orderId"])
        if order in charged:
            return Applied(charged[order])
        if order in refunded_never:
            return NotApplied("the provider has no charge for it")
        return None

    told: list[tuple[str, str, str]] = []
    with sync_client(fake) as client, client.start_resolver({"payments.charge": probe}, interval=0.05, holder="worker-7", on_decision=lambda call, said, decision: told.append((call.key, said, decision))) as resolver:
        store.wait_for(lambda: len(store.answers) >= 3)
    assert not resolver.running
    assert store.decided == {ids["o-1"]: "applied", ids["o-2"]: "not_applied"}
    bodies = {eid: body for eid, body in store.answers}
    assert bodies[ids["o-1"]] == {"claim": bodies[ids["o-1"]]["claim"], "outcome": "applied", "status": 200, "body": {"chargeId": "ch_1"}}
    assert bodies[ids["o-2"]]["outcome"] == "not_applied" and bodies[ids["o-2"]]["note"] == "the provider has no charge for it"
    assert bodies[ids["o-3"]]["outcome"] == "unknown" and "None" in bodies[ids["o-3"]]["note"]
    assert all(body == {"holder": "worker-7", "leaseMs": 30000} for _, body in store.claims_seen)
    first = asked[0]
    assert (first.tool, first.scope, first.state, first.lease_ended, first.attempts) == ("payments.charge", "tenant-a", "unknown", True, 0)
    assert first.started_at == datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    assert first.known["argumentsKept"] == "full"
    assert (resolver.stats.applied, resolver.stats.not_applied, resolver.stats.unknown) == (1, 1, 1)
    assert sorted(told) == [("order-o-1", "applied", "resolved"), ("order-o-2", "not_applied", "released"), ("order-o-3", "unknown", "none")]
    # the third call backs off (nextProbeAt a minute away): not claimed again
    assert len(store.claims_seen) == 3


def test_resolver_skips_calls_backing_off_or_claimed_elsewhere(fake: FakeIdemgate) -> None:
    store = ProbeStore()
    store.mount(fake)
    store.hold("payments.charge", "later", {"orderId": "o-9"}, next_probe_at="2999-01-01T00:00:00Z")
    claimed = store.hold("payments.charge", "elsewhere", {"orderId": "o-8"})
    store.calls[claimed]["_claim"], store.calls[claimed]["_claim_until"] = "someone", float("inf")
    due = store.hold("payments.charge", "due", {"orderId": "o-7"})
    asked: list[str] = []

    def probe(call: HeldCall) -> Any:
        asked.append(call.key)
        return Applied({"ok": True})

    with sync_client(fake) as client:
        resolver = client.start_resolver({"payments.charge": probe}, interval=0.05)
        store.wait_for(lambda: due in store.decided)
        fake.wait_for(lambda seen: sum(s.path.endswith("/probe/claim") for s in seen) >= 3)
        resolver.stop()
    assert set(asked) == {"due"}
    assert resolver.stats.skipped >= 1
    assert [eid for eid, _ in store.claims_seen if eid != due and eid != claimed] == []


def test_resolver_answers_unknown_when_not_applied_is_refused_while_the_lease_runs(fake: FakeIdemgate) -> None:
    store = ProbeStore()
    store.mount(fake)
    eid = store.hold("payments.charge", "running", {"orderId": "o-1"}, lease_ended=False)
    with sync_client(fake) as client, client.start_resolver({"payments.charge": lambda call: NotApplied()}, interval=0.05):
        store.wait_for(lambda: any(body["outcome"] == "unknown" for _, body in store.answers))
    outcomes = [body["outcome"] for _, body in store.answers]
    assert outcomes[0] == "not_applied" and outcomes[-1] == "unknown"
    assert "lease had not ended" in store.answers[-1][1]["note"]
    assert eid not in store.decided


def test_resolver_holds_its_claim_until_a_lease_that_ends_soon_has_ended_then_releases(fake: FakeIdemgate) -> None:
    store = ProbeStore()
    store.mount(fake)
    eid = store.hold("payments.charge", "ending", {"orderId": "o-1"}, lease_ends_in=1.0)
    asked: list[HeldCall] = []

    def probe(call: HeldCall) -> Any:
        asked.append(call)
        return NotApplied("no charge")

    with sync_client(fake) as client, client.start_resolver({"payments.charge": probe}, interval=0.05):
        store.wait_for(lambda: eid in store.decided)
    assert store.decided == {eid: "not_applied"}
    assert [body["outcome"] for _, body in store.answers] == ["not_applied", "not_applied"]
    # asked again once the lease had ended: its first word could be stale by then
    assert [call.lease_ended for call in asked] == [False, True]


def test_resolver_asks_again_after_the_lease_and_takes_the_effect_that_came_meanwhile(fake: FakeIdemgate) -> None:
    store = ProbeStore()
    store.mount(fake)
    eid = store.hold("payments.charge", "late-effect", {"orderId": "o-1"}, lease_ends_in=1.0)
    charges: dict[str, Any] = {}

    def probe(call: HeldCall) -> Any:
        found = charges.get("o-1")
        if found is None:
            charges["o-1"] = {"chargeId": "ch_late"}  # the call, still running, takes effect just after
            return NotApplied()
        return Applied(found)

    with sync_client(fake) as client, client.start_resolver({"payments.charge": probe}, interval=0.05):
        store.wait_for(lambda: eid in store.decided)
    assert store.decided == {eid: "applied"}
    assert store.answers[-1][1]["body"] == {"chargeId": "ch_late"}


def test_resolver_probe_that_raises_or_hangs_is_still_unknown_and_the_resolver_goes_on(fake: FakeIdemgate) -> None:
    store = ProbeStore()
    store.mount(fake)
    broken = store.hold("payments.charge", "broken", {"orderId": "o-1"})
    slow = store.hold("payments.charge", "slow", {"orderId": "o-2"})
    fine = store.hold("payments.charge", "fine", {"orderId": "o-3"})
    hang = threading.Event()

    def probe(call: HeldCall) -> Any:
        if call.key == "broken":
            raise ConnectionError("the provider's API is down")
        if call.key == "slow":
            hang.wait(30)
        return Applied({"ok": call.key})

    try:
        with sync_client(fake) as client, client.start_resolver({"payments.charge": probe}, interval=0.05, probe_timeout=0.2):
            store.wait_for(lambda: fine in store.decided)
    finally:
        hang.set()
    notes = {eid: body.get("note", "") for eid, body in store.answers}
    assert "raised ConnectionError: the provider's API is down" in notes[broken]
    assert "did not answer within 0.2 s" in notes[slow]
    assert store.decided == {fine: "applied"}


def test_resolver_backs_off_while_idemgate_cannot_be_reached_and_carries_on(fake: FakeIdemgate) -> None:
    store = ProbeStore()
    eid = store.hold("payments.charge", "k", {"orderId": "o-1"})
    failures = iter(range(4))

    def held(seen: Any) -> Any:
        if next(failures, None) is not None:
            return None, None, {}  # the connection drops
        return store.route(seen)

    fake.on("/held", held)
    fake.on("/probe/claim", store.route)
    fake.on("/probe/answer", store.route)
    with sync_client(fake) as client, client.start_resolver({"payments.charge": lambda call: Applied(1)}, interval=0.05) as resolver:
        store.wait_for(lambda: eid in store.decided)
    assert resolver.stats.errors >= 1 and resolver.stats.last_error is not None
    assert store.decided == {eid: "applied"}


def test_resolver_stop_waits_for_the_probe_in_progress_and_answers_it(fake: FakeIdemgate) -> None:
    store = ProbeStore()
    store.mount(fake)
    eid = store.hold("payments.charge", "k", {"orderId": "o-1"})
    store.hold("payments.charge", "k2", {"orderId": "o-2"})
    started, go = threading.Event(), threading.Event()

    def probe(call: HeldCall) -> Any:
        started.set()
        go.wait(10)
        return Applied({"ok": True})

    with sync_client(fake) as client:
        resolver = client.start_resolver({"payments.charge": probe}, interval=0.05)
        assert started.wait(10)
        stopper = threading.Thread(target=resolver.stop)
        stopper.start()
        go.set()
        stopper.join(10)
        assert not resolver.running
    assert [e for e, _ in store.answers] == [eid]
    assert len(store.claims_seen) == 1


def test_resolvers_in_many_threads_and_tasks_probe_each_call_once(fake: FakeIdemgate) -> None:
    store = ProbeStore(page_size=7)
    store.mount(fake)
    ids = [store.hold("payments.charge", f"k-{i}", {"orderId": f"o-{i}"}) for i in range(40)]
    asked: list[str] = []
    lock = threading.Lock()

    def probe(call: HeldCall) -> Any:
        with lock:
            asked.append(call.execution_id)
        return Applied({"orderId": (call.arguments or {})["orderId"]})

    async def probe_async(call: HeldCall) -> Any:
        await asyncio.sleep(0.001)
        return probe(call)

    async def async_resolvers(stop: threading.Event) -> None:
        async with async_client(fake) as client:
            first = client.start_resolver({"payments.charge": probe_async}, interval=0.05)
            second = client.start_resolver({"payments.charge": probe_async}, interval=0.05)
            await asyncio.to_thread(stop.wait)
            await first.stop()
            await second.aclose()

    stop = threading.Event()
    loop_thread = threading.Thread(target=lambda: asyncio.run(async_resolvers(stop)))
    loop_thread.start()
    clients = [sync_client(fake) for _ in range(3)]
    resolvers = [c.start_resolver({"payments.charge": probe}, interval=0.05) for c in clients]
    try:
        store.wait_for(lambda: len(store.decided) == len(ids))
    finally:
        stop.set()
        for c in clients:
            c.close()
        loop_thread.join(20)
    assert sorted(asked) == sorted(ids)  # each call asked exactly once
    assert all(not r.running for r in resolvers)
    assert set(store.decided.values()) == {"applied"}


async def test_async_resolver_with_an_async_probe_and_the_clients_aclose_stops_it(fake: FakeIdemgate) -> None:
    store = ProbeStore()
    store.mount(fake)
    eid = store.hold("payments.charge", "k", {"orderId": "o-1"})

    async def probe(call: HeldCall) -> Any:
        await asyncio.sleep(0)
        return Applied({"chargeId": "ch_async"})

    client = async_client(fake)
    resolver = client.start_resolver({"payments.charge": probe}, interval=0.05)
    await asyncio.to_thread(store.wait_for, lambda: eid in store.decided)
    await client.aclose()
    assert not resolver.running
    assert store.answers[0][1]["body"] == {"chargeId": "ch_async"}


@pytest.mark.parametrize(
    ("probes", "options", "error"),
    [
        ({}, {}, TypeError),
        ([("payments.charge", timed_out)], {}, TypeError),
        ({"payments.charge": "not a function"}, {}, TypeError),
        ({"": timed_out}, {}, TypeError),
        ({"payments.charge": timed_out}, {"interval": 0}, ValueError),
        ({"payments.charge": timed_out}, {"probe_timeout": -1}, ValueError),
        ({"payments.charge": timed_out}, {"holder": "x" * 201}, ValueError),
    ],
)
def test_start_resolver_refuses_bad_input_before_anything_starts(fake: FakeIdemgate, probes: Any, options: Any, error: type) -> None:
    with sync_client(fake) as client, pytest.raises(error):
        client.start_resolver(probes, **options)
    assert fake.seen == []


def test_the_async_resolver_needs_a_running_loop(fake: FakeIdemgate) -> None:
    client = async_client(fake, use_httpx=False)
    with pytest.raises(RuntimeError, match="running event loop"):
        client.start_resolver({"payments.charge": timed_out})


def test_a_gateway_problem_on_the_claim_is_an_error_not_a_probe(fake: FakeIdemgate) -> None:
    store = ProbeStore()
    store.hold("payments.charge", "k", {"orderId": "o-1"})
    fake.on("/held", store.route)
    fake.on("/probe/claim", [problem(403, "forbidden")])
    asked: list[Any] = []
    with sync_client(fake) as client, client.start_resolver({"payments.charge": lambda call: asked.append(call)}, interval=0.05) as resolver:
        fake.wait_for(lambda seen: sum(s.path.endswith("/probe/claim") for s in seen) >= 2)
    assert asked == []
    assert resolver.stats.errors >= 1
