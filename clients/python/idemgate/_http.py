"""HTTP for the client: one request at a time, over urllib (sync) or httpx / a thread (async).

What an answer *means* is decided elsewhere (``_flow``); this module only moves bytes and reads an
answer's status, headers and JSON body. A failure to get any answer (refused, reset, timed out) is an
:class:`IdemgateError` with ``status`` 0, returned rather than raised so the retry rules see it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import email.utils
import http.client
import json
import random
import socket
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Mapping, Optional, Union

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


@dataclass(frozen=True)
class Request:
    """One HTTP request to Idemgate; ``path`` is relative to the client's URL, ``body`` JSON text."""

    method: str
    path: str
    body: Optional[str]
    headers: Mapping[str, str]
    timeout: float


@dataclass
class Answer:
    status: int
    headers: Mapping[str, str]
    body: Any
    #: the problem+json body, when the answer is one
    problem: Optional[Dict[str, Any]] = None
    attempts: int = 1
    extra: Dict[str, Any] = field(default_factory=dict)

    def header(self, name: str) -> Optional[str]:
        return self.headers.get(name.lower())


#: what one attempt gives: an answer, or the failure to get one
Outcome = Union[Answer, IdemgateError]


def retry_after_seconds(value: Optional[str]) -> Optional[float]:
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


def read_answer(status: int, headers: Mapping[str, str], raw: bytes) -> Answer:
    """An answer from its status, lower-cased headers and body bytes (JSON parsed when it says JSON)."""
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


def timeout_error(url: str, seconds: float) -> IdemgateError:
    return IdemgateError({"type": TIMEOUT_PROBLEM_TYPE, "title": "Timed out", "status": 0, "detail": f"no answer from {url} within {seconds} s"})


def network_error(url: str, reason: object) -> IdemgateError:
    return IdemgateError({"type": NETWORK_PROBLEM_TYPE, "title": "Network error", "status": 0, "detail": f"{url}: {reason}"})


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Idemgate's API never redirects: a 3xx is the answer (the call fails closed), and the bearer
    token is never sent on to wherever it points (urllib would, to another host too)."""

    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> None:
        return None


class Transport:
    """Sends one request at a time to one Idemgate server with urllib (standard library only)."""

    def __init__(self, url: str, token: str) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self._opener = urllib.request.build_opener(_NoRedirects())

    def headers(self, request: Request) -> Dict[str, str]:
        headers = {"Accept": "application/json, application/problem+json", "Authorization": f"Bearer {self.token}"}
        if request.body is not None:
            headers["Content-Type"] = "application/json"
        headers.update(request.headers)
        return headers

    def send_once(self, request: Request) -> Outcome:
        data = request.body.encode("utf-8") if request.body is not None else None
        req = urllib.request.Request(self.url + request.path, data=data, method=request.method, headers=self.headers(request))
        try:
            with self._opener.open(req, timeout=request.timeout) as response:
                return read_answer(response.status, {k.lower(): v for k, v in response.headers.items()}, response.read())
        except urllib.error.HTTPError as err:
            with err:
                return read_answer(err.code, {k.lower(): v for k, v in err.headers.items()}, err.read())
        except (socket.timeout, TimeoutError):
            return timeout_error(self.url, request.timeout)
        except (urllib.error.URLError, http.client.HTTPException, ConnectionError, OSError) as err:
            reason = getattr(err, "reason", err)
            if isinstance(reason, (socket.timeout, TimeoutError)):
                return timeout_error(self.url, request.timeout)
            return network_error(self.url, reason)


class AsyncTransport:
    """The async form: ``await send_once(request)``. ``aclose`` releases its connections."""

    async def send_once(self, request: Request) -> Outcome:
        raise NotImplementedError

    async def aclose(self) -> None:
        return None


class ThreadTransport(AsyncTransport):
    """The standard-library transport in threads of its own (not the event loop's default pool, which a
    few requests held by ``Prefer: wait`` would fill while the call they wait for needs a thread too)."""

    def __init__(self, transport: Transport, max_workers: int = 64) -> None:
        self.transport = transport
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="idemgate-http")

    async def send_once(self, request: Request) -> Outcome:
        return await asyncio.get_running_loop().run_in_executor(self._pool, self.transport.send_once, request)

    async def aclose(self) -> None:
        self.shutdown()

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False)


def httpx_transport(transport: Transport) -> Optional[AsyncTransport]:
    """An httpx.AsyncClient transport when httpx is installed (``idemgate[httpx]``), else None."""
    try:
        import httpx
    except ImportError:
        return None

    class HttpxTransport(AsyncTransport):
        def __init__(self) -> None:
            self._client: Optional[httpx.AsyncClient] = None
            self._loop: Optional[asyncio.AbstractEventLoop] = None

        def _for_loop(self) -> httpx.AsyncClient:
            loop = asyncio.get_running_loop()
            # a client's connections belong to the loop that opened them
            if self._client is None or self._loop is not loop:
                self._client = httpx.AsyncClient(limits=httpx.Limits(max_connections=100, max_keepalive_connections=20))
                self._loop = loop
            return self._client

        async def send_once(self, request: Request) -> Outcome:
            client = self._for_loop()
            try:
                response = await client.request(
                    request.method,
                    transport.url + request.path,
                    content=request.body.encode("utf-8") if request.body is not None else None,
                    headers=transport.headers(request),
                    timeout=request.timeout,
                )
            except httpx.TimeoutException:
                return timeout_error(transport.url, request.timeout)
            except (httpx.HTTPError, OSError) as err:
                # a transport failure, or an answer that cannot be read (a proxy's broken encoding): no answer
                return network_error(transport.url, err)
            return read_answer(response.status_code, {k.lower(): v for k, v in response.headers.items()}, response.content)

        async def aclose(self) -> None:
            if self._client is not None and self._loop is asyncio.get_running_loop():
                await self._client.aclose()
            self._client = None

    return HttpxTransport()
