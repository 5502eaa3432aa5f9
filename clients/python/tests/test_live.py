"""The client against a live Idemgate (IDEMGATE_URL, IDEMGATE_TOKEN): `npm test`'s fault suite starts one and runs these.

They use the demo client-run tool ``ledger.record`` (arguments ``account``, ``amountCents``,
``currency``); the function each test guards appends to a list that stands in for the ledger.
"""

from __future__ import annotations

import os
import threading
import unittest
import uuid
from typing import Any

import pytest

from idemgate import FinalError, Idemgate, IdemgateError, NotAppliedError, OutcomeUnknownError, idempotent

URL = os.environ.get("IDEMGATE_URL")
TOKEN = os.environ.get("IDEMGATE_TOKEN", "")
TOOL = "ledger.record"

#: deselected (not skipped) by the python stage with ``-m "not live"``; run without a server, they fail
pytestmark = pytest.mark.live


class LiveTest(unittest.TestCase):
    def setUp(self) -> None:
        self.assertTrue(URL, "needs a live Idemgate: set IDEMGATE_URL and IDEMGATE_TOKEN")
        self.client = Idemgate(str(URL), TOKEN, timeout=15)
        self.account = f"acct-{uuid.uuid4().hex[:10]}"
        self.ledger: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def args(self, amount: int = 500) -> dict[str, Any]:
        return {"account": self.account, "amountCents": amount, "currency": "EUR"}

    def book(self, args: Any) -> dict[str, Any]:
        with self.lock:
            self.ledger.append(dict(args))
            return {"entryId": f"e{len(self.ledger)}", "account": args["account"], "amountCents": args["amountCents"]}

    def key(self) -> str:
        return f"test-{uuid.uuid4()}"

    def test_runs_once_and_a_retry_gets_the_stored_result(self) -> None:
        key = self.key()
        first = self.client.guard(TOOL, self.args(), self.book, key=key, session="py-live")
        second = self.client.guard(TOOL, self.args(), self.book, key=key, session="py-live")
        self.assertEqual(second, first)
        self.assertEqual(len(self.ledger), 1)

    def test_the_decorator_runs_once_per_order(self) -> None:
        account = self.account

        @idempotent(self.client, tool=TOOL, key=lambda order_id, **_: f"order-{order_id}-{account}", arguments=lambda order_id, amount_cents: {"account": account, "amountCents": amount_cents, "currency": "EUR", "memo": order_id})
        def record(order_id: str, amount_cents: int) -> dict[str, Any]:
            return self.book({"account": account, "amountCents": amount_cents})

        results = [record("o-1", 700) for _ in range(3)]
        self.assertEqual(results, [results[0]] * 3)
        self.assertEqual(len(self.ledger), 1)
        record("o-2", 700)
        self.assertEqual(len(self.ledger), 2)

    def test_threads_racing_on_one_key_run_it_once(self) -> None:
        key = self.key()
        results: list[Any] = []
        gate = threading.Barrier(6)

        def slow_book(args: Any) -> dict[str, Any]:
            threading.Event().wait(0.3)
            return self.book(args)

        def racer() -> None:
            gate.wait()
            results.append(self.client.guard(TOOL, self.args(), slow_book, key=key))

        threads = [threading.Thread(target=racer) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(len(self.ledger), 1)
        self.assertEqual(len(results), 6)
        self.assertEqual(results, [results[0]] * 6)

    def test_a_final_error_is_stored_and_replayed(self) -> None:
        key = self.key()

        def decline(_: Any) -> None:
            self.ledger.append({"declined": True})
            raise FinalError(402, {"code": "insufficient_funds"})

        with self.assertRaises(FinalError) as first:
            self.client.guard(TOOL, self.args(), decline, key=key)
        self.assertFalse(first.exception.replayed)
        with self.assertRaises(FinalError) as again:
            self.client.guard(TOOL, self.args(), decline, key=key)
        self.assertEqual((again.exception.status, again.exception.body, again.exception.replayed), (402, {"code": "insufficient_funds"}, True))
        self.assertEqual(len(self.ledger), 1)

    def test_not_applied_frees_the_key_and_the_retry_runs_once(self) -> None:
        key = self.key()

        def refused(_: Any) -> None:
            raise NotAppliedError("the ledger was read-only")

        with self.assertRaises(NotAppliedError):
            self.client.guard(TOOL, self.args(), refused, key=key)
        self.assertEqual(len(self.ledger), 0)
        first = self.client.guard(TOOL, self.args(), self.book, key=key)
        self.assertEqual(self.client.guard(TOOL, self.args(), self.book, key=key), first)
        self.assertEqual(len(self.ledger), 1)

    def test_an_exception_after_the_effect_is_unknown_and_never_run_again(self) -> None:
        key = self.key()

        def book_then_fail(args: Any) -> None:
            self.book(args)
            raise ConnectionResetError("the answer was lost")

        with self.assertRaises(OutcomeUnknownError) as first:
            self.client.guard(TOOL, self.args(), book_then_fail, key=key)
        self.assertIsInstance(first.exception.__cause__, ConnectionResetError)
        for _ in range(2):
            with self.assertRaises(OutcomeUnknownError) as again:
                self.client.guard(TOOL, self.args(), self.book, key=key)
            self.assertEqual((again.exception.status, again.exception.code), (409, "outcome_unknown"))
        self.assertEqual(len(self.ledger), 1)

    def test_the_same_key_with_other_arguments_is_refused(self) -> None:
        key = self.key()
        self.client.guard(TOOL, self.args(500), self.book, key=key)
        with self.assertRaises(IdemgateError) as caught:
            self.client.guard(TOOL, self.args(501), self.book, key=key)
        self.assertEqual((caught.exception.status, caught.exception.code), (422, "mismatch"))
        self.assertEqual(len(self.ledger), 1)

    def test_bad_input_is_a_problem_and_nothing_runs(self) -> None:
        cases = [
            (TOOL, {"account": self.account, "amountCents": 1.5, "currency": "EUR"}, self.key(), 400),
            ("no.such_tool", self.args(), self.key(), 404),
            (TOOL, self.args(), "k" * 256, 400),
        ]
        for tool, args, key, status in cases:
            with self.subTest(tool=tool, status=status):
                with self.assertRaises(IdemgateError) as caught:
                    self.client.guard(tool, args, self.book, key=key)
                self.assertEqual(caught.exception.status, status)
                self.assertTrue(caught.exception.type.startswith("/problems/"), caught.exception.type)
        self.assertEqual(self.ledger, [])

    def test_a_wrong_api_token_is_refused(self) -> None:
        client = Idemgate(str(URL), "idg_not_a_token", timeout=15)
        with self.assertRaises(IdemgateError) as caught:
            client.guard(TOOL, self.args(), self.book, key=self.key())
        self.assertEqual(caught.exception.status, 401)
        self.assertEqual(self.ledger, [])


if __name__ == "__main__":
    unittest.main()
