"""Bad input gets a clear error and changes nothing: key functions, results that are not JSON, answers
that are not Idemgate's, tools Idemgate runs itself."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from fake_server import FakeIdemgate, html, ok, problem, reserved

import idemgate
from idemgate import AsyncIdemgate, Idemgate, IdemgateError, OutcomeUnknownError, RetryPolicy, idempotent


@pytest.fixture
def fake() -> Iterator[FakeIdemgate]:
    server = FakeIdemgate()
    yield server
    server.close()


@pytest.fixture
def client(fake: FakeIdemgate) -> Iterator[Idemgate]:
    c = Idemgate(fake.url, "idg_test", timeout=5, wait_seconds=0, retry=RetryPolicy(max_attempts=3, base_delay=0.01), flush_timeout=1)
    yield c
    c.close()


@pytest.fixture
async def aclient(fake: FakeIdemgate) -> AsyncIterator[AsyncIdemgate]:
    c = AsyncIdemgate(fake.url, "idg_test", timeout=5, wait_seconds=0, retry=RetryPolicy(max_attempts=3, base_delay=0.01), flush_timeout=1)
    yield c
    await c.aclose()


def _raises(**_: Any) -> str:
    raise KeyError("order_id")


@pytest.mark.parametrize("key_fn", [_raises, lambda **_: 42, lambda **_: None, lambda **_: b"bytes"], ids=["raises", "int", "none", "bytes"])
def test_a_key_function_that_raises_or_returns_no_string_is_a_type_error_before_anything_is_reserved(fake: FakeIdemgate, client: Idemgate, key_fn: Any) -> None:
    runs = []

    @idempotent(client, tool="ledger.record", key=key_fn)
    def record(amount: int) -> int:
        runs.append(amount)
        return amount

    with pytest.raises(TypeError, match="key"):
        record(5)
    assert runs == []
    assert fake.seen == []


@pytest.mark.parametrize("key_fn", [_raises, lambda **_: 42], ids=["raises", "int"])
async def test_the_same_for_an_async_def(fake: FakeIdemgate, aclient: AsyncIdemgate, key_fn: Any) -> None:
    runs = []

    @idempotent(aclient, tool="ledger.record", key=key_fn)
    async def record(amount: int) -> int:
        runs.append(amount)
        return amount

    with pytest.raises(TypeError, match="key"):
        await record(5)
    assert runs == []
    assert fake.seen == []


def test_a_key_that_is_not_a_string_is_refused_by_guard_too(fake: FakeIdemgate, client: Idemgate) -> None:
    with pytest.raises(TypeError):
        client.guard("t", {}, lambda _: 1, key=17)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="no key"):
        client.guard("t", {}, lambda _: 1)
    assert fake.seen == []


def test_a_result_that_is_not_json_holds_the_key_as_unknown_and_says_why(fake: FakeIdemgate, client: Idemgate) -> None:
    fake.on("/reservations", [reserved("exec-nj")])
    fake.on("/release", [ok()])
    with pytest.raises(OutcomeUnknownError) as caught:
        client.guard("t", {}, lambda _: {"at": object()}, key="k")
    message = str(caught.value)
    assert "not JSON-serialisable" in message and "may have happened" in message
    assert isinstance(caught.value.__cause__, TypeError)
    assert caught.value.execution_id == "exec-nj"
    release = fake.seen[-1]
    assert release.path == "/api/v1/executions/exec-nj/release"
    assert release.body["outcome"] == "unknown" and "not JSON-serialisable" in release.body["note"]
    assert not any(s.path.endswith("/complete") for s in fake.seen)


async def test_a_result_that_is_not_json_from_an_async_def(fake: FakeIdemgate, aclient: AsyncIdemgate) -> None:
    fake.on("/reservations", [reserved("exec-nj")])
    fake.on("/release", [ok()])

    async def fn(_: Any) -> Any:
        return {1, 2}

    with pytest.raises(OutcomeUnknownError, match="not JSON-serialisable"):
        await aclient.guard("t", {}, fn, key="k")
    assert fake.seen[-1].body["outcome"] == "unknown"


@pytest.mark.parametrize("status", [502, 200, 404])
def test_an_html_answer_leaves_the_function_unrun(fake: FakeIdemgate, client: Idemgate, status: int) -> None:
    fake.on("/reservations", [html(status)])
    runs = []
    with pytest.raises(IdemgateError) as caught:
        client.guard("t", {}, lambda _: runs.append(1), key="k")
    assert runs == []
    assert caught.value.status == status
    assert not isinstance(caught.value, OutcomeUnknownError)
    # a proxy's 5xx is retried with the same key (the gateway behind it holds the key); the rest is not
    assert len(fake.seen) == (3 if status == 502 else 1)
    assert all(s.path.endswith("/reservations") for s in fake.seen)


async def test_an_html_answer_leaves_an_async_function_unrun(fake: FakeIdemgate, aclient: AsyncIdemgate) -> None:
    fake.on("/reservations", [html(200)])
    runs = []

    async def fn(_: Any) -> None:
        runs.append(1)

    with pytest.raises(IdemgateError, match="did not run"):
        await aclient.guard("t", {}, fn, key="k")
    assert runs == []


def test_a_tool_idemgate_runs_itself_is_the_servers_400_as_a_typed_error(fake: FakeIdemgate, client: Idemgate) -> None:
    fake.on("/reservations", [problem(400, "invalid_request")])
    with pytest.raises(idemgate.InvalidRequestError) as caught:
        client.guard("payments.charge", {}, lambda _: 1, key="k")
    assert (caught.value.status, caught.value.code, caught.value.problem_code) == (400, "invalid_request", "invalid_request")
    assert isinstance(caught.value, IdemgateError)


def test_a_sync_guard_refuses_an_async_function(fake: FakeIdemgate, client: Idemgate) -> None:
    async def fn(_: Any) -> None:
        return None

    with pytest.raises(TypeError, match="async"):
        client.guard("t", {}, fn, key="k")
    assert fake.seen == []


def test_a_sync_guard_whose_function_returns_a_coroutine_releases_the_key_as_not_run(fake: FakeIdemgate, client: Idemgate) -> None:
    fake.on("/reservations", [reserved()])
    fake.on("/release", [ok()])

    async def fn() -> None:
        raise AssertionError("never awaited")

    with pytest.raises(TypeError, match="never ran"):
        client.guard("t", {}, lambda _: fn(), key="k")
    assert fake.seen[-1].body["outcome"] == "not_run"
