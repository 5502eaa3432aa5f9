"""A scripted chat-completions server on 127.0.0.1 standing in for a model, for the OpenAI SDK agent loop.

Prints its port on the first line of stdout, then serves ``POST /v1/chat/completions`` (no streaming)
and ``GET /stats``. What the model answers depends only on the conversation it is sent (how many
tool results it holds), so a request the SDK sends again gets the answer the first one would have:

- no tool result yet: a call of ``record_entry`` for account A;
- one: the same call again, with a new tool-call id (a model re-emitting a call it already made);
- two: a call for account B (a second action); the first request at this point is never answered
  (held until the next request arrives, then its connection is closed), so the SDK's request
  timeout fires and the SDK sends it again;
- three or more: a final answer.

``/stats`` answers the number of requests, of those held unanswered, and the tool-call ids minted.
"""

from __future__ import annotations

import json
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

lock = threading.Lock()
stats: dict[str, Any] = {"requests": 0, "held": 0, "toolCallIds": []}
arrived = threading.Condition(lock)
held_once = {"done": False}

CALL_A = {"account": "acct-A", "amount_cents": 1000, "currency": "EUR"}
CALL_B = {"account": "acct-B", "amount_cents": 2500, "currency": "EUR"}


def completion(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": 0,
        "model": "fake-model",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def tool_call(args: dict[str, Any]) -> dict[str, Any]:
    call_id = f"call_{uuid.uuid4().hex[:12]}"
    stats["toolCallIds"].append(call_id)
    return {"role": "assistant", "content": None, "tool_calls": [{"id": call_id, "type": "function", "function": {"name": "record_entry", "arguments": json.dumps(args)}}]}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *_: Any) -> None:
        pass

    def answer(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        with lock:
            self.answer(200, stats)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))) or b"{}")
        results = sum(1 for m in body.get("messages", []) if m.get("role") == "tool")
        with lock:
            stats["requests"] += 1
            arrived.notify_all()
            if results == 2 and not held_once["done"]:
                # this answer never comes: hold the request until the SDK has sent it again
                held_once["done"] = True
                stats["held"] += 1
                seen = stats["requests"]
                arrived.wait_for(lambda: stats["requests"] > seen, timeout=120)
                self.close_connection = True
                return
            if results == 0 or results == 1:
                message = tool_call(CALL_A)
            elif results == 2:
                message = tool_call(CALL_B)
            else:
                message = {"role": "assistant", "content": "Booked both entries."}
        self.answer(200, completion(message))


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
