"""Every decision of the client, once, apart from I/O ("sans-I/O", as h11 is).

A call (guard, invoke, list_tools) is a generator that *yields effects* — send this request once,
sleep this long, run the guarded function now, hand this settlement to the background — and is sent
what each effect gave. The sync client (``client.py``) performs the effects with urllib and threads,
the async one (``_async.py``) with awaits and tasks; neither decides anything itself. So a rule
changed here (which answer is retried, which exception frees a key) changes in both.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Dict, Generator, List, Mapping, Optional, Tuple, Union, cast
from urllib.parse import quote

from ._background import Delivery, ReplayMemory
from ._http import Answer, Outcome, Request, RetryPolicy, retry_after_seconds
from ._probe import Applied, HeldCall, NotApplied, Probe, failed_probe, parse_time, verdict_of
from ._problems import PROBLEM_CLASSES, RETRIED_PROBLEM_TYPES
from .errors import OUTCOME_UNKNOWN_PROBLEM_TYPE, FinalError, IdemgateError, NotAppliedError, OutcomeUnknownError

log = logging.getLogger("idemgate")

#: statuses that say a request was not acted on (as for upstream tools): the key is released
NOT_APPLIED_STATUSES = frozenset({408, 425, 429})
GATEWAY_HEADERS = ("idempotency-key", "idemgate-execution-id", "idempotent-replayed")
#: a completion or release is sent this many times before it is left to the background
FOREGROUND_SETTLE_ATTEMPTS = 2
NOTE_LIMIT = 1000


# ---- effects ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Attempt:
    """Send ``request`` once; the shell sends back the Answer, or the IdemgateError of no answer."""

    request: Request
    #: for a caller cancelled while this request is in flight (an async task): what the request's own
    #: outcome, when it comes, leaves to the background. A reservation granted to nobody is released
    #: as not run; a completion or release that did not land is delivered anyway. None: nothing.
    on_cancel: Optional[Callable[[Outcome], Optional[Delivery]]] = None


@dataclass(frozen=True)
class Sleep:
    seconds: float
    settlement: Optional[Delivery] = None


@dataclass(frozen=True)
class RunFunction:
    """Run the guarded function now, heartbeating ``heartbeat`` every ``interval`` seconds; send back Ran or Raised."""

    execution_id: str
    heartbeat: Request
    interval: float


@dataclass(frozen=True)
class Handoff:
    """Deliver this completion or release in the background (retried until it lands); sends back None."""

    delivery: Delivery


@dataclass(frozen=True)
class AskProbe:
    """Ask ``probe`` about ``call`` (awaited if it is async), for at most ``timeout`` seconds; send
    back Ran with what it answered, or Raised (a TimeoutError when it did not answer in time)."""

    probe: Probe
    call: HeldCall
    timeout: float


Effect = Union[Attempt, Sleep, RunFunction, Handoff, AskProbe]
Flow = Generator[Effect, Any, Any]


@dataclass(frozen=True)
class Ran:
    value: Any


@dataclass(frozen=True)
class Raised:
    error: BaseException


# ---- what an answer means --------------------------------------------------------------------------


def is_gateway_problem(answer: Answer) -> bool:
    return answer.problem is not None and str(answer.problem["type"]).startswith("/problems/")


def transient(answer: Answer) -> bool:
    """Nothing was decided and a retry with the same key may get past it: the problem table's retried
    types, or a 5xx from something in front of Idemgate (a proxy: none of the gateway's headers)."""
    if is_gateway_problem(answer):
        return str(cast(Dict[str, Any], answer.problem)["type"]) in RETRIED_PROBLEM_TYPES
    return answer.status >= 500 and not any(answer.header(name) for name in GATEWAY_HEADERS)


def error_for(answer: Answer, key: Optional[str], fallback_detail: Optional[str] = None) -> IdemgateError:
    """The typed exception of an answer that is not the one wanted (problem types from ``_problems``)."""
    problem = answer.problem
    if problem is None:
        detail = fallback_detail or (str(answer.body)[:200] if answer.body is not None else None)
        problem = {"type": "about:blank", "title": f"HTTP {answer.status}", "status": answer.status, "detail": detail}
    if problem.get("type") == OUTCOME_UNKNOWN_PROBLEM_TYPE:
        execution_id = problem.get("executionId") or answer.header("idemgate-execution-id")
        held = problem.get("key")
        return OutcomeUnknownError(problem, held if isinstance(held, str) else key, execution_id if isinstance(execution_id, str) else None, answer.attempts)
    code = str(problem.get("type", ""))[len("/problems/") :] if str(problem.get("type", "")).startswith("/problems/") else ""
    cls = PROBLEM_CLASSES.get(code, IdemgateError)
    return cls(problem, key, answer.attempts)


def settle_verdict(answer: Answer) -> str:
    """A completion's or release's answer: ``stored``, ``retry`` (nothing decided), ``late`` (the key was
    released or taken over meanwhile: kept as a late completion) or ``refused``."""
    if 200 <= answer.status < 300:
        return "stored"
    if transient(answer):
        return "retry"
    if answer.problem is not None and answer.problem.get("type") == "/problems/stale_token":
        return "late"
    return "refused"


def heartbeat_verdict(outcome: Outcome, stopped: bool) -> str:
    """``ok``, ``ignore`` (the guarded call has ended: whatever a late heartbeat heard no longer
    matters), ``lost`` (no answer: the next beat tries again) or ``stale`` (the key is no longer held)."""
    if stopped:
        return "ignore"
    if isinstance(outcome, IdemgateError):
        return "lost"
    if outcome.status == 409:
        return "stale"
    return "ok" if outcome.status < 300 else "lost"


def _epoch_seconds(value: Any) -> Optional[float]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value) / 1000.0
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def lease_seconds(reservation: Mapping[str, Any]) -> float:
    """The rest of the lease: ``leaseMs`` (the server's clock) when Idemgate sends it, so a client whose
    clock runs behind does not heartbeat too late; else from ``leaseUntil``."""
    lease_ms = reservation.get("leaseMs")
    if isinstance(lease_ms, (int, float)) and not isinstance(lease_ms, bool) and lease_ms >= 0:
        return float(lease_ms) / 1000.0
    until = _epoch_seconds(reservation.get("leaseUntil"))
    return (until - time.time()) if until is not None else 60.0


def heartbeat_interval(reservation: Mapping[str, Any]) -> float:
    """A third of the rest of the lease."""
    return max(0.05, lease_seconds(reservation) / 3.0)


def status_of(exc: BaseException) -> Optional[int]:
    for name in ("status", "status_code"):
        value = getattr(exc, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def key_header(key: str) -> str:
    # a key holding a "," goes as a quoted string: bare, it would read as the header sent twice
    if "," in key:
        return '"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return key


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


# ---- sending with the retry rules -----------------------------------------------------------------


def send_flow(
    request: Request,
    retry: RetryPolicy,
    retryable: Any,
    key: Optional[str],
    *,
    max_attempts: Optional[int] = None,
    on_cancel: Optional[Callable[[Outcome], Optional[Delivery]]] = None,
    settlement: Optional[Delivery] = None,
) -> Generator[Effect, Any, Answer]:
    """One API call: sent again (same request, same key) on no answer or a ``retryable`` answer, with
    capped backoff and ``Retry-After`` honoured; the last answer is returned, the last failure raised."""
    limit = max_attempts if max_attempts is not None else retry.max_attempts
    attempt = 0
    while True:
        attempt += 1
        last = attempt >= limit
        got: Outcome = yield Attempt(request, on_cancel)
        if isinstance(got, IdemgateError):
            if last:
                got.key, got.attempts = key, attempt
                raise got
            yield Sleep(retry.delay(attempt, None), settlement)
            continue
        got.attempts = attempt
        if last or not retryable(got):
            return got
        yield Sleep(retry.delay(attempt, retry_after_seconds(got.header("retry-after"))), settlement)


# ---- the calls ------------------------------------------------------------------------------------


@dataclass
class Settings:
    """What a client was configured with; the flows read it, never change it."""

    timeout: float
    wait_seconds: int
    session: Optional[str]
    retry: RetryPolicy
    #: how long a probe may take to answer (seconds) before it counts as "still unknown"
    probe_timeout: float = 10.0


def reservation_is_granted(answer: Answer) -> bool:
    body = answer.body
    return (
        answer.status == 201
        and not answer.problem
        and isinstance(body, dict)
        and body.get("state") == "reserved"
        and isinstance(body.get("executionId"), str)
        and body.get("executionId") != ""
        and isinstance(body.get("token"), int)
        and not isinstance(body.get("token"), bool)
    )


def _is_done(answer: Answer) -> bool:
    body = answer.body
    return answer.status == 200 and not answer.problem and isinstance(body, dict) and body.get("state") == "done" and isinstance(body.get("status"), int)


def replayed(status: int, body: Any, key: str) -> Any:
    """A stored result: returned, or raised as FinalError (``replayed`` True) when it is a final error."""
    if 400 <= status <= 499:
        raise FinalError(status, body, replayed=True)
    return body


def settlement(execution_id: str, action: str, payload: Dict[str, Any], key: str, tool: str, lease: float, settings: Settings) -> Delivery:
    request = Request("POST", f"/api/v1/executions/{quote(execution_id, safe='')}/{action}", _json(payload), {}, settings.timeout)
    return Delivery(request, key, tool, execution_id, action, time.monotonic() + max(0.0, lease))


def release_for_cancelled_reservation(answer: Outcome, tool: str, key: str, settings: Settings) -> Optional[Delivery]:
    """A reservation granted to a caller that was cancelled before it could run the function: released
    as not run (nothing happened). None when nothing was granted."""
    if not isinstance(answer, Answer) or not reservation_is_granted(answer):
        return None
    body = answer.body
    note = "the caller was cancelled before the function started"
    return settlement(str(body["executionId"]), "release", {"token": body["token"], "outcome": "not_run", "note": note}, key, tool, lease_seconds(body), settings)


def deliver_flow(delivery: Delivery, settings: Settings) -> Generator[Effect, Any, Optional[Answer]]:
    """A completion or release, tried a couple of times here and, if Idemgate cannot take it now (it is
    restarting, the network is down), handed to the background, which keeps trying with the same token."""
    try:
        answer = yield from send_flow(
            delivery.request,
            settings.retry,
            transient,
            delivery.key,
            max_attempts=FOREGROUND_SETTLE_ATTEMPTS,
            on_cancel=lambda outcome: delivery if not isinstance(outcome, Answer) or settle_verdict(outcome) == "retry" else None,
            settlement=delivery,
        )
    except IdemgateError as err:
        yield from _leave_to_background(delivery, str(err))
        return None
    verdict = settle_verdict(answer)
    if verdict == "retry":
        yield from _leave_to_background(delivery, f"HTTP {answer.status} {(answer.problem or {}).get('type', '')}".strip())
        return None
    if verdict == "late":
        log.warning(
            "idemgate: %s %s: execution %s was released or taken over while the function ran; its result is kept as a late completion for operators, not replayed",
            delivery.tool,
            delivery.key,
            delivery.execution_id,
        )
    elif verdict == "refused":
        log.warning(
            "idemgate: %s %s: the %s of execution %s was refused (%s %s); the key stays reserved and turns stuck after its lease",
            delivery.tool,
            delivery.key,
            delivery.action,
            delivery.execution_id,
            answer.status,
            (answer.problem or {}).get("detail", answer.body),
        )
    return answer


def _leave_to_background(delivery: Delivery, why: str) -> Generator[Effect, Any, None]:
    what = "result" if delivery.action == "complete" else f"{delivery.action} report"
    log.warning(
        "idemgate: %s %s: could not store the %s of execution %s yet (%s); retrying in the background with the same token",
        delivery.tool,
        delivery.key,
        what,
        delivery.execution_id,
        why,
    )
    yield Handoff(delivery)
    return None


def guard_flow(
    tool: str,
    args: Mapping[str, Any],
    key: str,
    session: Optional[str],
    key_source: Optional[str],
    settings: Settings,
    memory: Optional[ReplayMemory],
    probe: Optional[Probe] = None,
) -> Flow:
    """guard(): reserve; a stored result is returned (or its final error raised); a 201 runs the
    function (RunFunction), whose outcome is settled: see ``Idemgate.guard`` for the four outcomes.
    With ``probe``, an exception that would leave the outcome unknown is first put to the probe once
    (AskProbe): applied stores its result (returned), not applied releases the key (the exception is
    raised again); anything else holds it as unknown."""
    if probe is not None and not callable(probe):
        raise TypeError(f"guard: probe must be a function of the held call, not {type(probe).__name__}")
    if not isinstance(args, Mapping):
        raise TypeError(f"guard: args must be a mapping of the tool's arguments, not {type(args).__name__}")
    arguments_text = _json({"arguments": dict(args)})
    if memory is not None:
        cached = memory.hit(tool, key, arguments_text, session)
        if cached is not None:
            return replayed(cached.status, json.loads(cached.body), key)

    headers, timeout = _call_headers(key, session, key_source, settings)
    request = Request("POST", f"/api/v1/tools/{quote(tool, safe='')}/reservations", arguments_text, headers, timeout)
    answer = yield from send_flow(request, settings.retry, transient, key, on_cancel=lambda outcome: release_for_cancelled_reservation(outcome, tool, key, settings))
    if _is_done(answer):
        if memory is not None:
            memory.keep(tool, key, arguments_text, answer.body)
        return replayed(answer.body["status"], answer.body.get("body"), key)
    # the function runs on a reservation and nothing else: any other answer (a proxy's error page, a
    # server without this API) leaves it unrun, whatever its status
    if not reservation_is_granted(answer):
        raise error_for(answer, key, f"the reservation of {tool} was answered {answer.status} without a reservation or a stored result; the function did not run")

    body = answer.body
    execution_id, token = str(body["executionId"]), body["token"]
    started_at = datetime.now(timezone.utc)
    lease = lease_seconds(body)
    heartbeat = Request("POST", f"/api/v1/executions/{quote(execution_id, safe='')}/heartbeat", _json({"token": token}), {}, max(1.0, min(settings.timeout, lease / 3)))
    outcome = yield RunFunction(execution_id, heartbeat, heartbeat_interval(body))

    def settle(action: str, payload: Dict[str, Any]) -> Delivery:
        return settlement(execution_id, action, {"token": token, **payload}, key, tool, lease, settings)

    if isinstance(outcome, Ran):
        try:
            text = _json(outcome.value)
        except (TypeError, ValueError) as err:
            detail = (
                f"the result of {tool} is not JSON-serialisable ({type(err).__name__}: {err}), so it cannot be stored; "
                "the function ran, so its side effect may have happened: the key is held as unknown until an operator decides"
            )
            yield from _release_unknown(settle, detail, urgent=False, settings=settings)
            raise OutcomeUnknownError(_unknown_problem(detail, key, execution_id), key, execution_id) from err
        stored = yield from deliver_flow(settle("complete", {"status": 200, "body": json.loads(text)}), settings)
        if stored is not None and memory is not None and _is_done(stored):
            memory.keep(tool, key, arguments_text, stored.body)
        return outcome.value

    error = cast(Raised, outcome).error
    status = status_of(error)
    if isinstance(error, NotAppliedError) or (not isinstance(error, IdemgateError) and status in NOT_APPLIED_STATUSES):
        note = f"{type(error).__name__}: {error}"[:NOTE_LIMIT]
        yield from deliver_flow(settle("release", {"outcome": "not_run", "note": note}), settings)
        raise error
    # an IdemgateError from a call the function made (an inner guard or invoke that was refused or
    # ended unknown) is not the tool's own final answer: what the function did before it is unknown
    inner = isinstance(error, IdemgateError) and not isinstance(error, FinalError)
    if isinstance(error, FinalError) or (not inner and status is not None and 400 <= status <= 499):
        final = error.body if isinstance(error, FinalError) else getattr(error, "body", None)
        if final is None:
            final = {"error": type(error).__name__, "message": str(error)}
        try:
            final_text = _json(final)
        except (TypeError, ValueError):
            final_text = _json({"error": type(error).__name__, "message": str(error)})
        stored = yield from deliver_flow(settle("complete", {"status": status, "body": json.loads(final_text)}), settings)
        if stored is not None and memory is not None and _is_done(stored):
            memory.keep(tool, key, arguments_text, stored.body)
        raise error
    # anything else after the reservation: it may have happened. An interruption (a cancelled task,
    # Ctrl-C) is not held up by the report: the background delivers it.
    interrupted = not isinstance(error, Exception)
    detail = f"the guarded function raised {type(error).__name__} after its reservation: {error}"[:NOTE_LIMIT]
    if probe is not None and not interrupted:
        # the tool's own word, asked at once (a payment SDK that timed out: ask the provider now)
        call = HeldCall(
            tool, key, execution_id, dict(args), "running", started_at=started_at, lease_until=parse_time(body.get("leaseUntil")), lease_ended=False, note=detail, error=error, known=dict(body)
        )
        asked = yield AskProbe(probe, call, settings.probe_timeout)
        if isinstance(asked, Raised) and not isinstance(asked.error, Exception):
            # interrupted while the probe ran (a cancelled task, Ctrl-C): held as unknown, in the background
            yield from _release_unknown(settle, f"{detail}; interrupted while its probe ran"[:NOTE_LIMIT], urgent=True, settings=settings)
            raise asked.error
        verdict = verdict_of(asked.value) if isinstance(asked, Ran) else failed_probe(cast(Raised, asked).error, settings.probe_timeout)
        if isinstance(verdict, Applied):
            stored = yield from deliver_flow(settle("complete", {"status": verdict.status, "body": verdict.result}), settings)
            if stored is not None and memory is not None and _is_done(stored):
                memory.keep(tool, key, arguments_text, stored.body)
            if verdict.status >= 400:
                raise FinalError(verdict.status, verdict.result) from error
            return verdict.result
        if isinstance(verdict, NotApplied):
            said = f": {verdict.note}" if verdict.note else ""
            note = f"the probe found it not applied{said}, after: {detail}"[:NOTE_LIMIT]
            yield from deliver_flow(settle("release", {"outcome": "not_run", "note": note}), settings)
            # the key is free: the caller gets the function's own exception, and a retry runs it again
            raise error
        detail = f"{detail}; {verdict.note}"[:NOTE_LIMIT]
    yield from _release_unknown(settle, detail, urgent=interrupted, settings=settings)
    if interrupted:
        raise error
    raise OutcomeUnknownError(_unknown_problem(detail, key, execution_id), key, execution_id) from error


def _unknown_problem(detail: str, key: str, execution_id: str) -> Dict[str, Any]:
    return {"type": OUTCOME_UNKNOWN_PROBLEM_TYPE, "title": "Outcome unknown: the key is held", "status": 0, "detail": detail, "key": key, "executionId": execution_id}


def _release_unknown(settle: Any, note: str, *, urgent: bool, settings: Settings) -> Generator[Effect, Any, None]:
    delivery = cast(Delivery, settle("release", {"outcome": "unknown", "note": note[:NOTE_LIMIT]}))
    if urgent:
        yield Handoff(delivery)
        return
    yield from deliver_flow(delivery, settings)


def _call_headers(key: Optional[str], session: Optional[str], key_source: Optional[str], settings: Settings) -> Tuple[Dict[str, str], float]:
    """The headers and timeout of a reservation or an invocation (a keyed call waits on a duplicate)."""
    headers: Dict[str, str] = {}
    if key is not None:
        headers["Idempotency-Key"] = key_header(key)
        if settings.wait_seconds > 0:
            headers["Prefer"] = f"wait={int(settings.wait_seconds)}"
        if key_source:
            headers["Idemgate-Key-Source"] = key_source
    if session:
        headers["Idemgate-Session"] = session
    # a held request answers within wait_seconds: the timeout must outlast it
    timeout = max(settings.timeout, settings.wait_seconds + 5.0) if key is not None else settings.timeout
    return headers, timeout


def invoke_flow(tool: str, args: Mapping[str, Any], key: Optional[str], session: Optional[str], key_source: Optional[str], settings: Settings) -> Flow:
    """invoke(): POST /api/v1/tools/{tool}/invoke with the retry rules; the tool's answer is returned
    (a 4xx final answer, such as a declined card, raised as FinalError; ``replayed`` says whether it was
    a stored one)."""
    if not isinstance(args, Mapping):
        raise TypeError(f"invoke: args must be a mapping of the tool's arguments, not {type(args).__name__}")
    headers, timeout = _call_headers(key, session, key_source, settings)
    request = Request("POST", f"/api/v1/tools/{quote(tool, safe='')}/invoke", _json(dict(args)), headers, timeout)
    answer = yield from send_flow(request, settings.retry, transient, key)
    if answer.problem is not None or transient(answer):
        raise error_for(answer, key)
    if 400 <= answer.status <= 499:
        raise FinalError(answer.status, answer.body, replayed=answer.header("idempotent-replayed") == "true")
    if answer.status >= 300:
        raise error_for(answer, key)
    return answer.body


def list_tools_flow(settings: Settings) -> Flow:
    request = Request("GET", "/api/v1/tools", None, {}, settings.timeout)
    answer = yield from send_flow(request, settings.retry, transient, None)
    if answer.status != 200 or answer.problem is not None or not isinstance(answer.body, dict) or not isinstance(answer.body.get("tools"), list):
        raise error_for(answer, None, f"GET /api/v1/tools was answered {answer.status} without a tool list")
    return cast(List[Dict[str, Any]], answer.body["tools"])
