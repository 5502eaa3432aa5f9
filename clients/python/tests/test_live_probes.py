"""Probes against a live Idemgate (IDEMGATE_URL, IDEMGATE_TOKEN): the fault suite starts one (with a
short demo lease, IDEMGATE_DEMO_LEASE_MS) and runs these.

The demo client-run tool ``ledger.record`` stands for a payment provider: each test keeps its own
ledger (a dict of entries by account, which is the "order id" here), the guarded function books an
entry and then loses its answer, and the probe looks the entry up by its account, as an application
would look a charge up by its order id.
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
TOOL = "ledger.record"

pytestmark = pytest.mark.live


class Provider:
    """A payment provider's ledger: entries by account; ``book`` counts each application."""

    def __init__(self) -> None:
        self.entries: dict[str, list[dict[str, Any]]] = {}
        self.lock = threading.Lock()
        #: account -> how many times a probe was asked about its call
        self.asked: Counter[str] = Counter()
        #: probes of one call that ran at the same time (claims must prevent it)
        self.overlaps: list[str] = []
        self._active: set[str] = set()

    def book(self, args: Any) -> dict[str, Any]:
        with self.lock:
            entry = {"entryId": f"e-{uuid.uuid4().hex[:8]}", "account": args["account"], "amountCents": args["amountCents"]}
            self.entries.setdefault(args["account"], []).append(entry)
            return entry

    def lookup(self, account: str) -> Optional[dict[str, Any]]:
        with self.lock:
            found = self.entries.get(account)
            return found[0] if found else None

    def applications(self, account: str) -> int:
        with self.lock:
            return len(self.entries.get(account, []))

    def probe(self, accounts: set[str]) -> Any:
        """The probe: the entry of the call's account, if any; calls of other tests: still unknown."""

        def probe(call: HeldCall) -> Any:
            account = str((call.arguments or {}).get("account", ""))
            if account not in accounts:
                return None
            with self.lock:
                self.asked[account] += 1
                if call.execution_id in self._active:
                    self.overlaps.append(call.execution_id)
                self._active.add(call.execution_id)
            try:
                entry = self.lookup(account)
                return Applied(entry) if entry is not None else NotApplied(f"no entry for {account}")
            finally:
                with self.lock:
                    self._active.discard(call.execution_id)

        return probe


def args_for(account: str) -> dict[str, Any]:
    return {"account": account, "amountCents": 500, "currency": "EUR"}


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


def hold_unknown(client: Idemgate, provider: Provider, account: str, effect: bool) -> str:
    """A call held as unknown: the function booked (or did not) and then lost its answer."""
    key = f"probe-live-{uuid.uuid4()}"
    with pytest.raises(OutcomeUnknownError):
        client.guard(TOOL, args_for(account), lose_answer_after(provider, effect), key=key)
    return key


def test_a_guards_own_probe_finds_the_entry_the_timeout_hid_and_a_retry_replays_it(client: Idemgate) -> None:
    provider = Provider()
    account = f"acct-{uuid.uuid4().hex[:10]}"
    key = f"probe-live-{uuid.uuid4()}"
    result = client.guard(TOOL, args_for(account), lose_answer_after(provider, True), key=key, probe=provider.probe({account}))
    assert result == provider.lookup(account)
    assert client.guard(TOOL, args_for(account), provider.book, key=key) == result
    assert provider.applications(account) == 1


def test_a_guards_own_probe_that_finds_nothing_frees_the_key_and_the_retry_runs_once(client: Idemgate) -> None:
    provider = Provider()
    account = f"acct-{uuid.uuid4().hex[:10]}"
    key = f"probe-live-{uuid.uuid4()}"
    with pytest.raises(TimeoutError):
        client.guard(TOOL, args_for(account), lose_answer_after(provider, False), key=key, probe=provider.probe({account}))
    first = client.guard(TOOL, args_for(account), provider.book, key=key)
    assert client.guard(TOOL, args_for(account), provider.book, key=key) == first
    assert provider.applications(account) == 1


def test_the_resolver_resolves_held_calls_by_the_providers_word_and_retries_replay_or_run_once(client: Idemgate) -> None:
    provider = Provider()
    booked = {f"acct-{uuid.uuid4().hex[:10]}": True for _ in range(4)}
    booked.update({f"acct-{uuid.uuid4().hex[:10]}": False for _ in range(4)})
    keys = {account: hold_unknown(client, provider, account, effect) for account, effect in booked.items()}
    with client.start_resolver({TOOL: provider.probe(set(booked))}, interval=0.2, holder="live-test") as resolver:
        for account, key in keys.items():
            # the key decided: a retry answers without running (applied) or runs now (not applied)
            outcome = _settled(client, provider, account, key, resolver)
            assert outcome == ("replayed" if booked[account] else "ran"), (account, outcome, resolver.stats)
    for account in booked:
        assert provider.applications(account) == 1
    assert provider.overlaps == []
    _asked_as_expected(provider, booked)
    assert resolver.stats.applied >= 4 and resolver.stats.not_applied >= 4


def _settled(client: Idemgate, provider: Provider, account: str, key: str, resolver: Any) -> str:
    """Waits (on the resolver's answers) until the key is decided, then retries it once."""
    before = provider.applications(account)
    done = threading.Event()
    for _ in range(600):
        try:
            client.guard(TOOL, args_for(account), provider.book, key=key)
            done.set()
            break
        except OutcomeUnknownError:
            done.wait(0.1)  # still held: the resolver has not answered yet
    assert done.is_set(), f"{key} was never decided ({resolver.stats if resolver is not None else 'resolvers in threads and a task'})"
    return "ran" if provider.applications(account) > before else "replayed"


def test_resolvers_in_threads_and_an_async_task_probe_each_call_once() -> None:
    assert URL
    provider = Provider()
    accounts = {f"acct-{uuid.uuid4().hex[:10]}": i % 2 == 0 for i in range(12)}
    with Idemgate(str(URL), TOKEN, timeout=15) as setup:
        keys = {account: hold_unknown(setup, provider, account, effect) for account, effect in accounts.items()}
    probe = provider.probe(set(accounts))

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
            for account, key in keys.items():
                outcome = _settled(checker, provider, account, key, None)
                assert outcome == ("replayed" if accounts[account] else "ran"), (account, outcome)
    finally:
        stop.set()
        for c in clients:
            c.close()
        loop_thread.join(60)
    assert not loop_thread.is_alive()
    for account in accounts:
        assert provider.applications(account) == 1
    # each held call was put to one probe at a time, whichever process claimed it
    assert provider.overlaps == []
    _asked_as_expected(provider, accounts)


def _asked_as_expected(provider: Provider, booked: dict[str, bool]) -> None:
    """A call that happened: asked once. One that did not: once, or twice when the first answer came
    while its lease still ran (Idemgate refuses "not applied" then; the same claim asks again after it)."""
    for account, happened in booked.items():
        assert provider.asked[account] in ((1,) if happened else (1, 2)), (account, happened, provider.asked)
