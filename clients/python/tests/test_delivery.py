"""A completion that cannot be delivered at once (the gateway restarting) is retried in the background,
with the same token, until it lands; close() and a normal exit flush it."""

from __future__ import annotations

import logging
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fake_server import FakeIdemgate, Reply, Seen, ok, reserved

import idemgate
from idemgate import AsyncIdemgate, Idemgate, RetryPolicy

CLIENT_DIR = pathlib.Path(__file__).resolve().parent.parent


class Gateway:
    """The complete route of a gateway that is down (connections dropped) until ``up`` is set."""

    def __init__(self, fake: FakeIdemgate) -> None:
        self.up = threading.Event()
        self.down_answers = 0
        fake.on("/reservations", [reserved("exec-d", lease_seconds=0.2, lease_ms=True)])
        fake.on("/complete", self.complete)
        fake.on("/release", self.complete)

    def complete(self, seen: Seen) -> Reply:
        if not self.up.is_set():
            self.down_answers += 1
            return None, None, {}
        return ok({"state": "done", "status": 200, "body": seen.body.get("body"), "executionId": "exec-d"})


@pytest.fixture
def fake() -> Iterator[FakeIdemgate]:
    server = FakeIdemgate()
    yield server
    server.close()


def eventually(predicate: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.01)


def completes(fake: FakeIdemgate) -> list[Seen]:
    return [s for s in fake.seen if s.path.endswith("/complete")]


def test_the_caller_gets_its_result_at_once_and_the_completion_lands_when_the_gateway_is_back(fake: FakeIdemgate, caplog: pytest.LogCaptureFixture) -> None:
    gateway = Gateway(fake)
    client = Idemgate(fake.url, "idg_test", timeout=5, retry=RetryPolicy(base_delay=0.01, max_delay=0.05), flush_timeout=5)
    with caplog.at_level(logging.WARNING, logger="idemgate"):
        result = client.guard("t", {}, lambda _: {"charged": True}, key="k")
        assert result == {"charged": True}
        assert not gateway.up.is_set()
        assert "retrying in the background" in caplog.text
        # the lease (0.2 s) ends while the gateway is down: the background keeps trying past it
        fake.wait_for(lambda seen: gateway.down_answers >= 15)
        assert client.pending_deliveries == 1
        gateway.up.set()
        # by the background on its own (no flush): a pending count of 0 follows the stored answer
        eventually(lambda: client.pending_deliveries == 0)
    bodies = [s.body for s in completes(fake)]
    assert bodies == [{"token": 7, "status": 200, "body": {"charged": True}}] * len(bodies)
    assert "is stored now" in caplog.text
    assert client.close()


async def test_the_same_for_an_async_function(fake: FakeIdemgate) -> None:
    gateway = Gateway(fake)
    client = AsyncIdemgate(fake.url, "idg_test", timeout=5, retry=RetryPolicy(base_delay=0.01, max_delay=0.05), flush_timeout=5)

    async def fn(_: Any) -> dict[str, int]:
        return {"n": 1}

    assert await client.guard("t", {}, fn, key="k") == {"n": 1}
    assert client.pending_deliveries == 1
    gateway.up.set()
    assert await client.aclose()
    assert completes(fake)[-1].body == {"token": 7, "status": 200, "body": {"n": 1}}


def test_close_flushes_what_is_pending(fake: FakeIdemgate) -> None:
    gateway = Gateway(fake)
    with Idemgate(fake.url, "idg_test", timeout=5, retry=RetryPolicy(base_delay=0.5, max_delay=5), flush_timeout=10) as client:
        client.guard("t", {}, lambda _: "r", key="k")
        assert client.pending_deliveries == 1
        gateway.up.set()
    # the backoff of 0.5-5 s was cut short: close() sends what waits at once
    assert client.pending_deliveries == 0
    assert completes(fake)[-1].body["body"] == "r"


def test_close_gives_up_after_its_bound_and_says_so(fake: FakeIdemgate, caplog: pytest.LogCaptureFixture) -> None:
    Gateway(fake)
    client = Idemgate(fake.url, "idg_test", timeout=5, retry=RetryPolicy(base_delay=0.01, max_delay=0.05), flush_timeout=0.3)
    with caplog.at_level(logging.WARNING, logger="idemgate"):
        client.guard("t", {}, lambda _: "r", key="k")
        assert client.close() is False
    assert "gave up delivering the complete of execution exec-d" in caplog.text


SCRIPT = """
import logging, os, sys
import idemgate
logging.basicConfig(level=logging.WARNING, format="%(message)s")
# a long backoff, so that what delivers the completion is the flush at exit, not the next retry
policy = idemgate.RetryPolicy(base_delay=60, max_delay=120)
client = idemgate.Idemgate(os.environ["URL"], "idg_test", timeout=5, retry=policy, flush_timeout=30, sleep=lambda s: None)
print("result", client.guard("t", {}, lambda _: {"charged": 1}, key="exit-key"), flush=True)
sys.stdin.readline()  # the test brings the gateway back, then lets the process end
"""


def test_a_process_exiting_normally_flushes_what_it_still_has_to_store(fake: FakeIdemgate) -> None:
    gateway = Gateway(fake)
    env = {**os.environ, "URL": fake.url, "PYTHONPATH": str(CLIENT_DIR)}
    child = subprocess.Popen([sys.executable, "-c", SCRIPT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert child.stdout is not None and child.stdin is not None
    assert child.stdout.readline().strip() == "result {'charged': 1}"
    fake.wait_for(lambda seen: gateway.down_answers >= 3)
    gateway.up.set()
    child.stdin.write("\n")
    child.stdin.flush()
    _, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    assert completes(fake)[-1].body == {"token": 7, "status": 200, "body": {"charged": 1}}
    assert "storing 1 completion(s) or release(s) not yet delivered" in err, err
    assert "every pending completion and release is stored" in err, err


def test_an_interrupt_while_the_result_is_sent_leaves_it_to_the_background(fake: FakeIdemgate) -> None:
    # Ctrl-C (SIGINT in the calling thread) while the completion's request waits for its answer: the
    # caller gets the KeyboardInterrupt, and the result still lands, with the same token
    first = threading.Event()
    interrupted = threading.Event()
    main = threading.main_thread().ident
    assert main == threading.get_ident()

    def complete(seen: Seen) -> Reply:
        if not first.is_set():
            first.set()
            signal.pthread_kill(main, signal.SIGINT)
            interrupted.wait(10)  # no answer before the caller has been interrupted
            return None, None, {}
        return ok({"state": "done", "status": 200, "body": seen.body.get("body"), "executionId": "exec-i"})

    fake.on("/reservations", [reserved("exec-i")])
    fake.on("/complete", complete)
    client = Idemgate(fake.url, "idg_test", timeout=10, retry=RetryPolicy(max_attempts=3, base_delay=0.01), flush_timeout=5)
    # Ctrl-C raises KeyboardInterrupt here even when this process was started with SIGINT ignored
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            client.guard("t", {}, lambda _: {"n": 1}, key="interrupted")
    finally:
        signal.signal(signal.SIGINT, previous)
        interrupted.set()
    fake.wait_for(lambda seen: len([s for s in seen if s.path.endswith("/complete")]) >= 2)
    assert client.close(timeout=5)
    bodies = [s.body for s in fake.seen if s.path.endswith("/complete")]
    assert bodies == [{"token": 7, "status": 200, "body": {"n": 1}}] * len(bodies)


def test_work_already_scheduled_by_a_sync_function_is_held_as_unknown_not_released(fake: FakeIdemgate) -> None:
    # a task is running on its own: a retry must not run the function again
    import asyncio

    fake.on("/reservations", [reserved("exec-t")])
    fake.on("/release", [ok()])
    effects: list[int] = []

    async def send() -> None:
        effects.append(1)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        with Idemgate(fake.url, "idg_test", timeout=5, retry=RetryPolicy(max_attempts=3, base_delay=0.01), flush_timeout=2) as client:
            with pytest.raises(Exception) as raised:
                client.guard("t", {}, lambda _: loop.create_task(send()), key="scheduled")
            assert not isinstance(raised.value, idemgate.NotAppliedError)
        await asyncio.sleep(0)

    asyncio.run(main())
    release = next(s for s in fake.seen if s.path.endswith("/release"))
    assert release.body["outcome"] == "unknown"
    assert effects == [1]
