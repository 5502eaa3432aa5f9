"""A plain retry loop around a guarded function: the payment happens once, however often the step runs.

``book_payment`` stands in for a payment SDK call: it appends one line to a ledger file (the
side effect, counted where it happens). The step around it fails twice, as real steps do:

1. the payment service is rate limiting (HTTP 429): nothing was charged, so the function raises
   ``NotAppliedError`` and the key is released;
2. the charge goes through, then the receipt service is down and the step fails after it;
3. the loop runs the step again with the same order: Idemgate answers with the stored charge and
   ``book_payment`` does not run.

Run with a server up (``npm start``): ``IDEMGATE_URL=http://localhost:3000 IDEMGATE_TOKEN=idg_...
PYTHONPATH=clients/python python3 examples/python/charge.py``. Prints one JSON line.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import uuid
from typing import Any

from idemgate import Idemgate, NotAppliedError, idempotent

client = Idemgate(os.environ["IDEMGATE_URL"], os.environ["IDEMGATE_TOKEN"], session=f"python-example-{uuid.uuid4().hex[:8]}")
LEDGER = os.environ.get("EXAMPLE_LEDGER_FILE") or os.path.join(tempfile.gettempdir(), "idemgate-example-ledger.jsonl")
ORDER = os.environ.get("EXAMPLE_ORDER_ID") or f"o-{uuid.uuid4().hex[:8]}"

attempts = {"sdk": 0}


@idempotent(
    client,
    tool="ledger.record",
    key=lambda order_id, **_: f"order-{order_id}-charge",
    arguments=lambda order_id, amount_cents: {"account": order_id, "amountCents": amount_cents, "currency": "EUR", "memo": "charge"},
)
def book_payment(order_id: str, amount_cents: int) -> dict[str, Any]:
    attempts["sdk"] += 1
    if attempts["sdk"] == 1:
        raise NotAppliedError("the payment service answered 429: nothing was charged")
    entry = {"entryId": f"ent_{uuid.uuid4().hex[:10]}", "orderId": order_id, "amountCents": amount_cents}
    # one line per effect, appended with O_APPEND so concurrent writers never interleave
    fd = os.open(LEDGER, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(entry) + "\n").encode())
    finally:
        os.close(fd)
    return entry


receipts = {"calls": 0}


def send_receipt(entry: dict[str, Any]) -> None:
    receipts["calls"] += 1
    if receipts["calls"] == 1:
        raise ConnectionError("the receipt service is down")


def checkout(order_id: str) -> dict[str, Any]:
    entry = book_payment(order_id, 4200)
    send_receipt(entry)
    return entry


def main() -> int:
    steps: list[dict[str, Any]] = []
    for attempt in range(1, 6):
        try:
            entry = checkout(ORDER)
        except (NotAppliedError, ConnectionError) as err:
            steps.append({"attempt": attempt, "error": type(err).__name__})
            time.sleep(0.1 * attempt)
            continue
        steps.append({"attempt": attempt, "entry": entry})
        break
    print(json.dumps({"example": "python", "orderId": ORDER, "ledger": LEDGER, "sdkRuns": attempts["sdk"], "steps": steps}))
    return 0 if "entry" in steps[-1] else 1


if __name__ == "__main__":
    sys.exit(main())
