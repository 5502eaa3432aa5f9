"""The action context: the key (and session) of the action a guarded call belongs to, per task."""

from __future__ import annotations

import contextvars
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Optional

from ._keys import check_key


@dataclass(frozen=True)
class Action:
    """The action guarded calls made inside ``with idemgate.action(...)`` belong to."""

    key: str
    session: Optional[str] = None


_current: contextvars.ContextVar[Optional[Action]] = contextvars.ContextVar("idemgate_action", default=None)


@contextmanager
def action(key: str, session: Optional[str] = None) -> Iterator[Action]:
    """Sets the key (and session) for guarded calls made inside the block that pass none.

    A ``contextvars`` value: each asyncio task and each thread sees its own, and tasks started inside
    the block inherit it. An orchestrator sets it per logical action (``key=action_key(run_id,
    step, tool, args)``) so the tool's own signature need not carry a key. A plain ``with`` works
    inside coroutines too.
    """
    current = Action(check_key(key, "action(key=...)"), session)
    token = _current.set(current)
    try:
        yield current
    finally:
        _current.reset(token)


@contextmanager
def consumed() -> Iterator[None]:
    """Clears the action context for the block: a guarded function runs in it, its key taken by that call.

    Calls the function makes itself without a key (``invoke()``, another guarded call) must not take
    the key again: they would wait on the reservation held for the function and leave it unknown.
    """
    token = _current.set(None)
    try:
        yield
    finally:
        _current.reset(token)


def current_action() -> Optional[Action]:
    """The innermost ``action(...)`` this code runs in, or None."""
    return _current.get()
