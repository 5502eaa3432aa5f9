"""What a probe is given and what it answers (no I/O here).

A probe is the application's own question to the service a client-run tool acts on ("did order 42's
charge go through?"), for a call whose outcome Idemgate holds as unknown or stuck. It gets a
:class:`HeldCall` and answers :class:`Applied` (with the result to store: the key becomes done and
retries replay it), :class:`NotApplied` (the key is released: the next retry runs the function) or
None (still unknown: the call stays held and is asked again later). The dict forms
``{"applied": True, "result": ...}`` and ``{"applied": False}`` are the same answers. A probe that
raises, times out or answers anything else is *still unknown*: only the service's word decides.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Awaitable, Callable, Mapping, Optional, Union

#: a note sent to Idemgate is cut to this many characters
NOTE_LIMIT = 1000


@dataclass(frozen=True)
class HeldCall:
    """A call of a client-run tool whose outcome is not known, as a probe gets it."""

    tool: str
    key: str
    execution_id: str
    #: the call's arguments as Idemgate kept them (the tool's ``arguments`` policy: redacted fields read
    #: ``"[redacted]"``; None when the tool keeps none). A guard's own probe gets the arguments it was given.
    arguments: Optional[Mapping[str, Any]]
    #: ``unknown`` (the call ended without knowing) or ``stuck`` (its process went away mid-call);
    #: ``running`` for a guard's own probe, asked before the key is reported unknown
    state: str
    #: the scope (tenant) the key lives in; None for a guard's own probe
    scope: Optional[str] = None
    started_at: Optional[datetime] = None
    lease_until: Optional[datetime] = None
    #: False: the call's lease has not ended (it may still be running): Idemgate refuses *not applied*
    lease_ended: bool = True
    #: why the outcome is unknown (the guard's note), None for a stuck call
    note: Optional[str] = None
    #: how many probes answered "still unknown" for it so far
    attempts: int = 0
    #: for a guard's own probe: the exception the guarded function raised
    error: Optional[BaseException] = None
    #: everything Idemgate sent about the call, as it sent it
    known: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Applied:
    """The probe's answer: the action happened. ``result`` (JSON) is stored as the call's result and
    replayed to retries; a ``status`` in 400-499 stores it as a final error (a declined card)."""

    result: Any = None
    status: int = 200


@dataclass(frozen=True)
class NotApplied:
    """The probe's answer: the service says the action did not happen. The key is released."""

    note: Optional[str] = None


@dataclass(frozen=True)
class StillUnknown:
    """What every other answer comes to (None, an exception, a timeout, an answer of the wrong shape)."""

    note: str


ProbeAnswer = Union[Applied, NotApplied, Mapping[str, Any], None]
#: a probe: sync or ``async def``, given the held call
Probe = Callable[[HeldCall], Union[ProbeAnswer, Awaitable[ProbeAnswer]]]
Verdict = Union[Applied, NotApplied, StillUnknown]


def parse_time(value: Any) -> Optional[datetime]:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def held_call(item: Mapping[str, Any], tool: str) -> HeldCall:
    """A held call from an item of ``GET /api/v1/tools/{tool}/held`` (or a claim's ``call``)."""
    probe = item.get("probe") if isinstance(item.get("probe"), Mapping) else {}
    arguments = item.get("arguments")
    attempts = probe.get("attempts") if isinstance(probe, Mapping) else 0
    return HeldCall(
        tool=str(item.get("tool") or tool),
        key=str(item.get("key", "")),
        execution_id=str(item.get("executionId", "")),
        arguments=arguments if isinstance(arguments, Mapping) else None,
        state=str(item.get("state", "unknown")),
        scope=item["scope"] if isinstance(item.get("scope"), str) else None,
        started_at=parse_time(item.get("startedAt")),
        lease_until=parse_time(item.get("leaseUntil")),
        lease_ended=item.get("leaseEnded") is not False,
        note=item["note"] if isinstance(item.get("note"), str) else None,
        attempts=attempts if isinstance(attempts, int) and not isinstance(attempts, bool) else 0,
        known=dict(item),
    )


def verdict_of(value: Any) -> Verdict:
    """A probe's return value as a verdict; anything that is not one of the answers is still unknown."""
    if value is None:
        return StillUnknown("the probe could not tell (it answered None)")
    if isinstance(value, (Applied, NotApplied, StillUnknown)):
        verdict: Verdict = value
    elif isinstance(value, Mapping) and value.get("applied") is True:
        status = value.get("status", 200)
        verdict = Applied(value.get("result"), status if isinstance(status, int) and not isinstance(status, bool) else -1)
    elif isinstance(value, Mapping) and value.get("applied") is False:
        note = value.get("note")
        verdict = NotApplied(note if isinstance(note, str) else None)
    else:
        return StillUnknown(f"the probe answered {type(value).__name__} {str(value)[:100]!r}, not Applied(result), NotApplied() or None"[:NOTE_LIMIT])
    if isinstance(verdict, Applied):
        if not 200 <= verdict.status <= 499 or 300 <= verdict.status <= 399:
            return StillUnknown(f"the probe answered Applied with status {verdict.status}: a stored result has a 2xx or 4xx status")
        try:
            json.dumps(verdict.result, allow_nan=False)
        except (TypeError, ValueError) as err:
            return StillUnknown(f"the probe answered Applied with a result that is not JSON-serialisable ({type(err).__name__}: {err})"[:NOTE_LIMIT])
    return verdict


def failed_probe(error: BaseException, timeout: float) -> StillUnknown:
    """A probe that raised, or did not answer within ``timeout`` seconds: still unknown."""
    if isinstance(error, TimeoutError):
        return StillUnknown(f"the probe did not answer within {timeout:g} s")
    return StillUnknown(f"the probe raised {type(error).__name__}: {error}"[:NOTE_LIMIT])
