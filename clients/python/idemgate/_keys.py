"""What a key must be before anything is sent: a string (Idemgate itself checks the rest, 400 invalid_key)."""

from __future__ import annotations

from typing import Any


def check_key(key: Any, where: str) -> str:
    """``key`` when it is a string, else TypeError: nothing is reserved with a key that is not one."""
    if not isinstance(key, str):
        raise TypeError(f"{where}: the idempotency key must be a string, not {type(key).__name__} ({key!r:.80})")
    return key
