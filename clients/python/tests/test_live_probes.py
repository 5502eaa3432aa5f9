"""Probes against a live Idemgate (IDEMGATE_URL, IDEMGATE_TOKEN): the fault suite starts one and runs these.

The tool is a card charge guarded in this process: IDEMGATE_PROBE_TOOL, which the fault suite declares
(``runs: client``, a short lease, since a probe's "not applied" is taken only after the call's lease
has ended, and its arguments kept in full), else the demo tool ``ledger.record``. Each test keeps its
own provider (charges by order id), the guarded function charges and then loses its answer, and the
probe looks the charge up by its order id.
"""

from __future__ import annotations

import asyncio
import os
import threading
import uuid
from collections import Counter
from typing import Any, Optional

import pytest

from idemgate import Applied, AsyncIdemgate, HeldCall, Idemgate, NotApplied, OutcomeUnknownError

URL = os.environ.get("IDEMGATE_URL")
TOKEN = os.environ.get("IDEMGATE_TOKEN", "")
TOOL = os.environ.get("IDEMGATE_PROBE_TOOL", "ledger.record")

pytestmark = pytest.mark.live


class Provider:
    """A payment provider's ledger: charges by order id; ``book`` counts each application."""

    def __init__(self) -> None:
        self.entries: dict[str, list[dict[str, Any]]] = {}
        self.lock = threading.Lock()
        #: order -> how many times a probe was asked about its call
        self.asked: Counter[str] = Counter()
        #: probes of one call that ran at the same time (claims must prevent it)
        self.overlaps: list[str] = []
        self._active: set[str] = set()

    def book(self, args: Any) -> dict[str, Any]:
        order = order_of(args)
        with self.lock:
            entry = {"entryId": f"e-{uuid.uuid4().hex[:8]}", "orderId": order, "amountCents": args["amountCents"]}
            self.entries.setdefault(order, []).append(entry)
            return entry

    def lookup(self, order: str) -> Optional[dict[str, Any]]:
        with self.lock:
            found = self.entries.get(order)
            return found[0] if found else None

    def applications(self, order: str) -> int:
        with self.lock:
            return len(self.entries.get(order, []))

    def probe(self, orders: set[str]) -> Any:
        """The probe: the entry of the call's order, if any; calls of other tests: still unknown."""

        def probe(call: HeldCall) -> Any:
            order = order_of(call.arguments or {})
            if order not in orders:
                return None
            with self.lock:
                self.asked[order] += 1
                if call.execution_id in self._active:
                    self.overlaps.append(call.execution_id)
                self._active.add(call.execution_id)
            try:
                entry = self.lookup(order)
                return Applied(entry) if entry is not None else NotApplied(f"no entry for {order}")
            finally:
                with self.lock:
                    self._active.discard(call.execution_id)

        return probe


def args_for(order: str) -> dict[str, Any]:
    if TOOL == "ledger.record":
        return {"account": order, "amountCents": 500, "currency": "EUR"}
    return {"orderId": order, "amountCents": 500}


def order_of(args: Any) -> str:
    return str(args.get("orderId", args.get("account", "")))


def lose_answer_after(provider: Provider, effect: bool) -> Any:
    def fn(args: Any) -> Any:
        if effect:
            provider.book(args)
        raise TimeoutError("the provider's answer never came")

    return fn


@pytest.fixture
def client() -> Any:
    assert URL, "needs a live Idemgate: set IDEMGATE_URL and IDEMGATE_TOKEN"
    with Idemgate(str(URL), TOKEN, timeout=15) as c:
        yield c


def hold_unknown(client: Idemgate, provider: Provider, order: str, effect: bool) -> str:
    """A call held as unknown: the function booked (or did not) and then lost its answer."""
    key = f"probe-live-{uuid.uuid4()}"
    with pytest.raises(OutcomeUnknownError):
        client.guard(TOOL, args_for(order), lose_answer_after(provider, effect), key=key)
    return key


def test_a_guards_own_probe_finds_the_entry_the_timeout_hid_and_a_retry_replays_it(client: Idemgate) -> None:
    provider = Provider()
    order = f"o-{uuid.uuid4().hex[:10]}"
    key = f"probe-live-{uuid.uuid4()}"
    result = client.guard(TOOL, args_for(order), lose_answer_after(provider, True), key=key, probe=provider.probe({order}))
    assert result == provider.lookup(order)
    assert client.guard(TOOL, args_for(order), provider.book, key=key) == result
    assert provider.applications(order) == 1


def test_a_guards_own_probe_that_finds_nothing_frees_the_key_and_the_retry_runs_once(client: Idemgate) -> None:
    provider = Provider()
    order = f"o-{uuid.uuid4().hex[:10]}"
    key = f"probe-live-{uuid.uuid4()}"
    with pytest.raises(TimeoutError):
        client.guard(TOOL, args_for(order), lose_answer_after(provider, False), key=key, probe=provider.probe({order}))
    first = client.guard(TOOL, args_for(order), provider.book, key=key)
    assert client.guard(TOOL, args_for(order), provider.book, key=key) == first
    assert provider.applications(order) == 1


def test_the_resolver_resolves_held_calls_by_the_providers_word_and_retries_replay_or_run_once(client: Idemgate) -> None:
    provider = Provider()
    booked = {f"o-{uuid.uuid4().hex[:10]}": True for _ in range(4)}
    booked.update({f"o-{uuid.uuid4().hex[:10]}": False for _ in range(4)})
    keys = {order: hold_unknown(client, provider, order, effect) for order, effect in booked.items()}
    with client.start_resolver({TOOL: provider.probe(set(booked))}, interval=0.2, holder="live-test") as resolver:
        for order, key in keys.items():
            # the key decided: a retry answers without running (applied) or runs now (not applied)
            outcome = _settled(client, provider, order, key, resolver)
            assert outcome == ("replayed" if booked[order] else "ran"), (order, outcome, resolver.stats)
    for order in booked:
        assert provider.applications(order) == 1
    assert provider.overlaps == []
    _asked_as_expected(provider, booked)
    assert resolver.stats.applied >= 4 and resolver.stats.not_applied >= 4


def _settled(client: Idemgate, provider: Provider, order: str, key: str, resolver: Any) -> str:
    """Waits (on the resolver's answers) until the key is decided, then retries it once."""
    before = provider.applications(order)
    done = threading.Event()
    for _ in range(600):
        try:
            client.guard(TOOL, args_for(order), provider.book, key=key)
            done.set()
            break
        except OutcomeUnknownError:
            done.wait(0.1)  # still held: the resolver has not answered yet
    assert done.is_set(), f"{key} was never decided ({resolver.stats if resolver is not None else 'resolvers in threads and a task'})"
    return "ran" if provider.applications(order) > before else "replayed"


def test_resolvers_in_threads_and_an_async_task_probe_each_call_once() -> None:
    assert URL
    provider = Provider()
    orders = {f"o-{uuid.uuid4().hex[:10]}": i % 2 == 0 for i in range(12)}
    with Idemgate(str(URL), TOKEN, timeout=15) as setup:
        keys = {order: hold_unknown(setup, provider, order, effect) for order, effect in orders.items()}
    probe = provider.probe(set(orders))

    async def async_probe(call: HeldCall) -> Any:
        await asyncio.sleep(0.01)
        return probe(call)

    stop = threading.Event()

    async def async_side() -> None:
        async with AsyncIdemgate(str(URL), TOKEN, timeout=15) as aclient:
            async with aclient.start_resolver({TOOL: async_probe}, interval=0.2, holder="live-async"):
                await asyncio.to_thread(stop.wait, 120)

    loop_thread = threading.Thread(target=lambda: asyncio.run(async_side()))
    loop_thread.start()
    clients = [Idemgate(str(URL), TOKEN, timeout=15) for _ in range(2)]
    try:
        for i, c in enumerate(clients):
            c.start_resolver({TOOL: probe}, interval=0.2, holder=f"live-thread-{i}")
        with Idemgate(str(URL), TOKEN, timeout=15) as checker:
            for order, key in keys.items():
                outcome = _settled(checker, provider, order, key, None)
                assert outcome == ("replayed" if orders[order] else "ran"), (order, outcome)
    finally:
        stop.set()
        for c in clients:
            c.close()
        loop_thread.join(60)
    assert not loop_thread.is_alive()
    for order in orders:
        assert provider.applications(order) == 1
    # each held call was put to one probe at a time, whichever process claimed it
    assert provider.overlaps == []
    _asked_as_expected(provider, orders)


def _asked_as_expected(provider: Provider, booked: dict[str, bool]) -> None:
    """A call that happened: asked once. One that did not: once, or twice when the first answer came
    while its lease still ran (Idemgate refuses "not applied" then; the same claim asks again after it)."""
    for order, happened in booked.items():
        assert provider.asked[order] in ((1,) if happened else (1, 2)), (order, happened, provider.asked)
