"""The client's own logic against a scripted fake server: retries, heartbeats, settling, error mapping."""

from __future__ import annotations

import threading
import unittest
from typing import Any, ClassVar

from fake_server import FakeIdemgate, Seen, done, ok, problem, reserved

import idemgate
from idemgate import FinalError, Idemgate, IdemgateError, NotAppliedError, OutcomeUnknownError, RetryPolicy, idempotent


class ClientTestCase(unittest.TestCase):
    def setUp(self) -> None:
        self.fake = FakeIdemgate()
        self.addCleanup(self.fake.close)
        self.sleeps: list[float] = []
        self.client = Idemgate(self.fake.url, "idg_test", timeout=5, wait_seconds=3, retry=RetryPolicy(max_attempts=4), sleep=self.sleeps.append, flush_timeout=0.5)
        self.addCleanup(self.client.close)
        self.runs = 0

    def charge(self, args: Any) -> dict[str, Any]:
        self.runs += 1
        return {"chargeId": f"ch_{self.runs}", "amountCents": args["amountCents"]}


class GuardTest(ClientTestCase):
    def test_runs_after_201_and_completes_with_the_result(self) -> None:
        self.fake.on("/reservations", [reserved()])
        self.fake.on("/complete", [ok()])
        result = self.client.guard("payments.charge", {"amountCents": 500}, self.charge, key="order-1", session="run-7", key_source="orchestrator")
        self.assertEqual(result, {"chargeId": "ch_1", "amountCents": 500})
        self.assertEqual(self.runs, 1)
        reserve, complete = self.fake.seen
        self.assertEqual(reserve.path, "/api/v1/tools/payments.charge/reservations")
        self.assertEqual(reserve.body, {"arguments": {"amountCents": 500}})
        self.assertEqual(reserve.headers["idempotency-key"], "order-1")
        self.assertEqual(reserve.headers["authorization"], "Bearer idg_test")
        self.assertEqual(reserve.headers["prefer"], "wait=3")
        self.assertEqual(reserve.headers["idemgate-session"], "run-7")
        self.assertEqual(reserve.headers["idemgate-key-source"], "orchestrator")
        self.assertEqual(complete.path, "/api/v1/executions/exec-1/complete")
        self.assertEqual(complete.body, {"token": 7, "status": 200, "body": result})

    def test_a_replay_returns_the_stored_body_without_running(self) -> None:
        self.fake.on("/reservations", [done({"chargeId": "ch_first"})])
        self.assertEqual(self.client.guard("payments.charge", {"amountCents": 500}, self.charge, key="order-1"), {"chargeId": "ch_first"})
        self.assertEqual(self.runs, 0)
        self.assertEqual(self.fake.paths(), ["reservations"])

    def test_a_replayed_final_error_is_raised_again_without_running(self) -> None:
        self.fake.on("/reservations", [done({"code": "card_declined"}, status=402)])
        with self.assertRaises(FinalError) as caught:
            self.client.guard("payments.charge", {"amountCents": 500}, self.charge, key="order-1")
        self.assertEqual((caught.exception.status, caught.exception.body, caught.exception.replayed), (402, {"code": "card_declined"}, True))
        self.assertEqual(self.runs, 0)

    def test_retries_network_errors_503_and_conflicts_with_the_same_key(self) -> None:
        self.fake.on("/reservations", [(None, None, {}), problem(503, "unavailable"), problem(409, "conflict", state="inflight") , reserved()])
        self.fake.on("/complete", [problem(503, "unavailable"), ok()])
        self.client.guard("payments.charge", {"amountCents": 1}, self.charge, key="order-2")
        self.assertEqual(self.runs, 1)
        self.assertEqual(self.fake.paths(), ["reservations"] * 4 + ["complete"] * 2)
        self.assertEqual({s.headers.get("idempotency-key") for s in self.fake.seen if s.path.endswith("reservations")}, {"order-2"})
        self.assertEqual(len(self.sleeps), 4)

    def test_a_conflict_honours_retry_after(self) -> None:
        self.fake.on("/reservations", [(409, {"type": "/problems/conflict", "title": "c", "status": 409}, {"Content-Type": "application/problem+json", "Retry-After": "2"}), done({"x": 1})])
        self.client.guard("t", {}, self.charge, key="k")
        self.assertEqual(self.sleeps, [2.0])

    def test_a_retry_after_of_zero_backs_off(self) -> None:
        conflict = (409, {"type": "/problems/conflict", "title": "c", "status": 409}, {"Content-Type": "application/problem+json", "Retry-After": "0"})
        self.fake.on("/reservations", [conflict, conflict, done({"x": 1})])
        self.client.guard("t", {}, self.charge, key="k")
        self.assertEqual(len(self.sleeps), 2)
        self.assertTrue(all(0.1 <= s <= 0.2 for s in self.sleeps[:1]), self.sleeps)
        self.assertTrue(0.2 <= self.sleeps[1] <= 0.4, self.sleeps)

    def test_outcome_unknown_on_reserve_never_runs(self) -> None:
        self.fake.on("/reservations", [problem(409, "outcome_unknown", key="order-3", state="unknown")])
        with self.assertRaises(OutcomeUnknownError) as caught:
            self.client.guard("payments.charge", {"amountCents": 1}, self.charge, key="order-3")
        self.assertEqual((caught.exception.status, caught.exception.key, caught.exception.code), (409, "order-3", "outcome_unknown"))
        self.assertEqual(self.runs, 0)
        self.assertEqual(self.fake.paths(), ["reservations"])

    def test_other_problems_are_raised_with_type_status_and_detail(self) -> None:
        for status, code in [(422, "mismatch"), (409, "stuck"), (404, "unknown_tool"), (400, "invalid_arguments")]:
            with self.subTest(code=code):
                self.fake.seen.clear()
                self.fake.on("/reservations", [problem(status, code)])
                with self.assertRaises(IdemgateError) as caught:
                    self.client.guard("t", {}, self.charge, key="k")
                err = caught.exception
                self.assertNotIsInstance(err, OutcomeUnknownError)
                self.assertEqual((err.type, err.status, err.detail, err.code), (f"/problems/{code}", status, f"detail of {code}", code))
                self.assertEqual(len(self.fake.seen), 1)
        self.assertEqual(self.runs, 0)

    def test_a_paused_tool_raises_tool_paused_without_running_or_retrying(self) -> None:
        self.fake.on("/reservations", [problem(503, "tool_paused", tool="t", reason="provider incident")])
        with self.assertRaises(idemgate.ToolPausedError) as caught:
            self.client.guard("t", {}, self.charge, key="k")
        self.assertEqual((caught.exception.status, caught.exception.code), (503, "tool_paused"))
        self.assertEqual(self.runs, 0)
        self.assertEqual(self.fake.paths(), ["reservations"])

    def test_an_unreachable_server_raises_after_the_retries(self) -> None:
        client = Idemgate("http://127.0.0.1:9", "idg_x", timeout=1, retry=RetryPolicy(max_attempts=3), sleep=self.sleeps.append)
        with self.assertRaises(IdemgateError) as caught:
            client.guard("t", {}, self.charge, key="k")
        self.assertEqual((caught.exception.status, caught.exception.type, caught.exception.attempts), (0, "about:blank#network", 3))
        self.assertEqual(self.runs, 0)

    def test_any_other_exception_releases_unknown_and_raises_outcome_unknown(self) -> None:
        self.fake.on("/reservations", [reserved("exec-9")])
        self.fake.on("/release", [ok()])

        def boom(_: Any) -> None:
            raise ConnectionResetError("the payment API hung up")

        with self.assertRaises(OutcomeUnknownError) as caught:
            self.client.guard("payments.charge", {}, boom, key="k")
        self.assertIsInstance(caught.exception.__cause__, ConnectionResetError)
        self.assertEqual((caught.exception.execution_id, caught.exception.key), ("exec-9", "k"))
        release = self.fake.seen[-1]
        self.assertEqual(release.path, "/api/v1/executions/exec-9/release")
        self.assertEqual(release.body["outcome"], "unknown")
        self.assertIn("ConnectionResetError", release.body["note"])

    def test_a_result_that_is_not_json_is_unknown(self) -> None:
        self.fake.on("/reservations", [reserved()])
        self.fake.on("/release", [ok()])
        with self.assertRaises(OutcomeUnknownError) as caught:
            self.client.guard("t", {}, lambda _: object(), key="k")
        self.assertIsInstance(caught.exception.__cause__, TypeError)
        self.assertEqual(self.fake.seen[-1].body["outcome"], "unknown")

    def test_not_applied_releases_not_run_and_reraises(self) -> None:
        self.fake.on("/reservations", [reserved()])
        self.fake.on("/release", [ok()])

        def refused(_: Any) -> None:
            raise NotAppliedError("the card network refused the connection")

        with self.assertRaises(NotAppliedError):
            self.client.guard("t", {}, refused, key="k")
        self.assertEqual(self.fake.seen[-1].body["outcome"], "not_run")

    def test_a_429_from_the_function_says_nothing_happened(self) -> None:
        class RateLimited(Exception):
            status_code = 429

        self.fake.on("/reservations", [reserved()])
        self.fake.on("/release", [ok()])

        def limited(_: Any) -> None:
            raise RateLimited("slow down")

        with self.assertRaises(RateLimited):
            self.client.guard("t", {}, limited, key="k")
        self.assertEqual(self.fake.seen[-1].body["outcome"], "not_run")

    def test_a_final_error_is_stored_and_reraised(self) -> None:
        self.fake.on("/reservations", [reserved()])
        self.fake.on("/complete", [ok()])

        def decline(_: Any) -> None:
            raise FinalError(402, {"code": "card_declined"})

        with self.assertRaises(FinalError):
            self.client.guard("t", {}, decline, key="k")
        self.assertEqual(self.fake.seen[-1].body, {"token": 7, "status": 402, "body": {"code": "card_declined"}})

    def test_an_exception_carrying_a_4xx_status_is_a_final_result(self) -> None:
        class CardError(Exception):
            status = 402
            body: ClassVar[dict[str, str]] = {"decline_code": "insufficient_funds"}

        self.fake.on("/reservations", [reserved()])
        self.fake.on("/complete", [ok()])

        def decline(_: Any) -> None:
            raise CardError("declined")

        with self.assertRaises(CardError):
            self.client.guard("t", {}, decline, key="k")
        self.assertEqual(self.fake.seen[-1].body["status"], 402)
        self.assertEqual(self.fake.seen[-1].body["body"], {"decline_code": "insufficient_funds"})

    def test_an_idemgate_error_from_an_inner_call_is_unknown_not_a_final_result(self) -> None:
        self.fake.on("/reservations", [reserved()])
        self.fake.on("/release", [ok()])

        def nested(_: Any) -> None:
            raise OutcomeUnknownError({"type": "/problems/outcome_unknown", "title": "t", "status": 409}, "inner-key")

        with self.assertRaises(OutcomeUnknownError) as caught:
            self.client.guard("t", {}, nested, key="k")
        self.assertEqual(caught.exception.key, "k")
        self.assertEqual(self.fake.seen[-1].body["outcome"], "unknown")
        self.assertNotIn("complete", self.fake.paths())

    def test_complete_after_the_key_was_released_keeps_the_result_and_warns(self) -> None:
        self.fake.on("/reservations", [reserved()])
        self.fake.on("/complete", [problem(409, "stale_token")])
        with self.assertLogs("idemgate", "WARNING") as logs:
            result = self.client.guard("t", {"amountCents": 2}, self.charge, key="k")
        self.assertEqual(result["chargeId"], "ch_1")
        self.assertIn("late completion", "\n".join(logs.output))

    def test_a_result_that_cannot_be_stored_at_once_is_returned_and_its_completion_retried_in_the_background(self) -> None:
        self.fake.on("/reservations", [reserved()])
        self.fake.on("/complete", [problem(503, "unavailable"), problem(503, "unavailable"), (None, None, {}), ok()])
        with self.assertLogs("idemgate", "WARNING") as logs:
            result = self.client.guard("t", {"amountCents": 3}, self.charge, key="k")
            self.assertEqual(result["chargeId"], "ch_1")
            self.assertIn("retrying in the background", "\n".join(logs.output))
            self.fake.wait_for(lambda seen: len([s for s in seen if s.path.endswith("complete")]) >= 4)
            self.assertTrue(self.client.flush(timeout=10))
        completes = [s for s in self.fake.seen if s.path.endswith("complete")]
        self.assertEqual([s.body for s in completes], [completes[0].body] * 4)
        self.assertEqual(completes[0].body["token"], 7)
        self.assertEqual(self.client.pending_deliveries, 0)


class HeartbeatTest(ClientTestCase):
    def test_heartbeats_at_a_third_of_the_lease_while_fn_runs(self) -> None:
        beats = threading.Event()
        count = [0]

        def heartbeat(seen: Seen) -> Any:
            count[0] += 1
            if count[0] >= 3:
                beats.set()
            return ok()

        self.fake.on("/reservations", [reserved(lease_seconds=0.6)])
        self.fake.on("/heartbeat", heartbeat)
        self.fake.on("/complete", [ok()])
        self.client.guard("t", {}, lambda _: beats.wait(10), key="k")
        self.assertTrue(beats.is_set(), "three heartbeats while the function ran")
        paths = self.fake.paths()
        self.assertEqual(paths[-1], "complete")
        beats_after = len([p for p in paths if p == "heartbeat"])
        self.assertEqual({s.body["token"] for s in self.fake.seen if s.path.endswith("heartbeat")}, {7})
        self.assertEqual(paths, ["reservations"] + ["heartbeat"] * beats_after + ["complete"])

    def test_heartbeats_follow_the_servers_lease_not_the_clients_clock(self) -> None:
        beats = threading.Event()
        count = [0]

        def heartbeat(_: Seen) -> Any:
            count[0] += 1
            if count[0] >= 3:
                beats.set()
            return 200, {"state": "reserved", "leaseUntil": 0, "leaseMs": 600}, {}

        # leaseUntil an hour ahead by this client's clock (a clock that runs behind); leaseMs says 0.6 s are left
        status, body, headers = reserved(lease_seconds=3600)
        self.fake.on("/reservations", [(status, {**body, "leaseMs": 600}, headers)])
        self.fake.on("/heartbeat", heartbeat)
        self.fake.on("/complete", [ok()])
        self.client.guard("t", {}, lambda _: beats.wait(5), key="k")
        self.assertTrue(beats.is_set(), "heartbeats every third of the 0.6 s the server said were left")

    def test_a_409_stops_the_heartbeats_and_warns(self) -> None:
        stale = threading.Event()

        def heartbeat(_: Seen) -> Any:
            stale.set()
            return problem(409, "stale_token")

        self.fake.on("/reservations", [reserved(lease_seconds=0.3)])
        self.fake.on("/heartbeat", heartbeat)
        self.fake.on("/complete", [problem(409, "stale_token")])

        def slow(_: Any) -> str:
            stale.wait(10)
            threading.Event().wait(0.5)  # several heartbeat intervals: none may be sent
            return "done"

        with self.assertLogs("idemgate", "WARNING") as logs:
            self.client.guard("t", {}, slow, key="k")
        self.assertEqual(self.fake.paths().count("heartbeat"), 1)
        self.assertIn("heartbeats stopped", "\n".join(logs.output))


    def test_a_heartbeat_in_flight_does_not_hold_up_the_return(self) -> None:
        arrived, release, answered = threading.Event(), threading.Event(), threading.Event()

        def heartbeat(_: Seen) -> Any:
            arrived.set()
            release.wait(5)
            answered.set()
            return ok()

        self.fake.on("/reservations", [reserved(lease_seconds=0.3)])
        self.fake.on("/heartbeat", heartbeat)
        self.fake.on("/complete", [ok()])
        self.addCleanup(release.set)
        self.assertEqual(self.client.guard("t", {}, lambda _: arrived.wait(10) and "done", key="k"), "done")
        self.assertFalse(answered.is_set(), "guard returned while its heartbeat was still unanswered")
        self.assertEqual(self.fake.paths()[-1], "complete")


class DecoratorTest(ClientTestCase):
    def test_the_key_function_gets_the_arguments_and_the_bound_arguments_are_sent(self) -> None:
        self.fake.on("/reservations", [reserved()])
        self.fake.on("/complete", [ok()])
        calls: list[tuple[str, int]] = []

        @idempotent(self.client, tool="payments.charge", key=lambda order_id, **_: f"order-{order_id}-charge")
        def charge(order_id: str, amount_cents: int, currency: str = "EUR") -> dict[str, Any]:
            calls.append((order_id, amount_cents))
            return {"chargeId": "ch_1", "currency": currency}

        self.assertEqual(charge("o-17", 500), {"chargeId": "ch_1", "currency": "EUR"})
        self.assertEqual(charge.__name__, "charge")
        self.assertEqual(calls, [("o-17", 500)])
        reserve = self.fake.seen[0]
        self.assertEqual(reserve.headers["idempotency-key"], "order-o-17-charge")
        self.assertEqual(reserve.body, {"arguments": {"order_id": "o-17", "amount_cents": 500, "currency": "EUR"}})

    def test_a_replay_does_not_call_the_function(self) -> None:
        self.fake.on("/reservations", [done({"chargeId": "ch_first"})])

        @idempotent(self.client, tool="payments.charge", key=lambda order_id, **_: f"order-{order_id}", arguments=lambda order_id, **_: {"orderId": order_id})
        def charge(order_id: str, sdk: object = None) -> dict[str, Any]:
            raise AssertionError("must not run")

        self.assertEqual(charge("o-1", sdk=object()), {"chargeId": "ch_first"})
        self.assertEqual(self.fake.seen[0].body, {"arguments": {"orderId": "o-1"}})


if __name__ == "__main__":
    unittest.main()
