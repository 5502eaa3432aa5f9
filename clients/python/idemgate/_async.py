"""The async shell of the flows (``_flow``), and AsyncIdemgate.

Effects are performed with awaits: requests through httpx's AsyncClient when httpx is installed
(``idemgate[httpx]``), else through the standard-library transport in threads; the guarded function is
awaited once after the reservation, with heartbeats as an asyncio task. A cancelled caller is an outcome
like any other: before the function started, a reservation granted meanwhile is released as not run;
during the function, the key is held as unknown and the cancellation re-raised; while a completion is
being sent, it is delivered anyway in the background.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from types import TracebackType
from typing import Any, Callable, Coroutine, Dict, List, Mapping, Optional, Type, TypeVar, Union, cast, overload

from ._ask import ask_probe_async
from ._context import consumed
from ._core import ClientShell, Core, check_guardable, heard
from ._flow import AskProbe, Attempt, Flow, Handoff, Raised, Ran, RunFunction, Sleep, guard_flow, invoke_flow, list_tools_flow
from ._http import AsyncTransport, Outcome, RetryPolicy, ThreadTransport, httpx_transport
from ._probe import HeldCall, Probe
from ._resolver import AsyncResolver, resolver_options
from .errors import NETWORK_PROBLEM_TYPE, IdemgateError

T = TypeVar("T")


async def run_async(core: Core, transport: AsyncTransport, flow: Flow, fn: Optional[Callable[[Mapping[str, Any]], Any]] = None, args: Optional[Mapping[str, Any]] = None) -> Any:
    """Performs a flow's effects with awaits."""
    value: Any = None
    while True:
        try:
            effect = flow.send(value)
        except StopIteration as stop:
            return stop.value
        if isinstance(effect, Attempt):
            value = await _attempt(core, transport, effect)
        elif isinstance(effect, Sleep):
            try:
                await asyncio.sleep(effect.seconds)
            except asyncio.CancelledError:
                if effect.settlement is not None:
                    core.outbox.put(effect.settlement)
                raise
            value = None
        elif isinstance(effect, Handoff):
            core.outbox.put(effect.delivery)
            value = None
        elif isinstance(effect, RunFunction):
            assert fn is not None and args is not None
            value = await _run_function(transport, effect, fn, args)
        elif isinstance(effect, AskProbe):
            value = await ask_probe_async(effect)
        else:  # pragma: no cover - every effect is handled above
            raise AssertionError(f"unknown effect {effect!r}")


async def _attempt(core: Core, transport: AsyncTransport, effect: Attempt) -> Outcome:
    if effect.on_cancel is None:
        return await transport.send_once(effect.request)
    # the request goes on when its caller is cancelled: what it was answered decides what is left to do
    task = asyncio.ensure_future(transport.send_once(effect.request))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        on_cancel = effect.on_cancel

        def settle_late(done: asyncio.Future[Outcome]) -> None:
            # the request itself cancelled too (the event loop shutting down cancels every task) or
            # failed: no answer, which leaves a completion or release to the background all the same
            outcome: Outcome = no_answer(done) if done.cancelled() or done.exception() is not None else done.result()
            delivery = on_cancel(outcome)
            if delivery is not None:
                core.outbox.put(delivery)

        task.add_done_callback(settle_late)
        raise


def no_answer(done: asyncio.Future[Outcome]) -> Outcome:
    reason = "the request was cancelled" if done.cancelled() else f"{type(done.exception()).__name__}: {done.exception()}"
    return IdemgateError({"type": NETWORK_PROBLEM_TYPE, "title": "No answer", "status": 0, "detail": reason})


async def _run_function(transport: AsyncTransport, effect: RunFunction, fn: Callable[[Mapping[str, Any]], Any], args: Mapping[str, Any]) -> Union[Ran, Raised]:
    stopped = asyncio.Event()
    beat = asyncio.ensure_future(_heartbeat(transport, effect, stopped))
    try:
        # in this task (and the thread, which copies this task's context): set and reset here
        with consumed():
            if inspect.iscoroutinefunction(fn):
                result = await fn(args)
            else:
                # a sync function must not block the event loop (nor this call's heartbeats)
                result = await asyncio.to_thread(fn, args)
                if inspect.isawaitable(result):
                    result = await result
        return Ran(result)
    except BaseException as exc:  # every way out of the function settles the key
        return Raised(exc)
    finally:
        # stopped first: an answer to a heartbeat in flight is ignored from now on
        stopped.set()
        beat.cancel()


async def _heartbeat(transport: AsyncTransport, effect: RunFunction, stopped: asyncio.Event) -> None:
    try:
        while True:
            await asyncio.sleep(effect.interval)
            outcome = await transport.send_once(effect.heartbeat)
            if heard(effect.execution_id, outcome, stopped.is_set()) in ("ignore", "stale"):
                return
    except asyncio.CancelledError:
        return


class AsyncIdemgate(ClientShell[AsyncResolver]):
    """The async twin of :class:`Idemgate`: the same options, the same methods as coroutines.

    ``await client.guard(tool, args, fn, key=...)`` runs ``fn`` (``async def`` or sync, a sync one in a
    thread) at most once per key; ``await client.invoke(...)``, ``await client.list_tools()``,
    ``await client.aclose()``; ``async with AsyncIdemgate(...) as client``. Requests go through httpx
    when it is installed (``use_httpx=None``, the default), else through the standard library in threads.
    """

    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout: float = 30.0,
        wait_seconds: int = 10,
        session: Optional[str] = None,
        retry: Optional[RetryPolicy] = None,
        replay_cache: Union[bool, int] = True,
        flush_timeout: float = 10.0,
        probe_timeout: float = 10.0,
        use_httpx: Optional[bool] = None,
    ) -> None:
        self._core = Core(
            url,
            token,
            timeout=timeout,
            wait_seconds=wait_seconds,
            session=session,
            retry=retry,
            replay_cache=replay_cache,
            flush_timeout=flush_timeout,
            sleep=time.sleep,
            probe_timeout=probe_timeout,
        )
        transport = httpx_transport(self._core.transport) if use_httpx is not False else None
        if use_httpx and transport is None:
            raise ImportError("AsyncIdemgate(use_httpx=True) needs httpx: pip install 'idemgate[httpx]'")
        self._transport: AsyncTransport = transport if transport is not None else ThreadTransport(self._core.transport)
        self._resolvers: List[AsyncResolver] = []

    @overload
    async def guard(
        self,
        tool: str,
        args: Mapping[str, Any],
        fn: Callable[[Mapping[str, Any]], Coroutine[Any, Any, T]],
        *,
        key: Optional[str] = None,
        session: Optional[str] = None,
        key_source: Optional[str] = None,
        probe: Optional[Probe] = None,
    ) -> T: ...

    @overload
    async def guard(
        self,
        tool: str,
        args: Mapping[str, Any],
        fn: Callable[[Mapping[str, Any]], T],
        *,
        key: Optional[str] = None,
        session: Optional[str] = None,
        key_source: Optional[str] = None,
        probe: Optional[Probe] = None,
    ) -> T: ...

    async def guard(
        self,
        tool: str,
        args: Mapping[str, Any],
        fn: Callable[[Mapping[str, Any]], Any],
        *,
        key: Optional[str] = None,
        session: Optional[str] = None,
        key_source: Optional[str] = None,
        probe: Optional[Probe] = None,
    ) -> Any:
        """:meth:`Idemgate.guard`, awaited: ``fn`` runs once after the reservation (awaited if it is async);
        ``probe`` (sync or async) is asked once before an unknown outcome is reported."""
        check_guardable(fn, "guard")
        key, session = self._core.guard_key(key, session, "guard")
        flow = guard_flow(tool, args, key, session, key_source, self._core.settings, self._core.memory, probe)
        return await run_async(self._core, self._transport, flow, fn, args)

    async def invoke(
        self,
        tool: str,
        args: Optional[Mapping[str, Any]] = None,
        *,
        key: Optional[str] = None,
        session: Optional[str] = None,
        key_source: Optional[str] = None,
    ) -> Any:
        """:meth:`Idemgate.invoke`, awaited."""
        chosen = self._core.invoke_key(tool, key)
        return await run_async(self._core, self._transport, invoke_flow(tool, args or {}, chosen, self._core.session_for(session), key_source, self._core.settings))

    async def list_tools(self) -> List[Dict[str, Any]]:
        """:meth:`Idemgate.list_tools`, awaited."""
        return self._core.learn_kinds(cast(List[Dict[str, Any]], await run_async(self._core, self._transport, list_tools_flow(self._core.settings))))

    def start_resolver(
        self,
        probes: Mapping[str, Probe],
        *,
        interval: float = 5.0,
        claim_seconds: float = 30.0,
        probe_timeout: Optional[float] = None,
        holder: Optional[str] = None,
        on_decision: Optional[Callable[[HeldCall, str, str], None]] = None,
    ) -> AsyncResolver:
        """:meth:`Idemgate.start_resolver` as a task of the running event loop (call it from async
        code); probes may be ``async def`` (awaited) or sync (run in a thread). ``await
        resolver.stop()`` (or ``aclose()``, or ``async with``) ends it after the probe in progress;
        ``aclose()`` of the client stops it too."""
        options = resolver_options(probes, interval=interval, claim_seconds=claim_seconds, probe_timeout=probe_timeout, holder=holder, settings=self._core.settings, on_decision=on_decision)
        resolver = AsyncResolver(self._core, self._transport, options, on_stop=self._forget)
        self._resolvers.append(resolver)
        return resolver

    async def flush(self, timeout: Optional[float] = None) -> bool:
        """Waits (at most ``timeout``) for background deliveries and replay reports."""
        reported = await asyncio.to_thread(self._core.reporter.flush, timeout if timeout is not None else 5.0)
        return await asyncio.to_thread(self._core.outbox.flush, timeout) and reported

    async def aclose(self, timeout: Optional[float] = None) -> bool:
        """Stops the resolvers started here, delivers what is pending (bounded, logged), stops the
        background work and closes connections."""
        for resolver in list(self._resolvers):
            await resolver.stop(timeout if timeout is not None else self._core.outbox.flush_timeout)
        try:
            return await asyncio.to_thread(self._core.close, timeout)
        finally:
            await self._transport.aclose()

    async def __aenter__(self) -> AsyncIdemgate:
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        await self.aclose()

    def _async_transport(self) -> AsyncTransport:
        return self._transport
