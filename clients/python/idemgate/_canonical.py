"""Canonical JSON (RFC 8785, the JSON Canonicalization Scheme) and keys derived from an action.

``canonical_json`` writes a value the way the ``canonicalize`` npm package and the TypeScript
client's ``actionKey`` do: object members sorted by their names' UTF-16 code units, no whitespace,
strings escaped as ECMAScript's ``JSON.stringify`` escapes them, numbers in ECMAScript's shortest
form (``1.0`` is ``1``, ``1e-7`` is ``1e-7``, ``1e21`` is ``1e+21``). Limits, shared with every
JSON tool that crosses the two languages: integers beyond ±2**53 have no exact ECMAScript twin (use a
string), NaN and infinities are not JSON (ValueError), and strings must be valid Unicode (a lone
surrogate is refused when encoded).
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any, List, Mapping, Union

#: what action keys start with: keys from the run, told apart at a glance from random ones
ACTION_KEY_PREFIX = "act-"


def _number(value: float) -> str:
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"{value!r} is not a JSON number")
    if value == 0:
        return "0"
    if value < 0:
        return "-" + _number(-value)
    mantissa, _, exponent = repr(value).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    point = len(whole) + (int(exponent) if exponent else 0)
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0") or "0"
    k, n = len(digits), point
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * (-n) + digits
    e = n - 1
    sign = "+" if e >= 0 else "-"
    head = digits[0] if k == 1 else digits[0] + "." + digits[1:]
    return f"{head}e{sign}{abs(e)}"


def _write(value: Any, out: List[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(str(int(value)))
    elif isinstance(value, float):
        out.append(_number(value))
    elif isinstance(value, str):
        out.append(json.dumps(value, ensure_ascii=False))
    elif isinstance(value, Mapping):
        out.append("{")
        names = list(value.keys())
        for name in names:
            if not isinstance(name, str):
                raise TypeError(f"object member names must be strings, not {type(name).__name__}")
        for i, name in enumerate(sorted(names, key=lambda s: s.encode("utf-16-be", "surrogatepass"))):
            if i:
                out.append(",")
            out.append(json.dumps(name, ensure_ascii=False))
            out.append(":")
            _write(value[name], out)
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write(item, out)
        out.append("]")
    else:
        raise TypeError(f"{type(value).__name__} is not JSON")


def canonical_json(value: Any) -> str:
    """``value`` as canonical JSON text (RFC 8785): the same text the TypeScript client writes."""
    out: List[str] = []
    _write(value, out)
    return "".join(out)


def action_key(run_id: str, step: Union[int, str], tool: str, args: Mapping[str, Any]) -> str:
    """A stable Idempotency-Key for one logical action, derived from what the orchestrator knows.

    The same run (or thread) id, step, tool and arguments give the same key in every process and in
    the TypeScript client (``actionKey``): ``"act-"`` and the SHA-256 of the canonical JSON of
    ``[run_id, step, tool, args]`` in hex (68 printable ASCII characters). A retry of the action,
    a resumed run or a model re-emitting the same call gets the same key; the next step, another
    tool or other arguments get another. Do not use a framework's tool-call id instead: several
    frameworks mint a new one on every attempt.
    """
    if not isinstance(run_id, str) or not run_id:
        raise TypeError("action_key: run_id must be a non-empty string (the run's or thread's id)")
    if isinstance(step, bool) or not isinstance(step, (int, str)):
        raise TypeError("action_key: step must be an int or a string")
    if not isinstance(tool, str) or not tool:
        raise TypeError("action_key: tool must be a non-empty string")
    if not isinstance(args, Mapping):
        raise TypeError("action_key: args must be a mapping of the tool's arguments")
    text = canonical_json([run_id, step, tool, args])
    return ACTION_KEY_PREFIX + hashlib.sha256(text.encode("utf-8")).hexdigest()
