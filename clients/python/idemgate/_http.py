"""One JSON request to Idemgate over urllib, with a timeout, retried by the caller's rules."""

from __future__ import annotations

import email.utils
import http.client
import json
import random
import socket
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

from .errors import NETWORK_PROBLEM_TYPE, TIMEOUT_PROBLEM_TYPE, IdemgateError


@dataclass(frozen=True)
class RetryPolicy:
    """Requests per API call (the first included), capped exponential backoff with equal jitter."""

    max_attempts: int = 5
    base_delay: float = 0.2
    max_delay: float = 5.0
    #: the longest ``Retry-After`` honoured, in seconds
    max_retry_after: float = 10.0

    def delay(self, attempt: int, retry_after: Optional[float], rand: Callable[[], float] = random.random) -> float:
        # "Retry-After: 0" would make the retries a tight loop that uses them all up at once: back off instead
        if retry_after is not None and retry_after > 0:
            return min(retry_after, self.max_retry_after)
        capped = min(self.max_delay, self.base_delay * 2.0 ** max(0, attempt - 1))
        return capped / 2 + rand() * capped / 2


@dataclass
class Answer:
    status: int
    headers: Mapping[str, str]
    body: Any
    #: the problem+json body, when the answer is one
    problem: Optional[dict[str, Any]] = None
    attempts: int = 1
    extra: dict[str, Any] = field(default_factory=dict)

    def header(self, name: str) -> Optional[str]:
        return self.headers.get(name.lower())


GATEWAY_HEADERS = ("idempotency-key", "idemgate-execution-id", "idempotent-replayed")


def _retry_after(value: Optional[str]) -> Optional[float]:
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, parsed.timestamp() - time.time())


def _read(status: int, headers: Mapping[str, str], raw: bytes) -> Answer:
    text = raw.decode("utf-8", "replace")
    content_type = headers.get("content-type", "").lower()
    body: Any = text if text else None
    if text and "json" in content_type:
        try:
            body = json.loads(text)
        except ValueError:
            body = text
    problem = None
    if content_type.startswith("application/problem+json") and isinstance(body, dict) and isinstance(body.get("type"), str):
        problem = {**body, "status": body.get("status", status) if isinstance(body.get("status"), int) else status}
    return Answer(status, headers, body, problem)


class Transport:
    """Sends requests to one Idemgate server; ``retryable`` decides which answers are sent again."""

    def __init__(self, url: str, token: str, timeout: float, retry: RetryPolicy, sleep: Callable[[float], None] = time.sleep) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.retry = retry
        self.sleep = sleep

    def send_once(self, path: str, body: Any, headers: Mapping[str, str], timeout: Optional[float] = None) -> Answer:
        """One POST; a network failure or timeout raises IdemgateError with ``status`` 0."""
        data = json.dumps(body).encode("utf-8")
        request = urllib.request.Request(self.url + path, data=data, method="POST")
        request.add_header("Content-Type", "application/json")
        request.add_header("Accept", "application/json, application/problem+json")
        request.add_header("Authorization", f"Bearer {self.token}")
        for name, value in headers.items():
            request.add_header(name, value)
        seconds = self.timeout if timeout is None else timeout
        try:
            with urllib.request.urlopen(request, timeout=seconds) as response:
                return _read(response.status, {k.lower(): v for k, v in response.headers.items()}, response.read())
        except urllib.error.HTTPError as err:
            with err:
                return _read(err.code, {k.lower(): v for k, v in err.headers.items()}, err.read())
        except (socket.timeout, TimeoutError) as err:
            raise IdemgateError({"type": TIMEOUT_PROBLEM_TYPE, "title": "Timed out", "status": 0, "detail": f"no answer from {self.url} within {seconds} s"}) from err
        except (urllib.error.URLError, http.client.HTTPException, ConnectionError, OSError) as err:
            reason = getattr(err, "reason", err)
            if isinstance(reason, (socket.timeout, TimeoutError)):
                raise IdemgateError({"type": TIMEOUT_PROBLEM_TYPE, "title": "Timed out", "status": 0, "detail": f"no answer from {self.url} within {seconds} s"}) from err
            raise IdemgateError({"type": NETWORK_PROBLEM_TYPE, "title": "Network error", "status": 0, "detail": f"{self.url}: {reason}"}) from err

    def send(self, path: str, body: Any, headers: Mapping[str, str], retryable: Callable[[Answer], bool], key: Optional[str] = None, timeout: Optional[float] = None) -> Answer:
        """POST, sent again (same headers, same key) on a network failure, a timeout or a retryable answer."""
        attempt = 0
        while True:
            attempt += 1
            last = attempt >= self.retry.max_attempts
            try:
                answer = self.send_once(path, body, headers, timeout)
            except IdemgateError as err:
                if last:
                    err.key, err.attempts = key, attempt
                    raise
                self.sleep(self.retry.delay(attempt, None))
                continue
            answer.attempts = attempt
            if last or not retryable(answer):
                return answer
            self.sleep(self.retry.delay(attempt, _retry_after(answer.header("retry-after"))))


def is_gateway_problem(answer: Answer) -> bool:
    return answer.problem is not None and str(answer.problem["type"]).startswith("/problems/")


def transient(answer: Answer) -> bool:
    """Nothing was decided: Idemgate's store was down, it failed unexpectedly, or a proxy in front of it did."""
    if is_gateway_problem(answer):
        return answer.problem["type"] in ("/problems/unavailable", "/problems/internal")  # type: ignore[index]
    return answer.status >= 500 and not any(answer.header(name) for name in GATEWAY_HEADERS)
