"""Guard a function where it runs, with Idemgate as its key store, result store and audit log."""

from __future__ import annotations

import functools
import inspect
import json
import logging
import threading
import time
from datetime import datetime
from typing import Any, Callable, Mapping, Optional, TypeVar, cast
from urllib.parse import quote

from ._http import Answer, RetryPolicy, Transport, is_gateway_problem, transient
from .errors import OUTCOME_UNKNOWN_PROBLEM_TYPE, FinalError, IdemgateError, NotAppliedError, OutcomeUnknownError

log = logging.getLogger("idemgate")

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

#: statuses that say a request was not acted on (as for upstream tools): the key is released
NOT_APPLIED_STATUSES = frozenset({408, 425, 429})


def _conflict_or_transient(answer: Answer) -> bool:
    return transient(answer) or (answer.problem is not None and answer.problem.get("type") == "/problems/conflict")


def _key_header(key: str) -> str:
    # a key holding a "," goes as a quoted string: bare, it would read as the header sent twice
    if "," in key:
        return '"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return key


def _epoch_seconds(value: Any) -> Optional[float]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value) / 1000.0
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def _status_of(exc: BaseException) -> Optional[int]:
    for name in ("status", "status_code"):
        value = getattr(exc, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


class _Heartbeat:
    """Extends a reservation's lease every ``interval`` seconds while the guarded function runs."""

    def __init__(self, client: Idemgate, execution_id: str, token: Any, interval: float) -> None:
        self.client, self.execution_id, self.token, self.interval = client, execution_id, token, interval
        self.beats = 0
        self.stale = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"idemgate-heartbeat-{execution_id}", daemon=True)

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        # not joined: a heartbeat in flight must not hold up the caller; its answer is ignored
        self._stop.set()

    def _run(self) -> None:
        path = f"/api/v1/executions/{quote(self.execution_id, safe='')}/heartbeat"
        while not self._stop.wait(self.interval):
            try:
                # one request per beat, no retries: the next beat is the retry
                answer = self.client._transport.send_once(path, {"token": self.token}, {}, timeout=max(1.0, self.interval))
            except IdemgateError as err:
                if not self._stop.is_set():
                    log.warning("idemgate: heartbeat for execution %s failed (%s); trying again", self.execution_id, err)
                continue
            if self._stop.is_set():
                return
            if answer.status == 409:
                self.stale = True
                log.warning(
                    "idemgate: execution %s no longer holds its key (%s): an operator released it or another call took it over; "
                    "heartbeats stopped, and the result will be kept as a late completion",
                    self.execution_id,
                    (answer.problem or {}).get("type", answer.status),
                )
                return
            if answer.status >= 400:
                log.warning("idemgate: heartbeat for execution %s answered %s", self.execution_id, answer.status)
                continue
            self.beats += 1


class Idemgate:
    """A client for Idemgate's reservation API.

    ``url`` is where Idemgate is served (``http://127.0.0.1:3000``), ``token`` an API token (``idg_…``),
    which decides the scope keys live in. Every HTTP request has a ``timeout`` (seconds); requests that
    a retry can get past (network errors, timeouts, 503, 500, a call with the key still running) are
    sent again with the same key, up to ``retry.max_attempts`` requests per API call. ``wait_seconds``
    is sent as ``Prefer: wait=N`` with each reservation: a duplicate is held until the first call ends.
    """

    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout: float = 30.0,
        wait_seconds: int = 10,
        session: Optional[str] = None,
        retry: Optional[RetryPolicy] = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.session = session
        self.wait_seconds = wait_seconds
        self._transport = Transport(url, token, timeout, retry or RetryPolicy(), sleep)

    @property
    def url(self) -> str:
        return self._transport.url

    def _post(self, path: str, body: Any, retryable: Callable[[Answer], bool], headers: Optional[Mapping[str, str]] = None, key: Optional[str] = None, timeout: Optional[float] = None) -> Answer:
        return self._transport.send(path, body, headers or {}, retryable, key, timeout)

    def guard(
        self,
        tool: str,
        args: Mapping[str, Any],
        fn: Callable[[Mapping[str, Any]], T],
        *,
        key: str,
        session: Optional[str] = None,
        key_source: Optional[str] = None,
    ) -> T:
        """Run ``fn(args)`` at most once for ``key``, and return its result, or the stored one.

        1. Reserves ``key`` for ``tool`` with ``args`` (validated and fingerprinted by Idemgate).
           A stored result is returned without running ``fn`` (a stored final error is raised as
           :class:`FinalError` with ``replayed`` True).
        2. Only after the reservation (HTTP 201) runs ``fn(args)``, heartbeating at a third of the
           lease meanwhile.
        3. ``fn`` returned: its result (JSON-serialisable) is stored and returned. ``fn`` raised
           :class:`FinalError` (or an exception with a 4xx ``status``): stored, then re-raised.
           :class:`NotAppliedError` (or 408/425/429): the key is released, the error re-raised, and a
           retry runs ``fn`` again. Anything else: the key is held as unknown and
           :class:`OutcomeUnknownError` is raised from the exception; ``fn`` never runs again with
           this key until an operator decides.

        Raises :class:`OutcomeUnknownError` also when an earlier call with this key ended unknown, and
        :class:`IdemgateError` when Idemgate refuses the call (stuck key, arguments that differ from
        the first call's, an unknown tool) or cannot be reached after the retries.
        """
        reservation = self._reserve(tool, args, key, session if session is not None else self.session, key_source)
        if reservation.status == 200:
            return cast(T, self._replay(reservation))
        execution_id = str(reservation.body["executionId"])
        # the reservation's fencing token, sent back as it came (a number from Idemgate)
        token = reservation.body["token"]
        interval = self._heartbeat_interval(reservation.body)
        with _Heartbeat(self, execution_id, token, interval):
            try:
                result = fn(args)
                payload = json.loads(json.dumps(result))
            except BaseException as exc:
                self._settle_failure(execution_id, token, key, exc)
                raise
        self._complete(execution_id, token, key, 200, payload)
        return result

    def _reserve(self, tool: str, args: Mapping[str, Any], key: str, session: Optional[str], key_source: Optional[str]) -> Answer:
        headers = {"Idempotency-Key": _key_header(key)}
        if self.wait_seconds > 0:
            headers["Prefer"] = f"wait={int(self.wait_seconds)}"
        if session:
            headers["Idemgate-Session"] = session
        if key_source:
            headers["Idemgate-Key-Source"] = key_source
        # a held request answers within wait_seconds: the timeout must outlast it
        timeout = max(self._transport.timeout, self.wait_seconds + 5.0)
        path = f"/api/v1/tools/{quote(tool, safe='')}/reservations"
        answer = self._post(path, {"arguments": dict(args)}, _conflict_or_transient, headers, key, timeout)
        if answer.status in (200, 201) and isinstance(answer.body, dict) and not answer.problem:
            if (
                answer.status == 201
                and answer.body.get("state") == "reserved"
                and isinstance(answer.body.get("executionId"), str)
                and isinstance(answer.body.get("token"), (str, int))
            ):
                return answer
            if answer.status == 200 and answer.body.get("state") == "done":
                return answer
        raise self._error(answer, key)

    @staticmethod
    def _replay(answer: Answer) -> Any:
        status = answer.body.get("status", 200)
        body = answer.body.get("body")
        if isinstance(status, int) and 400 <= status <= 499:
            raise FinalError(status, body, replayed=True)
        return body

    def _heartbeat_interval(self, reservation: Mapping[str, Any]) -> float:
        """A third of the rest of the lease: from ``leaseMs`` (the server's clock) when Idemgate sends
        it, so a client whose clock runs behind does not heartbeat too late; else from ``leaseUntil``."""
        lease_ms = reservation.get("leaseMs")
        if isinstance(lease_ms, (int, float)) and not isinstance(lease_ms, bool) and lease_ms >= 0:
            remaining = lease_ms / 1000.0
        else:
            until = _epoch_seconds(reservation.get("leaseUntil"))
            remaining = (until - time.time()) if until is not None else 60.0
        return max(0.05, remaining / 3.0)

    def _settle_failure(self, execution_id: str, token: Any, key: str, exc: BaseException) -> None:
        status = _status_of(exc)
        if isinstance(exc, NotAppliedError) or status in NOT_APPLIED_STATUSES:
            self._release(execution_id, token, key, "not_run", f"{type(exc).__name__}: {exc}"[:500])
            return
        if isinstance(exc, FinalError) or (status is not None and 400 <= status <= 499):
            body = exc.body if isinstance(exc, FinalError) else getattr(exc, "body", None)
            if body is None:
                body = {"error": type(exc).__name__, "message": str(exc)}
            self._complete(execution_id, token, key, cast(int, status), body)
            return
        self._release(execution_id, token, key, "unknown", f"{type(exc).__name__}: {exc}"[:500])
        if isinstance(exc, Exception):
            problem = {
                "type": OUTCOME_UNKNOWN_PROBLEM_TYPE,
                "title": "Outcome unknown: the key is held",
                "status": 0,
                "detail": f"the guarded function raised {type(exc).__name__} after its reservation; an operator must decide",
            }
            raise OutcomeUnknownError(problem, key, execution_id) from exc

    def _complete(self, execution_id: str, token: Any, key: str, status: int, body: Any) -> None:
        try:
            answer = self._post(f"/api/v1/executions/{quote(execution_id, safe='')}/complete", {"token": token, "status": status, "body": body}, transient, key=key)
        except IdemgateError as err:
            # The function ran and its result is the caller's; the key stays reserved, stuck after its
            # lease, so no retry runs it again: an operator resolves it with the result.
            log.warning("idemgate: could not store the result of execution %s (%s); its key will be stuck after its lease", execution_id, err)
            return
        if answer.status < 300:
            return
        if transient(answer):
            log.warning("idemgate: could not store the result of execution %s (%s); its key will be stuck after its lease", execution_id, answer.status)
            return
        if answer.status == 409:
            # the key was released or taken over meanwhile: the result is kept as a late completion,
            # flagged for an operator. The function did run, so its result is the caller's.
            log.warning("idemgate: execution %s completed after it lost its key (%s); kept as a late completion", execution_id, (answer.problem or {}).get("type"))
            return
        raise self._error(answer, key)

    def _release(self, execution_id: str, token: Any, key: str, outcome: str, note: str) -> None:
        try:
            answer = self._post(f"/api/v1/executions/{quote(execution_id, safe='')}/release", {"token": token, "outcome": outcome, "note": note}, transient, key=key)
        except IdemgateError as err:
            # unreported, the reservation becomes stuck after its lease: still held, never re-run
            log.warning("idemgate: could not report execution %s as %s (%s); it will be stuck after its lease", execution_id, outcome, err)
            return
        if answer.status >= 300:
            log.warning("idemgate: releasing execution %s as %s answered %s %s", execution_id, outcome, answer.status, (answer.problem or {}).get("type"))

    @staticmethod
    def _error(answer: Answer, key: Optional[str]) -> IdemgateError:
        problem = answer.problem if is_gateway_problem(answer) or answer.problem else {"type": "about:blank", "title": f"HTTP {answer.status}", "status": answer.status, "detail": str(answer.body)[:200]}
        assert problem is not None
        if problem.get("type") == OUTCOME_UNKNOWN_PROBLEM_TYPE:
            execution_id = problem.get("executionId")
            held = problem.get("key")
            return OutcomeUnknownError(problem, held if isinstance(held, str) else key, execution_id if isinstance(execution_id, str) else None, answer.attempts)
        return IdemgateError(problem, key, answer.attempts)


def idempotent(
    client: Idemgate,
    tool: str,
    key: Callable[..., str],
    *,
    session: Optional[str] = None,
    key_source: Optional[str] = None,
    arguments: Optional[Callable[..., Mapping[str, Any]]] = None,
) -> Callable[[F], F]:
    """Decorate a function so each call runs at most once per key, through :meth:`Idemgate.guard`.

    ``key`` gets the decorated function's arguments, by name
    (``key=lambda order_id, **_: f"order-{order_id}-charge"``). The arguments sent to Idemgate (and
    fingerprinted there) are the function's bound arguments, defaults applied, unless ``arguments``
    (called like ``key``) picks them.
    """

    def decorate(fn: F) -> F:
        signature = inspect.signature(fn)
        by_name = not any(p.kind in (p.POSITIONAL_ONLY, p.VAR_POSITIONAL) for p in signature.parameters.values())

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            named: dict[str, Any] = {}
            for name, value in bound.arguments.items():
                if signature.parameters[name].kind is inspect.Parameter.VAR_KEYWORD:
                    named.update(value)
                else:
                    named[name] = value

            def call(picker: Callable[..., Any]) -> Any:
                return picker(**named) if by_name else picker(*args, **kwargs)

            sent = call(arguments) if arguments else named
            return client.guard(tool, sent, lambda _: fn(*args, **kwargs), key=call(key), session=session, key_source=key_source)

        return cast(F, wrapper)

    return decorate


__all__ = ["Idemgate", "RetryPolicy", "idempotent"]
