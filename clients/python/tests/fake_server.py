"""A tiny HTTP server for the client's own logic: each test scripts the answers, the server records requests."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Optional


class Seen:
    def __init__(self, path: str, headers: dict[str, str], body: Any) -> None:
        self.path, self.headers, self.body = path, headers, body

    def __repr__(self) -> str:
        return f"Seen({self.path!r}, {self.body!r})"


#: (status, body, headers); a None status drops the connection without an answer
Reply = tuple[Optional[int], Any, dict[str, str]]


def problem(status: int, code: str, **extra: Any) -> Reply:
    return status, {"type": f"/problems/{code}", "title": code, "status": status, "detail": f"detail of {code}", **extra}, {"Content-Type": "application/problem+json"}


def reserved(execution_id: str = "exec-1", lease_seconds: float = 60.0) -> Reply:
    import time

    until = int((time.time() + lease_seconds) * 1000)
    return 201, {"state": "reserved", "executionId": execution_id, "token": 7, "leaseUntil": until}, {}


def done(body: Any, status: int = 200) -> Reply:
    return 200, {"state": "done", "status": status, "body": body}, {"Idempotent-Replayed": "true"}


def ok(body: Any = None) -> Reply:
    return 200, body if body is not None else {"ok": True}, {}


class FakeIdemgate:
    """Answers each path from a script (a list consumed in order, or a function of the request)."""

    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self.routes: dict[str, Callable[[Seen], Reply]] = {}
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                seen = Seen(self.path, {k.lower(): v for k, v in self.headers.items()}, json.loads(raw or b"null"))
                with fake.lock:
                    fake.seen.append(seen)
                reply = fake.answer(seen)
                status, body, headers = reply
                if status is None:
                    self.close_connection = True
                    self.connection.close()
                    return
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", headers.pop("Content-Type", "application/json"))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def on(self, suffix: str, replies: list[Reply] | Callable[[Seen], Reply]) -> None:
        """Answers requests whose path ends with ``suffix``; a list is consumed in order, its last reply repeated."""
        if callable(replies):
            self.routes[suffix] = replies
            return
        queue = list(replies)

        def next_reply(_: Seen) -> Reply:
            reply = queue.pop(0) if len(queue) > 1 else queue[0]
            return reply[0], reply[1], dict(reply[2])

        self.routes[suffix] = next_reply

    def answer(self, seen: Seen) -> Reply:
        for suffix, route in self.routes.items():
            if seen.path.endswith(suffix):
                return route(seen)
        return 404, {"type": "/problems/not_found", "title": "Not found", "status": 404}, {"Content-Type": "application/problem+json"}

    def paths(self) -> list[str]:
        with self.lock:
            return [s.path.rsplit("/", 1)[-1] for s in self.seen]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
