"""The resolver: held calls of the application's client-run tools, put to its probes.

Its decisions are made once, apart from I/O, as the guard's are (``_flow``): ``resolver_flow`` is a
generator that yields effects (send this request, ask this probe, sleep) and is sent what each gave.
:class:`Resolver` performs them in a thread of its own for the sync client, :class:`AsyncResolver` in
an asyncio task for the async one.

One sweep, per tool: list the tool's held calls (``GET /api/v1/tools/{tool}/held``, every page), and
for each one that is due: claim its probe (``POST /api/v1/executions/{id}/probe/claim``: one process
at a time, by a lease Idemgate keeps), ask the probe, answer (``.../probe/answer``). A call another
process holds, or one decided meanwhile, is passed over. Idemgate backs off a call answered "still
unknown" (its ``nextProbeAt``); the resolver backs off itself while Idemgate cannot be reached.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import socket
import threading
import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from types import TracebackType
from typing import Any, Callable, Dict, Generator, Mapping, Optional, Type
from urllib.parse import quote

from ._ask import ask_probe_async, ask_probe_sync
from ._core import Core
from ._flow import AskProbe, Attempt, Effect, Raised, Ran, Settings, Sleep, error_for, send_flow, transient
from ._http import Answer, AsyncTransport, Request
from ._probe import NOTE_LIMIT, Applied, HeldCall, NotApplied, Probe, StillUnknown, Verdict, failed_probe, held_call, parse_time, verdict_of
from .errors import IdemgateError

log = logging.getLogger("idemgate")

#: answers to a claim or an answer that say what to do, never sent again
_DECIDED = frozenset({"/problems/probe_claimed", "/problems/not_held", "/problems/lease_running", "/problems/not_found"})


@dataclass
class ResolverStats:
    """What a resolver did so far (read it for metrics and tests)."""

    #: sweeps over the tools' held calls, finished or ended by an error
    sweeps: int = 0
    #: probes asked (each after a claim)
    probed: int = 0
    #: calls the probe said happened: done with the probe's result
    applied: int = 0
    #: calls the probe said did not happen: released
    not_applied: int = 0
    #: calls left held: the probe could not tell, raised or timed out
    unknown: int = 0
    #: calls passed over: claimed by another process, backing off, or no longer held when claimed
    skipped: int = 0
    #: answers Idemgate kept as late (an operator or another answer decided first)
    late: int = 0
    #: requests to Idemgate that failed (the sweep went on with the next tool, or backed off)
    errors: int = 0
    last_error: Optional[str] = None


@dataclass(frozen=True)
class ResolverOptions:
    probes: Mapping[str, Probe]
    holder: str
    #: seconds between sweeps when nothing is due (a little jitter is added)
    interval: float = 5.0
    #: how long a claim lasts (seconds): another process may take the call after it
    claim_seconds: float = 30.0
    probe_timeout: float = 10.0
    page_size: int = 50
    #: the longest pause while Idemgate cannot be reached (seconds); it starts at 1 s and doubles
    max_backoff: float = 30.0
    #: told of every answer Idemgate took: (the call, what the probe said, what Idemgate did)
    on_decision: Optional[Callable[[HeldCall, str, str], None]] = None


def default_holder() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"[:200]


def resolver_options(
    probes: Mapping[str, Probe],
    *,
    interval: float,
    claim_seconds: float,
    probe_timeout: Optional[float],
    holder: Optional[str],
    settings: Settings,
    on_decision: Optional[Callable[[HeldCall, str, str], None]] = None,
) -> ResolverOptions:
    """Checks what ``start_resolver`` was given (TypeError / ValueError before anything starts)."""
    if not isinstance(probes, Mapping) or not probes:
        raise TypeError("start_resolver: probes must be a mapping of tool names to probe functions, e.g. {'payments.charge': probe}")
    for tool, probe in probes.items():
        if not isinstance(tool, str) or not tool:
            raise TypeError(f"start_resolver: a tool name must be a non-empty string, not {tool!r}")
        if not callable(probe):
            raise TypeError(f"start_resolver: the probe of {tool!r} must be a function of the held call, not {type(probe).__name__}")
    for name, value in (("interval", interval), ("claim_seconds", claim_seconds), ("probe_timeout", probe_timeout)):
        if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0):
            raise ValueError(f"start_resolver: {name} must be a positive number of seconds, not {value!r}")
    timeout = float(probe_timeout) if probe_timeout is not None else settings.probe_timeout
    # a claim outlasts its probe (and the answer's request), or another process could take the call meanwhile
    claim = min(300.0, max(float(claim_seconds), timeout + 5.0, 1.0))
    if holder is not None and (not isinstance(holder, str) or not holder or len(holder) > 200):
        raise ValueError("start_resolver: holder must be a label of 1 to 200 characters")
    if on_decision is not None and not callable(on_decision):
        raise TypeError(f"start_resolver: on_decision must be a function, not {type(on_decision).__name__}")
    return ResolverOptions(dict(probes), holder or default_holder(), float(interval), claim, timeout, on_decision=on_decision)


# ---- the decisions ---------------------------------------------------------------------------------


def _code(answer: Answer) -> str:
    return str((answer.problem or {}).get("type", ""))


def _retryable(answer: Answer) -> bool:
    """Sent again (same request): a transient answer, but never one that already decided something."""
    return transient(answer) and _code(answer) not in _DECIDED


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def _seconds_until(value: Any, now: datetime) -> float:
    when = parse_time(value)
    if when is None:
        return 0.0
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return (when - now).total_seconds()


def answer_payload(claim: str, verdict: Verdict) -> Dict[str, Any]:
    if isinstance(verdict, Applied):
        return {"claim": claim, "outcome": "applied", "status": verdict.status, "body": verdict.result}
    if isinstance(verdict, NotApplied):
        payload: Dict[str, Any] = {"claim": claim, "outcome": "not_applied"}
        if verdict.note:
            payload["note"] = verdict.note[:NOTE_LIMIT]
        return payload
    return {"claim": claim, "outcome": "unknown", "note": verdict.note[:NOTE_LIMIT]}


def probe_one_flow(tool: str, probe: Probe, item: Mapping[str, Any], options: ResolverOptions, settings: Settings, stats: ResolverStats) -> Generator[Effect, Any, bool]:
    """Claims one held call, asks the probe, answers. True when a probe was asked."""
    execution_id = str(item.get("executionId", ""))
    key = str(item.get("key", ""))
    base = f"/api/v1/executions/{quote(execution_id, safe='')}/probe"
    claim_body = {"holder": options.holder, "leaseMs": int(options.claim_seconds * 1000)}
    claimed = yield from send_flow(Request("POST", f"{base}/claim", _json(claim_body), {}, settings.timeout), settings.retry, _retryable, key)
    if claimed.status in (404, 409) and _code(claimed) in _DECIDED:
        # another process has it, it backs off, or it is no longer held: nothing to do here
        stats.skipped += 1
        return False
    body = claimed.body
    if claimed.status != 200 or claimed.problem is not None or not isinstance(body, dict) or not isinstance(body.get("claim"), str):
        raise error_for(claimed, key, f"the probe claim of execution {execution_id} was answered {claimed.status} without a claim")
    claim = str(body["claim"])
    call = held_call(body["call"] if isinstance(body.get("call"), Mapping) else item, tool)

    claimed_at = time.monotonic()
    verdict = yield from _ask_flow(probe, call, options, stats)
    answered = yield from _answer_flow(f"{base}/answer", claim, verdict, key, settings)
    if answered.status == 409 and _code(answered) == "/problems/lease_running" and isinstance(verdict, NotApplied):
        # the call's lease has not ended (it may still be running and take effect yet): "not applied"
        # counts only after it. A lease that ends while the claim still covers a second question is
        # waited for, and the probe asked again (its first word may be stale by then); else the call
        # stays held and comes back after Idemgate's backoff.
        wait = _seconds_until(call.known.get("leaseUntil"), datetime.now(timezone.utc))
        left = options.claim_seconds - (time.monotonic() - claimed_at) - options.probe_timeout - 2.0
        if wait + 0.25 <= left:
            yield Sleep(max(0.25, wait + 0.25))
            verdict = yield from _ask_flow(probe, replace(call, lease_ended=True), options, stats)
            answered = yield from _answer_flow(f"{base}/answer", claim, verdict, key, settings)
    if answered.status == 409 and _code(answered) == "/problems/lease_running" and isinstance(verdict, NotApplied):
        verdict = StillUnknown(f"the probe said not applied, but the call's lease had not ended (it may still be running){': ' + verdict.note if verdict.note else ''}")
        answered = yield from _answer_flow(f"{base}/answer", claim, verdict, key, settings)
    decision = answered.body.get("decision") if isinstance(answered.body, dict) else None
    said = "applied" if isinstance(verdict, Applied) else "not_applied" if isinstance(verdict, NotApplied) else "unknown"
    if answered.status == 200 and answered.problem is None:
        _tell(options, call, said, decision if isinstance(decision, str) else "none")
        if decision == "resolved":
            stats.applied += 1
            log.info("idemgate: %s %s: the probe said it happened; the result is stored and retries replay it", tool, key)
        elif decision == "released":
            stats.not_applied += 1
            log.info("idemgate: %s %s: the probe said it did not happen; the key is released and the next retry runs", tool, key)
        else:
            stats.unknown += 1
        return True
    code = _code(answered)
    if code == "/problems/not_held":
        _tell(options, call, said, "late")
        stats.late += 1
        log.info("idemgate: %s %s: decided meanwhile (an operator, another probe, its own completion); the probe's answer is kept as late", tool, key)
        return True
    if code == "/problems/probe_claimed":
        stats.skipped += 1
        log.warning(
            "idemgate: %s %s: the claim lapsed before the probe answered (it took longer than %g s) and another process claimed the call; the answer was not taken",
            tool,
            key,
            options.claim_seconds,
        )
        return True
    raise error_for(answered, key, f"the probe answer of execution {execution_id} was answered {answered.status}")


def _ask_flow(probe: Probe, call: HeldCall, options: ResolverOptions, stats: ResolverStats) -> Generator[Effect, Any, Verdict]:
    """Asks the probe once (AskProbe); whatever is not an answer is still unknown."""
    stats.probed += 1
    asked = yield AskProbe(probe, call, options.probe_timeout)
    if isinstance(asked, Raised) and not isinstance(asked.error, Exception):
        raise asked.error  # the resolver is being shut down (a cancelled task): the claim lapses
    verdict = verdict_of(asked.value) if isinstance(asked, Ran) else failed_probe(asked.error, options.probe_timeout)
    if isinstance(verdict, StillUnknown) and isinstance(asked, Raised):
        log.warning("idemgate: the probe of %s %s (execution %s) %s; the call stays held and is asked again later", call.tool, call.key, call.execution_id, verdict.note)
    return verdict


def _tell(options: ResolverOptions, call: HeldCall, said: str, decision: str) -> None:
    if options.on_decision is None:
        return
    try:
        options.on_decision(call, said, decision)
    except Exception:  # the application's callback must not stop the resolver
        log.exception("idemgate: resolver: on_decision raised")


def _answer_flow(path: str, claim: str, verdict: Verdict, key: str, settings: Settings) -> Generator[Effect, Any, Answer]:
    try:
        text = _json(answer_payload(claim, verdict))
    except (TypeError, ValueError) as err:  # checked by verdict_of; kept for safety
        text = _json(answer_payload(claim, StillUnknown(f"the probe's answer is not JSON ({err})")))
    # fenced by the claim (and the execution's token, on Idemgate's side): safe to send again
    answer = yield from send_flow(Request("POST", path, text, {}, settings.timeout), settings.retry, _retryable, key)
    return answer


@dataclass
class Sweep:
    #: probes asked in this sweep
    asked: int = 0
    #: seconds until the soonest call passed over for its backoff is due
    soonest: Optional[float] = None
    failed: bool = False


def sweep_flow(options: ResolverOptions, settings: Settings, stats: ResolverStats, stopping: Callable[[], bool]) -> Generator[Effect, Any, Sweep]:
    """Every registered tool's held calls, page by page; each due one probed in turn."""
    sweep = Sweep()
    for tool, probe in options.probes.items():
        cursor: Optional[str] = None
        try:
            while not stopping():
                query = f"?limit={options.page_size}" + (f"&cursor={quote(cursor, safe='')}" if cursor else "")
                page = yield from send_flow(Request("GET", f"/api/v1/tools/{quote(tool, safe='')}/held{query}", None, {}, settings.timeout), settings.retry, transient, None)
                body = page.body
                if page.status != 200 or page.problem is not None or not isinstance(body, dict) or not isinstance(body.get("items"), list):
                    raise error_for(page, None, f"the held calls of {tool} were answered {page.status} without a list")
                for item in body["items"]:
                    if stopping():
                        return sweep
                    if not isinstance(item, Mapping) or not isinstance(item.get("executionId"), str):
                        continue
                    probe_state = item.get("probe") if isinstance(item.get("probe"), Mapping) else {}
                    wait = _seconds_until(probe_state.get("nextProbeAt") if isinstance(probe_state, Mapping) else None, datetime.now(timezone.utc))
                    if wait > 0:
                        sweep.soonest = wait if sweep.soonest is None else min(sweep.soonest, wait)
                        continue
                    if (yield from probe_one_flow(tool, probe, item, options, settings, stats)):
                        sweep.asked += 1
                cursor = body.get("nextCursor") if isinstance(body.get("nextCursor"), str) else None
                if not cursor:
                    break
        except IdemgateError as err:
            sweep.failed = True
            stats.errors += 1
            stats.last_error = f"{tool}: {err}"
            log.warning("idemgate: resolver: could not probe the held calls of %s (%s); trying again later", tool, err)
    return sweep


def next_pause(sweep: Sweep, options: ResolverOptions, failures: int, rand: Callable[[], float] = random.random) -> float:
    """How long to wait before the next sweep: the interval (with up to 10 % jitter); sooner when the
    sweep asked a probe (more may have come) or a call's backoff ends first; 1 s doubling up to
    ``max_backoff`` while Idemgate cannot be reached."""
    if failures > 0:
        return min(options.max_backoff, 2.0 ** (failures - 1))
    pause = options.interval
    if sweep.asked:
        pause = min(pause, 1.0)
    if sweep.soonest is not None:
        pause = min(pause, sweep.soonest + 0.05)
    return max(0.05, pause * (1.0 + 0.1 * rand()))


def resolver_flow(options: ResolverOptions, settings: Settings, stats: ResolverStats, stopping: Callable[[], bool]) -> Generator[Effect, Any, None]:
    """Sweeps until ``stopping()``; the probe in progress is answered before it ends."""
    failures = 0
    while not stopping():
        try:
            sweep = yield from sweep_flow(options, settings, stats, stopping)
        except Exception as err:  # a bug must not end the resolver: logged, and the next sweep is tried
            log.exception("idemgate: resolver: a sweep failed")
            stats.errors += 1
            stats.last_error = f"{type(err).__name__}: {err}"
            sweep = Sweep(failed=True)
        stats.sweeps += 1
        failures = failures + 1 if sweep.failed and not sweep.asked else 0
        if stopping():
            return
        yield Sleep(next_pause(sweep, options, failures))


# ---- the shells -------------------------------------------------------------------------------------


class Resolver:
    """A resolver in a daemon thread (:meth:`Idemgate.start_resolver`). ``stop()`` ends it after the
    probe in progress; ``with client.start_resolver({...}):`` stops it on exit."""

    def __init__(self, core: Core, options: ResolverOptions, on_stop: Optional[Callable[[Resolver], None]] = None) -> None:
        self._core = core
        self.options = options
        self.stats = ResolverStats()
        self._stopping = threading.Event()
        self._on_stop = on_stop
        self._thread = threading.Thread(target=self._run, name="idemgate-resolver", daemon=True)
        self._thread.start()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        flow = resolver_flow(self.options, self._core.settings, self.stats, self._stopping.is_set)
        value: Any = None
        while True:
            try:
                effect = flow.send(value)
            except StopIteration:
                return
            if isinstance(effect, Attempt):
                value = self._core.transport.send_once(effect.request)
            elif isinstance(effect, Sleep):
                self._stopping.wait(effect.seconds)
                value = None
            elif isinstance(effect, AskProbe):
                value = ask_probe_sync(effect)
            else:  # pragma: no cover - the resolver yields no other effect
                raise AssertionError(f"unknown effect {effect!r}")

    def stop(self, timeout: Optional[float] = None) -> bool:
        """Ends the resolver after the probe in progress (waiting at most ``timeout`` seconds, default
        until it ends); True when it has ended."""
        self._stopping.set()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)
        if self._on_stop is not None:
            self._on_stop(self)
        return not self._thread.is_alive()

    def __enter__(self) -> Resolver:
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        self.stop()


class AsyncResolver:
    """A resolver in an asyncio task (:meth:`AsyncIdemgate.start_resolver`). ``await stop()`` (or
    ``aclose()``) ends it after the probe in progress; ``async with`` stops it on exit."""

    def __init__(self, core: Core, transport: AsyncTransport, options: ResolverOptions, on_stop: Optional[Callable[[AsyncResolver], None]] = None) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError("AsyncIdemgate.start_resolver runs the resolver as a task of the running event loop: call it from async code") from None
        self._core = core
        self._transport = transport
        self.options = options
        self.stats = ResolverStats()
        self._stopping = asyncio.Event()
        self._on_stop = on_stop
        self._task: asyncio.Task[None] = loop.create_task(self._run(), name="idemgate-resolver")

    @property
    def running(self) -> bool:
        return not self._task.done()

    async def _run(self) -> None:
        flow = resolver_flow(self.options, self._core.settings, self.stats, self._stopping.is_set)
        value: Any = None
        while True:
            try:
                effect = flow.send(value)
            except StopIteration:
                return
            if isinstance(effect, Attempt):
                value = await self._transport.send_once(effect.request)
            elif isinstance(effect, Sleep):
                try:
                    await asyncio.wait_for(self._stopping.wait(), effect.seconds)
                except asyncio.TimeoutError:
                    pass
                value = None
            elif isinstance(effect, AskProbe):
                value = await ask_probe_async(effect)
            else:  # pragma: no cover - the resolver yields no other effect
                raise AssertionError(f"unknown effect {effect!r}")

    async def stop(self, timeout: Optional[float] = None) -> bool:
        """Ends the resolver after the probe in progress; after ``timeout`` seconds (default: no limit)
        its task is cancelled (a claim then lapses, and the call is probed again later). True when it
        ended by itself."""
        self._stopping.set()
        ended = True
        try:
            await asyncio.wait_for(asyncio.shield(self._task), timeout)
        except asyncio.TimeoutError:
            self._task.cancel()
            ended = False
        except Exception:  # the task's own failure was logged
            pass
        if self._on_stop is not None:
            self._on_stop(self)
        return ended

    async def aclose(self) -> None:
        await self.stop()

    async def __aenter__(self) -> AsyncResolver:
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        await self.stop()
