"""action_key and canonical JSON: the same keys as the TypeScript client's actionKey, from one shared table."""

from __future__ import annotations

import json
import math
import pathlib
import re
from typing import Any

import pytest

from idemgate import action_key, canonical_json

TABLE = json.loads((pathlib.Path(__file__).parent / "action_key_cases.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", TABLE["cases"], ids=[str(i) for i in range(len(TABLE["cases"]))])
def test_the_shared_table_gives_the_same_canonical_text_and_key_as_typescript(case: dict[str, Any]) -> None:
    assert canonical_json([case["runId"], case["step"], case["tool"], case["args"]]) == case["canonical"]
    key = action_key(case["runId"], case["step"], case["tool"], case["args"])
    assert key == case["key"]
    assert re.fullmatch(r"act-[0-9a-f]{64}", key)


def test_argument_order_does_not_matter_but_step_and_values_do() -> None:
    a = action_key("run", 1, "t", {"x": 1, "y": [1, 2]})
    assert action_key("run", 1, "t", {"y": [1, 2], "x": 1}) == a
    assert action_key("run", 2, "t", {"x": 1, "y": [1, 2]}) != a
    assert action_key("run", 1, "t", {"x": 1, "y": [2, 1]}) != a
    # 1.0 and 1 are one JSON number, as in TypeScript
    assert action_key("run", 1, "t", {"x": 1.0, "y": [1, 2]}) == a


@pytest.mark.parametrize(
    "args",
    [("", 1, "t", {}), ("r", True, "t", {}), ("r", 1.5, "t", {}), ("r", 1, "", {}), ("r", 1, "t", [1]), ("r", 1, "t", {"o": object()}), ("r", 1, "t", {1: "x"})],
)
def test_refuses_what_is_not_an_action(args: tuple[Any, ...]) -> None:
    with pytest.raises(TypeError):
        action_key(*args)


def test_nan_and_infinity_are_not_json() -> None:
    for value in (math.nan, math.inf, -math.inf):
        with pytest.raises(ValueError):
            canonical_json({"x": value})
