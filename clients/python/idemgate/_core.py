"""What both clients hold (configuration, transport, background work) and the sync shell of the flows."""

from __future__ import annotations

import inspect
import logging
import threading
import time
import uuid
from typing import Any, Callable, Dict, Generic, List, Mapping, Optional, Tuple, TypeVar, Union

from ._ask import ask_probe_sync
from ._background import Outbox, ReplayMemory, ReplayReporter
from ._context import consumed, current_action
from ._flow import AskProbe, Attempt, Flow, Handoff, Raised, Ran, RunFunction, Settings, Sleep, heartbeat_verdict, settle_verdict
from ._http import Request, RetryPolicy, Transport
from ._keys import check_key
from .errors import NETWORK_PROBLEM_TYPE, IdemgateError, NotAppliedError

log = logging.getLogger("idemgate")


class NotAwaitedError(NotAppliedError, TypeError):
    """A sync guard was given a function that returned a coroutine: it never ran (the key is released).
    Guard ``async def`` functions with :class:`AsyncIdemgate` or ``@idempotent``, which await them."""


class Core:
    """The client's configuration and the work it does beside its callers."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout: float,
        wait_seconds: int,
        session: Optional[str],
        retry: Optional[RetryPolicy],
        replay_cache: Union[bool, int],
        flush_timeout: float,
        sleep: Callable[[float], None],
        probe_timeout: float = 10.0,
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"Idemgate: url must be an http:// or https:// URL, not {url!r}")
        self.transport = Transport(url, token)
        if not isinstance(probe_timeout, (int, float)) or isinstance(probe_timeout, bool) or probe_timeout <= 0:
            raise ValueError(f"Idemgate: probe_timeout must be a positive number of seconds, not {probe_timeout!r}")
        self.settings = Settings(timeout=timeout, wait_seconds=int(wait_seconds), session=session, retry=retry or RetryPolicy(), probe_timeout=float(probe_timeout))
        self.sleep = sleep
        # the background's backoff: the client's, without a limit on attempts
        policy = self.settings.retry
        self.outbox = Outbox(self.transport, settle_verdict, RetryPolicy(base_delay=policy.base_delay, max_delay=policy.max_delay), flush_timeout=flush_timeout)
        self.reporter = ReplayReporter(self.transport, timeout)
        entries = 1000 if replay_cache is True else int(replay_cache)
        self.memory: Optional[ReplayMemory] = ReplayMemory(self.reporter, entries) if replay_cache else None
        #: tool name -> "read" | "write", learned from list_tools(): reads get no key by default
        self.kinds: Dict[str, str] = {}

    @property
    def url(self) -> str:
        return self.transport.url

    def guard_key(self, key: Optional[str], session: Optional[str], where: str) -> Tuple[str, Optional[str]]:
        """The key and session of a guarded call: given, or from the action context (TypeError without one)."""
        context = current_action()
        if key is None:
            if context is None:
                raise TypeError(f"{where}: no key: pass key=..., or call it inside `with idemgate.action(key=...)`")
            key = context.key
        check_key(key, where)
        return key, self.session_for(session)

    def invoke_key(self, tool: str, key: Optional[str]) -> Optional[str]:
        """invoke()'s key: given, else the action context's, else one random key for this call (none for
        tools list_tools() said are reads)."""
        if key is not None:
            return check_key(key, "invoke")
        context = current_action()
        if context is not None:
            return context.key
        return None if self.kinds.get(tool) == "read" else str(uuid.uuid4())

    def session_for(self, session: Optional[str]) -> Optional[str]:
        if session is not None:
            return session
        context = current_action()
        if context is not None and context.session is not None:
            return context.session
        return self.settings.session

    def learn_kinds(self, tools: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        """Keeps each listed tool's kind (for invoke()'s default key) and returns the list."""
        for tool in tools:
            if isinstance(tool.get("name"), str) and isinstance(tool.get("kind"), str):
                self.kinds[tool["name"]] = tool["kind"]
        return tools

    def close(self, timeout: Optional[float] = None) -> bool:
        """Sends queued replay reports and delivers pending completions (bounded); True when all landed."""
        reported = self.reporter.flush(timeout if timeout is not None else 5.0)
        return self.outbox.close(timeout) and reported


R = TypeVar("R")


class ClientShell(Generic[R]):
    """What the sync and the async client share around their :class:`Core` and their resolvers (``R``)."""

    _core: Core
    _resolvers: List[R]

    @property
    def url(self) -> str:
        return self._core.url

    @property
    def session(self) -> Optional[str]:
        return self._core.settings.session

    @property
    def pending_deliveries(self) -> int:
        """Completions and releases not yet delivered, being retried in the background."""
        return self._core.outbox.pending

    def _forget(self, resolver: R) -> None:
        if resolver in self._resolvers:
            self._resolvers.remove(resolver)


class Heartbeat:
    """Extends a reservation's lease every ``interval`` seconds while the guarded function runs (a thread)."""

    def __init__(self, transport: Transport, execution_id: str, request: Request, interval: float) -> None:
        self.transport, self.execution_id, self.request, self.interval = transport, execution_id, request, interval
        self.beats = 0
        self.stale = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"idemgate-heartbeat-{execution_id}", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        # not joined: a heartbeat in flight must not hold up the caller; its answer is ignored
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            # one request per beat, no retries: the next beat is the retry
            outcome = self.transport.send_once(self.request)
            verdict = heard(self.execution_id, outcome, self._stop.is_set())
            if verdict in ("ignore", "stale"):
                self.stale = verdict == "stale"
                return
            if verdict == "ok":
                self.beats += 1


def heard(execution_id: str, outcome: Any, stopped: bool) -> str:
    """A heartbeat's answer judged (``heartbeat_verdict``), with a stale key or a lost beat logged;
    heartbeats end on ``ignore`` and ``stale``."""
    verdict = heartbeat_verdict(outcome, stopped)
    if verdict == "stale":
        log_stale(execution_id, outcome)
    elif verdict == "lost":
        log.warning("idemgate: heartbeat for execution %s got no answer (%s); trying again", execution_id, outcome)
    return verdict


def log_stale(execution_id: str, outcome: Any) -> None:
    problem = getattr(outcome, "problem", None) or {}
    log.warning(
        "idemgate: execution %s no longer holds its key (%s): an operator released it or another call took it over; "
        "heartbeats stopped, and the result will be kept as a late completion",
        execution_id,
        problem.get("type", getattr(outcome, "status", "?")),
    )


def run_sync(core: Core, flow: Flow, fn: Optional[Callable[[Mapping[str, Any]], Any]] = None, args: Optional[Mapping[str, Any]] = None) -> Any:
    """Performs a flow's effects in the calling thread: urllib requests, time.sleep, a heartbeat thread."""
    value: Any = None
    while True:
        try:
            effect = flow.send(value)
        except StopIteration as stop:
            return stop.value
        if isinstance(effect, Attempt):
            try:
                value = core.transport.send_once(effect.request)
            except BaseException:
                # interrupted (Ctrl-C) with the request sent or not: no answer, which leaves a
                # completion or release to the background, as for a cancelled async caller
                if effect.on_cancel is not None:
                    delivery = effect.on_cancel(IdemgateError({"type": NETWORK_PROBLEM_TYPE, "title": "No answer", "status": 0, "detail": "interrupted"}))
                    if delivery is not None:
                        core.outbox.put(delivery)
                raise
        elif isinstance(effect, Sleep):
            try:
                core.sleep(effect.seconds)
            except BaseException:
                if effect.settlement is not None:
                    core.outbox.put(effect.settlement)
                raise
            value = None
        elif isinstance(effect, Handoff):
            core.outbox.put(effect.delivery)
            value = None
        elif isinstance(effect, RunFunction):
            assert fn is not None and args is not None
            with Heartbeat(core.transport, effect.execution_id, effect.heartbeat, effect.interval):
                value = call_sync(fn, args)
        elif isinstance(effect, AskProbe):
            value = ask_probe_sync(effect)
        else:  # pragma: no cover - every effect is handled above
            raise AssertionError(f"unknown effect {effect!r}")


def call_sync(fn: Callable[[Mapping[str, Any]], Any], args: Mapping[str, Any]) -> Union[Ran, Raised]:
    try:
        with consumed():
            result = fn(args)
    except BaseException as exc:  # every way out of the function settles the key
        return Raised(exc)
    if inspect.isawaitable(result):
        if not inspect.iscoroutine(result):
            # a task or future is running already, on its own: its side effect may happen
            return Raised(TypeError(f"the guarded function returned {type(result).__name__}, work already scheduled that a sync guard cannot wait for; it may still happen: guard it with AsyncIdemgate or @idempotent"))
        result.close()  # never awaited: it did not run
        return Raised(NotAwaitedError("the guarded function returned an awaitable, which a sync guard cannot await: it never ran; guard it with AsyncIdemgate or @idempotent"))
    return Ran(result)


def check_guardable(fn: Any, where: str) -> None:
    if not callable(fn):
        raise TypeError(f"{where}: fn must be callable, not {type(fn).__name__}")
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        raise TypeError(f"{where}: {getattr(fn, '__name__', fn)!s} is a generator: its body runs as it is iterated, after the call returns, so it cannot be guarded; return a value instead")


def monotonic() -> float:
    return time.monotonic()
