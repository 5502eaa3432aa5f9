"""A tiny HTTP server for the client's own logic: each test scripts the answers, the server records requests.

``KeyStore`` answers reservations, completions, releases and heartbeats as Idemgate does for one
scope (in memory, a lock per call): for tests where many callers race on one key.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Optional, Union


class Seen:
    def __init__(self, method: str, path: str, headers: dict[str, str], body: Any) -> None:
        self.method, self.path, self.headers, self.body = method, path, headers, body

    def __repr__(self) -> str:
        return f"Seen({self.method} {self.path!r}, {self.body!r})"


class Raw:
    """A body sent as it is (an HTML page from a proxy)."""

    def __init__(self, text: str) -> None:
        self.text = text


#: (status, body, headers); a None status drops the connection without an answer
Reply = tuple[Optional[int], Any, dict[str, str]]


def problem(status: int, code: str, **extra: Any) -> Reply:
    return status, {"type": f"/problems/{code}", "title": code, "status": status, "detail": f"detail of {code}", **extra}, {"Content-Type": "application/problem+json"}


def reserved(execution_id: str = "exec-1", lease_seconds: float = 60.0, lease_ms: bool = False) -> Reply:
    until = int((time.time() + lease_seconds) * 1000)
    body: dict[str, Any] = {"state": "reserved", "executionId": execution_id, "token": 7, "leaseUntil": until}
    if lease_ms:
        body["leaseMs"] = int(lease_seconds * 1000)
    return 201, body, {}


def done(body: Any, status: int = 200, execution_id: Optional[str] = None, expires_in_ms: Optional[int] = None) -> Reply:
    answer: dict[str, Any] = {"state": "done", "status": status, "body": body}
    if execution_id is not None:
        answer["executionId"] = execution_id
    if expires_in_ms is not None:
        answer["expiresInMs"] = expires_in_ms
    return 200, answer, {"Idempotent-Replayed": "true"}


def ok(body: Any = None) -> Reply:
    return 200, body if body is not None else {"ok": True}, {}


def html(status: int = 502) -> Reply:
    return status, Raw("<html><body><h1>502 Bad Gateway</h1></body></html>"), {"Content-Type": "text/html"}


Route = Union[list[Reply], Callable[[Seen], Reply]]


class FakeIdemgate:
    """Answers each path from a script (a list consumed in order, or a function of the request)."""

    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self.routes: dict[str, Callable[[Seen], Reply]] = {}
        self.lock = threading.Lock()
        self.arrived = threading.Condition(self.lock)
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_: Any) -> None:
                pass

            def handle_one(self, method: str) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                seen = Seen(method, self.path, {k.lower(): v for k, v in self.headers.items()}, json.loads(raw or b"null"))
                with fake.arrived:
                    fake.seen.append(seen)
                    fake.arrived.notify_all()
                status, body, headers = fake.answer(seen)
                if status is None:
                    self.close_connection = True
                    self.connection.close()
                    return
                data = body.text.encode() if isinstance(body, Raw) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", headers.pop("Content-Type", "application/json"))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                self.handle_one("POST")

            def do_GET(self) -> None:
                self.handle_one("GET")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def on(self, suffix: str, replies: Route) -> None:
        """Answers requests whose path ends with ``suffix``; a list is consumed in order, its last reply repeated."""
        if callable(replies):
            self.routes[suffix] = replies
            return
        queue = list(replies)
        lock = threading.Lock()

        def next_reply(_: Seen) -> Reply:
            with lock:
                reply = queue.pop(0) if len(queue) > 1 else queue[0]
            return reply[0], reply[1], dict(reply[2])

        self.routes[suffix] = next_reply

    def answer(self, seen: Seen) -> Reply:
        path = seen.path.split("?", 1)[0]
        for suffix, route in self.routes.items():
            if path.endswith(suffix):
                return route(seen)
        return 404, {"type": "/problems/not_found", "title": "Not found", "status": 404}, {"Content-Type": "application/problem+json"}

    def paths(self) -> list[str]:
        with self.lock:
            return [s.path.rsplit("/", 1)[-1] for s in self.seen]

    def wait_for(self, predicate: Callable[[list[Seen]], bool], timeout: float = 20.0) -> None:
        """Waits until the requests seen so far satisfy ``predicate`` (fails the test after ``timeout``)."""
        with self.arrived:
            if not self.arrived.wait_for(lambda: predicate(self.seen), timeout):
                raise AssertionError(f"the fake server never saw what the test waited for; it saw {self.seen}")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class KeyStore:
    """Reservation API semantics for one scope, in memory: the first reservation of a key gets 201, a
    duplicate while it runs is held (``Prefer: wait``) until it is settled, a done key replays; complete
    and release are fenced by the token. Mount with ``fake.on(suffix, store.route)`` for each action."""

    def __init__(self, expires_in_ms: int = 3_600_000) -> None:
        self.keys: dict[str, dict[str, Any]] = {}
        self.executions: dict[str, str] = {}
        self.cond = threading.Condition()
        self.expires_in_ms = expires_in_ms
        self.token = 0

    def mount(self, fake: FakeIdemgate) -> None:
        for suffix in ("/reservations", "/complete", "/release", "/heartbeat"):
            fake.on(suffix, self.route)

    def route(self, seen: Seen) -> Reply:
        if seen.path.endswith("/reservations"):
            return self.reserve(seen)
        execution_id = seen.path.split("/")[-2]
        with self.cond:
            key = self.executions.get(execution_id)
            record = self.keys.get(key) if key is not None else None
            if record is None or record["token"] != seen.body.get("token") or record["state"] != "reserved":
                if record is not None and record["state"] == "done" and seen.path.endswith("/complete") and record["body"] == seen.body.get("body"):
                    return self._done(record)
                return problem(409, "stale_token")
            if seen.path.endswith("/heartbeat"):
                return 200, {"state": "reserved", "leaseMs": 60_000}, {}
            if seen.path.endswith("/complete"):
                record.update(state="done", status=seen.body.get("status", 200), body=seen.body.get("body"))
            elif seen.body["outcome"] == "not_run":
                del self.keys[key]  # type: ignore[arg-type]
            else:
                record["state"] = "unknown"
            self.cond.notify_all()
            return self._done(record) if record["state"] == "done" else (200, {"state": record["state"] if key in self.keys else "released"}, {})

    def _done(self, record: dict[str, Any]) -> Reply:
        return done(record["body"], record["status"], record["executionId"], self.expires_in_ms)

    def reserve(self, seen: Seen) -> Reply:
        key = seen.headers["idempotency-key"]
        wait = 0.0
        prefer = seen.headers.get("prefer", "")
        if prefer.startswith("wait="):
            wait = float(prefer[5:])
        deadline = time.monotonic() + wait
        with self.cond:
            while True:
                record = self.keys.get(key)
                if record is None:
                    self.token += 1
                    execution_id = str(uuid.uuid4())
                    self.keys[key] = {"state": "reserved", "token": self.token, "executionId": execution_id, "args": seen.body}
                    self.executions[execution_id] = key
                    body = {"state": "reserved", "executionId": execution_id, "token": self.token, "leaseMs": 60_000, "leaseUntil": "2099-01-01T00:00:00Z"}
                    return 201, body, {}
                if record["args"] != seen.body:
                    return problem(422, "mismatch")
                if record["state"] == "done":
                    return self._done(record)
                if record["state"] == "unknown":
                    return problem(409, "outcome_unknown", key=key, state="unknown")
                left = deadline - time.monotonic()
                if left <= 0:
                    status, body, headers = problem(409, "conflict", state="inflight")
                    return status, body, {**headers, "Retry-After": "1"}
                self.cond.wait(left)


class ProbeStore:
    """The probe API for one scope, in memory, as PROBE semantics say: held calls listed page by page
    (``GET /api/v1/tools/{tool}/held``), one live claim per call (``.../probe/claim``), answers fenced
    by the claim (``.../probe/answer``); "unknown" answers back off the call. ``probed`` counts the
    answers per execution; ``decided`` keeps each call's decision."""

    def __init__(self, page_size: int = 2, claim_conflicts: int = 0) -> None:
        self.calls: dict[str, dict[str, Any]] = {}
        self.lock = threading.Condition()
        self.page_size = page_size
        self.answers: list[tuple[str, dict[str, Any]]] = []
        self.decided: dict[str, str] = {}
        self.claims_seen: list[tuple[str, Any]] = []
        self.backoff_seconds = 60.0

    def hold(
        self, tool: str, key: str, arguments: Any = None, state: str = "unknown", lease_ended: bool = True, next_probe_at: Optional[str] = None, lease_ends_in: Optional[float] = None
    ) -> str:
        """A held call; ``lease_ends_in`` (seconds): its lease runs that much longer (``leaseUntil`` then says when)."""
        execution_id = str(uuid.uuid4())
        lease_until = "2026-01-02T03:05:05.000Z"
        if lease_ends_in is not None:
            lease_ended = False
            lease_until = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(time.time() + lease_ends_in)) + f".{int((time.time() + lease_ends_in) % 1 * 1000):03d}Z"
        with self.lock:
            self.calls[execution_id] = {
                "executionId": execution_id,
                "tool": tool,
                "key": key,
                "scope": "tenant-a",
                "state": state,
                "startedAt": "2026-01-02T03:04:05.000Z",
                "leaseUntil": lease_until,
                "leaseEnded": lease_ended,
                "note": "the guarded function raised TimeoutError" if state == "unknown" else None,
                "arguments": arguments,
                "argumentsKept": "full" if arguments is not None else None,
                "probe": {"attempts": 0, "claimedUntil": None, "nextProbeAt": next_probe_at, "lastNote": None},
                "_claim": None,
                "_claim_until": 0.0,
                "_lease_ends": time.monotonic() + lease_ends_in if lease_ends_in is not None else None,
            }
        return execution_id

    def mount(self, fake: FakeIdemgate) -> None:
        for suffix in ("/held", "/probe/claim", "/probe/answer"):
            fake.on(suffix, self.route)

    @staticmethod
    def public(call: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in call.items() if not k.startswith("_")}

    def route(self, seen: Seen) -> Reply:
        path, _, query = seen.path.partition("?")
        if path.endswith("/held"):
            tool = path.split("/")[-2]
            params = dict(p.split("=", 1) for p in query.split("&") if "=" in p)
            start = int(params.get("cursor", "0"))
            with self.lock:
                held = [self.public(c) for c in self.calls.values() if c["tool"] == tool and c["state"] in ("unknown", "stuck")]
            page = held[start : start + self.page_size]
            more = start + self.page_size < len(held)
            return 200, {"items": page, "nextCursor": str(start + self.page_size) if more else None}, {}
        execution_id = path.split("/")[-3]
        with self.lock:
            call = self.calls.get(execution_id)
            if call is None:
                return problem(404, "not_found")
            now = time.monotonic()
            if path.endswith("/claim"):
                self.claims_seen.append((execution_id, seen.body))
                if call["state"] not in ("unknown", "stuck"):
                    return problem(409, "not_held")
                if call["_claim"] is not None and call["_claim_until"] > now:
                    status, body, headers = problem(409, "probe_claimed")
                    return status, body, {**headers, "Retry-After": "1"}
                call["_claim"] = str(uuid.uuid4())
                call["_claim_until"] = now + seen.body.get("leaseMs", 30000) / 1000
                return 200, {"claim": call["_claim"], "claimedUntil": "2099-01-01T00:00:00Z", "claimMs": seen.body.get("leaseMs", 30000), "call": self.public(call)}, {}
            body = seen.body
            if body.get("claim") != call["_claim"]:
                return problem(409, "probe_claimed")
            self.answers.append((execution_id, body))
            self.lock.notify_all()
            if call["state"] not in ("unknown", "stuck"):
                return problem(409, "not_held")
            outcome = body.get("outcome")
            if call["_lease_ends"] is not None and time.monotonic() >= call["_lease_ends"]:
                call["leaseEnded"] = True
            if outcome == "not_applied" and not call["leaseEnded"]:
                return problem(409, "lease_running")
            call["_claim"] = None
            if outcome == "applied":
                call["state"] = "done"
                self.decided[execution_id] = "applied"
                return 200, {"decision": "resolved", "state": "done"}, {}
            if outcome == "not_applied":
                call["state"] = "absent"
                self.decided[execution_id] = "not_applied"
                return 200, {"decision": "released", "state": "absent"}, {}
            call["probe"]["attempts"] += 1
            call["probe"]["lastNote"] = body.get("note")
            call["probe"]["nextProbeAt"] = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(time.time() + self.backoff_seconds))
            return 200, {"decision": "none", "state": call["state"], "nextProbeAt": call["probe"]["nextProbeAt"]}, {}

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 20.0) -> None:
        with self.lock:
            if not self.lock.wait_for(predicate, timeout):
                raise AssertionError(f"the probe store never got what the test waited for; answers: {self.answers}")
