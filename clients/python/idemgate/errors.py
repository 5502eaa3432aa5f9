"""Exceptions of the Idemgate client. Every one subclasses :class:`IdemgateError`."""

from __future__ import annotations

from typing import Any, Mapping, Optional

NETWORK_PROBLEM_TYPE = "about:blank#network"
TIMEOUT_PROBLEM_TYPE = "about:blank#timeout"
OUTCOME_UNKNOWN_PROBLEM_TYPE = "/problems/outcome_unknown"


class IdemgateError(Exception):
    """An RFC 9457 problem from Idemgate, or a failure to reach it (``status`` 0).

    ``type``, ``status``, ``title`` and ``detail`` are the problem's members; ``problem`` is the whole
    problem+json body (extension members included); ``key`` is the Idempotency-Key of the call.
    """

    #: the problem code of the class (``"stuck"`` for :class:`StuckError`); None on the base class
    problem_code: Optional[str] = None

    def __init__(
        self,
        problem: Mapping[str, Any],
        key: Optional[str] = None,
        attempts: int = 1,
    ) -> None:
        self.problem: dict[str, Any] = dict(problem)
        self.type: str = str(problem.get("type", "about:blank"))
        self.status: int = int(problem.get("status", 0) or 0)
        self.title: str = str(problem.get("title", "") or "")
        detail = problem.get("detail")
        self.detail: Optional[str] = str(detail) if detail is not None else None
        self.key = key
        self.attempts = attempts
        message = f"{self.title}: {self.detail}" if self.detail else self.title or self.type
        super().__init__(message)

    @property
    def code(self) -> Optional[str]:
        """The problem code, e.g. ``"conflict"`` for ``/problems/conflict``; None for foreign types."""
        prefix = "/problems/"
        return self.type[len(prefix):] if self.type.startswith(prefix) else None


class OutcomeUnknownError(IdemgateError):
    """409/502/504 ``/problems/outcome_unknown``.

    The action may or may not have happened; Idemgate holds the key as unknown.

    Raised when the guarded function raised an exception that is neither a :class:`FinalError` nor a
    :class:`NotAppliedError` (the original is chained as ``__cause__``), and when Idemgate answers that
    an earlier call with this key ended that way (409 ``/problems/outcome_unknown``). The function is
    not run again with this key until an operator (or a probe) decides: resolved, a retry gets the
    stored result; released, a retry runs it. Never retry with a new key: that is a second action.
    """

    problem_code = "outcome_unknown"

    def __init__(
        self,
        problem: Mapping[str, Any],
        key: Optional[str] = None,
        execution_id: Optional[str] = None,
        attempts: int = 1,
    ) -> None:
        super().__init__(problem, key, attempts)
        self.execution_id = execution_id


class NotAppliedError(IdemgateError):
    """Raise it from a guarded function to say that nothing happened (the card was never charged).

    The client releases the key with outcome ``not_run``, so a retry with the same key runs the
    function again, and re-raises this error to the caller. Raise it only when you know: after a
    request may have reached the payment service, raise anything else instead.
    """

    def __init__(self, detail: str = "the function did not apply the action") -> None:
        super().__init__({"type": "about:blank#not-applied", "title": "Not applied", "status": 0, "detail": detail})


class FinalError(IdemgateError):
    """A final answer that is a failure, e.g. a declined card (HTTP 402): stored and replayed.

    Raise it from a guarded function: the client completes the key with ``status`` and ``body`` and
    re-raises it. A retry with the same key gets the same FinalError (``replayed`` True) without
    running the function. Any exception with an integer ``status`` (or ``status_code``) attribute
    in 400-499 is treated alike, except 408, 425 and 429, which say that nothing happened.
    """

    def __init__(self, status: int, body: Any = None, replayed: bool = False) -> None:
        if not 400 <= status <= 499:
            raise ValueError(f"a final error has a 4xx status, not {status}")
        super().__init__({"type": "about:blank#final", "title": "Final error", "status": status, "detail": _describe(body)})
        self.body = body
        self.replayed = replayed


def _describe(body: Any) -> Optional[str]:
    if body is None:
        return None
    if isinstance(body, Mapping):
        for name in ("message", "detail", "error", "code"):
            if isinstance(body.get(name), str):
                return str(body[name])
    return str(body)[:200]
