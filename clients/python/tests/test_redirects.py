"""Idemgate's API never redirects: a redirect (a misconfigured proxy, an open redirect) is not followed,
so the bearer token never goes to another host, and the function does not run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_server import FakeIdemgate, reserved

from idemgate import AsyncIdemgate, Idemgate, IdemgateError, RetryPolicy


@pytest.fixture
def servers() -> Iterator[tuple[FakeIdemgate, FakeIdemgate]]:
    gateway, elsewhere = FakeIdemgate(), FakeIdemgate()
    elsewhere.on("/reservations", [reserved("exec-elsewhere")])
    elsewhere.on("/tools", [(200, {"tools": []}, {})])
    for path in ("/reservations", "/tools"):
        gateway.on(path, [(302, {}, {"Location": f"{elsewhere.url}/api/v1/tools/t{path}"})])
    yield gateway, elsewhere
    gateway.close()
    elsewhere.close()


def test_a_redirect_is_not_followed_with_the_token(servers: tuple[FakeIdemgate, FakeIdemgate]) -> None:
    gateway, elsewhere = servers
    ran: list[int] = []
    with Idemgate(gateway.url, "idg_secret", timeout=5, retry=RetryPolicy(max_attempts=1)) as client:
        with pytest.raises(IdemgateError):
            client.guard("t", {}, lambda _: ran.append(1), key="k")
        with pytest.raises(IdemgateError):
            client.list_tools()
    assert ran == []
    assert elsewhere.seen == []


async def test_nor_by_the_async_client(servers: tuple[FakeIdemgate, FakeIdemgate]) -> None:
    gateway, elsewhere = servers
    for use_httpx in (True, False):
        async with AsyncIdemgate(gateway.url, "idg_secret", timeout=5, retry=RetryPolicy(max_attempts=1), use_httpx=use_httpx) as client:
            with pytest.raises(IdemgateError):
                await client.list_tools()
    assert elsewhere.seen == []
