"""What the client does beside its callers, in daemon threads of its own (the same for the sync and the
async client): completions and releases that could not be delivered at once, retried with the same
token until they land; the replay cache; reports of the replays answered from it."""

from __future__ import annotations

import atexit
import json
import logging
import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from ._http import Answer, Outcome, Request, RetryPolicy, Transport

log = logging.getLogger("idemgate")


@dataclass(frozen=True)
class Delivery:
    """A completion or release of one execution, with its token in the body: safe to send again."""

    request: Request
    key: str
    tool: str
    execution_id: str
    #: "complete" or "release"
    action: str
    #: when the reservation's lease ends (time.monotonic())
    lease_ends: float


# ---- undelivered completions and releases ---------------------------------------------------------


class Outbox:
    """Delivers completions and releases that Idemgate could not take when they were made (a gateway
    restarting, the network down), in the background, with backoff, with the same token: at least
    until the lease ends and for as long as the process lives. A process that exits normally first
    flushes what is left (bounded by ``flush_timeout``, and said in the log)."""

    def __init__(self, transport: Transport, verdict: Callable[[Answer], str], retry: Optional[RetryPolicy] = None, flush_timeout: float = 10.0) -> None:
        self._transport = transport
        self._verdict = verdict
        self._retry = retry or RetryPolicy(base_delay=0.2, max_delay=5.0)
        self.flush_timeout = flush_timeout
        self._pending: List[Tuple[Delivery, int, float]] = []
        self._lock = threading.Condition()
        self._thread: Optional[threading.Thread] = None
        self._closed = False
        #: what the worker is sending right now (out of ``_pending`` until its answer is read)
        self._in_flight: List[Delivery] = []
        #: what happened to each delivery, for tests and metrics: "stored", "late", "refused"
        self.outcomes: Dict[str, str] = {}
        _live_outboxes.add(self)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._pending) + len(self._in_flight)

    def put(self, delivery: Delivery) -> None:
        with self._lock:
            self._pending.append((delivery, 0, time.monotonic()))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="idemgate-outbox", daemon=True)
                self._thread.start()
            self._lock.notify_all()

    def _next(self) -> Optional[Tuple[Delivery, int]]:
        with self._lock:
            while True:
                if not self._pending:
                    if self._closed:
                        return None
                    self._lock.wait(1.0)
                    continue
                now = time.monotonic()
                ready = min(range(len(self._pending)), key=lambda i: self._pending[i][2])
                delivery, tries, due = self._pending[ready]
                if due > now:
                    self._lock.wait(due - now)
                    continue
                self._pending.pop(ready)
                self._in_flight.append(delivery)
                return delivery, tries

    def _run(self) -> None:
        while True:
            item = self._next()
            if item is None:
                return
            delivery, tries = item
            try:
                self._deliver(delivery, tries + 1)
            except Exception as err:  # the worker outlives any one delivery
                # nothing was decided: sent again after its backoff, as for no answer
                log.warning("idemgate: %s %s: delivering the %s of execution %s failed unexpectedly (%r); trying again", delivery.tool, delivery.key, delivery.action, delivery.execution_id, err)
                with self._lock:
                    self._pending.append((delivery, tries + 1, time.monotonic() + self._retry.delay(tries + 1, None)))
            finally:
                with self._lock:
                    self._in_flight.remove(delivery)
                    self._lock.notify_all()

    def _deliver(self, delivery: Delivery, tries: int) -> None:
        outcome: Outcome = self._transport.send_once(delivery.request)
        verdict = "retry" if not isinstance(outcome, Answer) else self._verdict(outcome)
        if verdict == "retry":
            with self._lock:
                delay = self._retry.delay(tries, None)
                self._pending.append((delivery, tries, time.monotonic() + delay))
            return
        self.outcomes[delivery.execution_id] = verdict
        what = "result" if delivery.action == "complete" else f"{delivery.action} report"
        if verdict == "stored":
            log.warning("idemgate: %s %s: the %s of execution %s is stored now (attempt %d in the background)", delivery.tool, delivery.key, what, delivery.execution_id, tries)
        elif verdict == "late":
            log.warning("idemgate: %s %s: execution %s was taken over or released before its %s could be stored; kept as a late completion", delivery.tool, delivery.key, delivery.execution_id, what)
        else:
            status = outcome.status if isinstance(outcome, Answer) else 0
            log.warning("idemgate: %s %s: the %s of execution %s was refused (%s); the key stays held for an operator", delivery.tool, delivery.key, what, delivery.execution_id, status)

    def flush(self, timeout: Optional[float] = None) -> bool:
        """Waits until nothing is left to deliver (due retries are sent at once), at most ``timeout``
        seconds (default ``flush_timeout``); True when everything was delivered."""
        limit = self.flush_timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        with self._lock:
            if not self._pending and not self._in_flight:
                return True
            # what waits for its backoff is due now: the caller is waiting
            self._pending = [(d, tries, time.monotonic()) for d, tries, _ in self._pending]
            self._lock.notify_all()
            while self._pending or self._in_flight:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(min(left, 0.05))
                # anything put back for a backoff meanwhile is due again within 0.2 s while the caller
                # waits, not after; the worker may be asleep on its old due time: wake it
                self._pending = [(d, tries, min(due, time.monotonic() + 0.2)) for d, tries, due in self._pending]
                self._lock.notify_all()
            return True

    def close(self, timeout: Optional[float] = None) -> bool:
        """flush(), then stops the thread; what could not be delivered is logged."""
        left = self.pending
        if left:
            log.warning("idemgate: storing %d completion(s) or release(s) not yet delivered (up to %.0f s)", left, self.flush_timeout if timeout is None else timeout)
        done = self.flush(timeout)
        with self._lock:
            self._closed = True
            undelivered = [delivery for delivery, _, _ in self._pending] + list(self._in_flight)
            self._lock.notify_all()
        if not done:
            for delivery in undelivered:
                log.error(
                    "idemgate: %s %s: gave up delivering the %s of execution %s; the key stays reserved and turns stuck after its lease for an operator",
                    delivery.tool,
                    delivery.key,
                    delivery.action,
                    delivery.execution_id,
                )
        elif left:
            log.warning("idemgate: every pending completion and release is stored")
        return done


_live_outboxes: weakref.WeakSet[Outbox] = weakref.WeakSet()
_live_reporters: weakref.WeakSet[ReplayReporter] = weakref.WeakSet()


@atexit.register
def _flush_at_exit() -> None:
    for reporter in list(_live_reporters):
        reporter.flush(timeout=2.0)
    for outbox in list(_live_outboxes):
        if not outbox._closed:
            outbox.close()


# ---- the replay cache and its reports -------------------------------------------------------------


@dataclass
class CachedReplay:
    status: int
    #: the stored result as JSON text, parsed per hit so callers never share an object
    body: str
    execution_id: str
    #: time.monotonic() after which it is not served
    deadline: float


def replay_deadline(now: float, expires_in_ms: float) -> float:
    """Now, plus what is left of the key's TTL by the gateway's count, less a margin (1%, at least 1 s)
    for the time the answer took to arrive and for clocks that run at slightly different rates."""
    return now + (expires_in_ms - max(1000.0, expires_in_ms / 100.0)) / 1000.0


@dataclass
class _Report:
    tool: str
    key: str
    execution_id: str
    hit_at: float
    session: Optional[str]


class ReplayReporter:
    """Replays answered from the cache never reach the gateway, yet operators read every replay in the
    audit log: each hit is queued and reported in batches (``POST /api/v1/replays``), every 0.25 s or
    100 hits, in a thread of its own. ``dropped`` counts reports given up on."""

    INTERVAL = 0.25
    BATCH = 100
    PER_REQUEST = 500
    MAX_QUEUED = 50_000
    SEND_ATTEMPTS = 3

    def __init__(self, transport: Transport, timeout: float) -> None:
        self._transport = transport
        self._timeout = timeout
        self._queue: List[_Report] = []
        self._lock = threading.Condition()
        self._thread: Optional[threading.Thread] = None
        self._sending = 0
        self.dropped = 0
        self.delivered = 0
        _live_reporters.add(self)

    def add(self, tool: str, key: str, execution_id: str, session: Optional[str]) -> None:
        with self._lock:
            self._queue.append(_Report(tool, key, execution_id, time.monotonic(), session))
            if len(self._queue) > self.MAX_QUEUED:
                self.dropped += len(self._queue) - self.MAX_QUEUED
                del self._queue[: len(self._queue) - self.MAX_QUEUED]
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="idemgate-replay-reports", daemon=True)
                self._thread.start()
            if len(self._queue) >= self.BATCH:
                self._lock.notify_all()

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._lock.wait(5.0)
                    if not self._queue:
                        continue
                if len(self._queue) < self.BATCH:
                    self._lock.wait(self.INTERVAL)
                items = self._queue[: self.PER_REQUEST]
                del self._queue[: self.PER_REQUEST]
                self._sending += 1
            try:
                self._send(items)
            finally:
                with self._lock:
                    self._sending -= 1
                    self._lock.notify_all()

    def _send(self, items: List[_Report]) -> None:
        if not items:
            return
        for attempt in range(1, self.SEND_ATTEMPTS + 1):
            now = time.monotonic()
            replays: List[Dict[str, Any]] = []
            for r in items:
                entry: Dict[str, Any] = {"tool": r.tool, "key": r.key, "executionId": r.execution_id, "ageMs": max(0, round((now - r.hit_at) * 1000))}
                if r.session:
                    entry["session"] = r.session
                replays.append(entry)
            outcome = self._transport.send_once(Request("POST", "/api/v1/replays", json.dumps({"replays": replays}), {}, self._timeout))
            if isinstance(outcome, Answer) and outcome.status < 300:
                with self._lock:
                    self.delivered += len(items)
                return
            if attempt < self.SEND_ATTEMPTS:
                time.sleep(0.25 * attempt)
        with self._lock:
            self.dropped += len(items)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue) + self._sending

    def flush(self, timeout: float = 10.0) -> bool:
        """Sends what is queued now; True when nothing is left within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._queue or self._sending:
                if not self._sending and self._queue:
                    items = self._queue[: self.PER_REQUEST]
                    del self._queue[: self.PER_REQUEST]
                    self._sending += 1
                    self._lock.release()
                    try:
                        self._send(items)
                    finally:
                        self._lock.acquire()
                        self._sending -= 1
                    continue
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(min(left, 0.05))
            return True


class ReplayMemory:
    """Done answers this process got (replays, or its own completions), answered again from memory
    until the key's TTL ends by the gateway's count, less a margin: a done record never changes before
    it expires, so the answer is the one the gateway would give. Keyed by tool, key and the arguments'
    JSON text as sent (another key order is another call). Least recently used out first."""

    def __init__(self, reporter: ReplayReporter, max_entries: int = 1000, clock: Callable[[], float] = time.monotonic) -> None:
        if max_entries < 1:
            raise ValueError("replay_cache: keep at least 1 entry (turn the cache off with replay_cache=False)")
        self._entries: OrderedDict[Tuple[str, str, str], CachedReplay] = OrderedDict()
        self._max = max_entries
        self._lock = threading.Lock()
        self._reporter = reporter
        self._clock = clock
        self.hits = 0

    def hit(self, tool: str, key: str, arguments_text: str, session: Optional[str]) -> Optional[CachedReplay]:
        now = self._clock()
        with self._lock:
            entry = self._entries.pop((tool, key, arguments_text), None)
            if entry is None or entry.deadline <= now:
                return None
            self._entries[(tool, key, arguments_text)] = entry
            self.hits += 1
        self._reporter.add(tool, key, entry.execution_id, session)
        return entry

    def keep(self, tool: str, key: str, arguments_text: str, done: Dict[str, Any]) -> None:
        expires, execution_id = done.get("expiresInMs"), done.get("executionId")
        if not isinstance(expires, (int, float)) or isinstance(expires, bool) or not isinstance(execution_id, str):
            return
        now = self._clock()
        entry = CachedReplay(int(done["status"]), json.dumps(done.get("body")), execution_id, replay_deadline(now, float(expires)))
        if entry.deadline <= now:
            return
        with self._lock:
            self._entries.pop((tool, key, arguments_text), None)
            self._entries[(tool, key, arguments_text)] = entry
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


__all__ = ["CachedReplay", "Delivery", "Outbox", "ReplayMemory", "ReplayReporter"]
