"""invoke() and list_tools() against the fake server: keys, retries, answers and their errors."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from fake_server import FakeIdemgate, KeyStore, Seen, html, ok, problem

import idemgate
from idemgate import AsyncIdemgate, FinalError, Idemgate, OutcomeUnknownError, RetryPolicy


@pytest.fixture
def fake() -> Iterator[FakeIdemgate]:
    server = FakeIdemgate()
    yield server
    server.close()


@pytest.fixture
def client(fake: FakeIdemgate) -> Iterator[Idemgate]:
    c = Idemgate(fake.url, "idg_test", timeout=5, wait_seconds=4, session="run-1", retry=RetryPolicy(max_attempts=4, base_delay=0.01), flush_timeout=1)
    yield c
    c.close()


@pytest.fixture
async def aclient(fake: FakeIdemgate) -> AsyncIterator[AsyncIdemgate]:
    c = AsyncIdemgate(fake.url, "idg_test", timeout=5, wait_seconds=4, retry=RetryPolicy(max_attempts=4, base_delay=0.01), flush_timeout=1)
    yield c
    await c.aclose()


def invokes(fake: FakeIdemgate) -> list[Seen]:
    return [s for s in fake.seen if s.path.endswith("/invoke")]


def test_one_random_key_per_call_reused_by_its_retries(fake: FakeIdemgate, client: Idemgate) -> None:
    fake.on("/invoke", [(None, None, {}), problem(503, "unavailable"), html(502), ok({"chargeId": "ch_1"})])
    assert client.invoke("payments.charge", {"amountCents": 5}) == {"chargeId": "ch_1"}
    sent = invokes(fake)
    assert len(sent) == 4
    keys = {s.headers["idempotency-key"] for s in sent}
    assert len(keys) == 1
    assert sent[0].path == "/api/v1/tools/payments.charge/invoke"
    assert sent[0].body == {"amountCents": 5}
    assert sent[0].headers["prefer"] == "wait=4"
    assert sent[0].headers["idemgate-session"] == "run-1"
    fake.on("/invoke", [ok({"chargeId": "ch_2"})])
    client.invoke("payments.charge", {"amountCents": 5})
    assert invokes(fake)[-1].headers["idempotency-key"] not in keys


def test_the_key_given_or_from_the_action_context(fake: FakeIdemgate, client: Idemgate) -> None:
    fake.on("/invoke", [ok({})])
    client.invoke("t", {}, key="mine", key_source="model")
    with idemgate.action(key="from-context", session="run-9"):
        client.invoke("t", {})
    first, second = invokes(fake)
    assert (first.headers["idempotency-key"], first.headers["idemgate-key-source"]) == ("mine", "model")
    assert (second.headers["idempotency-key"], second.headers["idemgate-session"]) == ("from-context", "run-9")


def test_calls_made_by_a_guarded_function_do_not_take_the_key_it_consumed(fake: FakeIdemgate, client: Idemgate) -> None:
    KeyStore().mount(fake)
    fake.on("/invoke", [ok({"sent": True})])
    inside: list[object] = []

    def notify(_: Any) -> Any:
        inside.append(idemgate.current_action())
        return client.invoke("mail.send", {})

    with idemgate.action(key="step-1", session="run-9"):
        assert client.guard("orders.place", {}, notify) == {"sent": True}
        assert idemgate.current_action() == idemgate.Action("step-1", "run-9")
    assert inside == [None]
    reservation, invoke = (s for s in fake.seen if s.path.endswith(("/reservations", "/invoke")))
    assert reservation.headers["idempotency-key"] == "step-1"
    assert invoke.headers["idempotency-key"] != "step-1"
    assert [s.path.rsplit("/", 1)[-1] for s in fake.seen][-1] == "complete"


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_calls_made_by_an_async_guarded_function_do_not_take_the_key_it_consumed(fake: FakeIdemgate, aclient: AsyncIdemgate, kind: str) -> None:
    KeyStore().mount(fake)
    fake.on("/invoke", [ok({"sent": True})])
    inside: list[object] = []

    async def notify(_: Any) -> Any:
        inside.append(idemgate.current_action())
        return await aclient.invoke("mail.send", {})

    def notify_in_thread(_: Any) -> Any:  # run in a thread; what it returns is awaited in the caller's task
        inside.append(idemgate.current_action())
        return aclient.invoke("mail.send", {})

    with idemgate.action(key="step-1", session="run-9"):
        assert await aclient.guard("orders.place", {}, notify if kind == "async" else notify_in_thread) == {"sent": True}
        assert idemgate.current_action() == idemgate.Action("step-1", "run-9")
    assert inside == [None]
    reservation, invoke = (s for s in fake.seen if s.path.endswith(("/reservations", "/invoke")))
    assert reservation.headers["idempotency-key"] == "step-1"
    assert invoke.headers["idempotency-key"] != "step-1"


def test_list_tools_teaches_which_tools_are_reads_they_get_no_key(fake: FakeIdemgate, client: Idemgate) -> None:
    tools = [{"name": "payments.get_balance", "kind": "read", "source": "in_process"}, {"name": "ledger.record", "kind": "write", "source": "client"}]
    fake.on("/api/v1/tools", [ok({"tools": tools})])
    fake.on("/invoke", [ok({"balance": 1})])
    assert client.list_tools() == tools
    assert fake.seen[0].method == "GET"
    client.invoke("payments.get_balance", {})
    assert "idempotency-key" not in invokes(fake)[-1].headers


def test_a_final_answer_of_the_tool_is_a_final_error(fake: FakeIdemgate, client: Idemgate) -> None:
    fake.on("/invoke", [(402, {"code": "card_declined"}, {"Idempotent-Replayed": "true"})])
    with pytest.raises(FinalError) as caught:
        client.invoke("payments.charge", {}, key="k")
    assert (caught.value.status, caught.value.body, caught.value.replayed) == (402, {"code": "card_declined"}, True)
    assert len(invokes(fake)) == 1


def test_an_unknown_outcome_is_raised_with_its_execution_and_never_retried(fake: FakeIdemgate, client: Idemgate) -> None:
    status, body, headers = problem(502, "outcome_unknown", key="k", executionId="exec-5", state="unknown")
    fake.on("/invoke", [(status, body, {**headers, "Idemgate-Execution-Id": "exec-5", "Idempotency-Key": "k"})])
    with pytest.raises(OutcomeUnknownError) as caught:
        client.invoke("payments.charge", {}, key="k")
    assert (caught.value.status, caught.value.key, caught.value.execution_id) == (502, "k", "exec-5")
    assert len(invokes(fake)) == 1


@pytest.mark.parametrize(
    ("status", "code", "cls"),
    [(409, "stuck", idemgate.StuckError), (422, "mismatch", idemgate.MismatchError), (404, "unknown_tool", idemgate.UnknownToolError), (400, "runs_in_client", idemgate.RunsInClientError), (503, "tool_paused", idemgate.ToolPausedError)],
)
def test_problems_are_raised_as_their_generated_classes(fake: FakeIdemgate, client: Idemgate, status: int, code: str, cls: type[idemgate.IdemgateError]) -> None:
    fake.on("/invoke", [problem(status, code)])
    with pytest.raises(cls) as caught:
        client.invoke("t", {}, key="k")
    assert (caught.value.status, caught.value.code) == (status, code)
    assert idemgate.PROBLEMS[code].retried is False
    assert len(invokes(fake)) == 1


async def test_the_async_client_invokes_and_lists_too(fake: FakeIdemgate, aclient: AsyncIdemgate) -> None:
    fake.on("/api/v1/tools", [ok({"tools": [{"name": "t", "kind": "write"}]})])
    fake.on("/invoke", [problem(409, "conflict"), ok({"done": True})])
    assert await aclient.list_tools() == [{"name": "t", "kind": "write"}]
    assert await aclient.invoke("t", {"a": 1}, key="k") == {"done": True}
    assert [s.headers["idempotency-key"] for s in invokes(fake)] == ["k", "k"]


def test_the_problem_table_is_the_servers() -> None:
    assert idemgate.RETRIED_PROBLEM_TYPES == {"/problems/conflict", "/problems/unavailable", "/problems/internal", "/problems/tool_failed", "/problems/request_timeout", "/problems/server_busy"}
    assert idemgate.PROBLEMS["conflict"].retry == "after Retry-After"
    assert idemgate.PROBLEM_CLASSES["outcome_unknown"] is OutcomeUnknownError
    assert all(issubclass(c, idemgate.IdemgateError) for c in idemgate.PROBLEM_CLASSES.values())


