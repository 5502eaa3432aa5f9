"""Guard a function where it runs, with Idemgate as its key store, result store and audit log."""

from __future__ import annotations

import functools
import inspect
import logging
import time
from types import TracebackType
from typing import Any, Awaitable, Callable, Dict, List, Mapping, Optional, Type, TypeVar, Union, cast

from ._async import AsyncIdemgate, run_async
from ._core import ClientShell, Core, check_guardable, run_sync
from ._flow import guard_flow, invoke_flow, list_tools_flow
from ._http import AsyncTransport, RetryPolicy, ThreadTransport
from ._keys import check_key
from ._probe import HeldCall, Probe
from ._resolver import Resolver, resolver_options

log = logging.getLogger("idemgate")

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


class Idemgate(ClientShell[Resolver]):
    """A client for Idemgate (sync; :class:`AsyncIdemgate` is its async twin, with the same options).

    ``url`` is where Idemgate is served (``http://127.0.0.1:3000``), ``token`` an API token (``idg_…``),
    which decides the scope keys live in. Every HTTP request has a ``timeout`` (seconds); requests that
    a retry can get past (no answer, a timeout, the problem types the server's table marks retried —
    conflict, unavailable, internal, tool_failed — and a proxy's 5xx) are sent again with the same key,
    up to ``retry.max_attempts`` requests per API call. ``wait_seconds`` is sent as ``Prefer: wait=N``
    with each keyed call: a duplicate is held until the first call ends and gets its result.
    ``session`` is the default ``Idemgate-Session``. ``replay_cache`` (default on, 1,000 entries; an int
    sets the size, False turns it off) answers a call this process has seen done from memory until the
    key's TTL ends, less a margin; each such replay is still reported to the audit log, in batches.
    ``flush_timeout`` bounds how long ``close()`` (and a normal exit) waits for completions that could
    not be delivered at once and are being retried in the background. ``probe_timeout`` (seconds) is how
    long a probe (``guard(probe=...)``, :meth:`start_resolver`) may take before its call counts as
    still unknown.
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
        sleep: Callable[[float], None] = time.sleep,
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
            sleep=sleep,
            probe_timeout=probe_timeout,
        )
        self._threads: Optional[ThreadTransport] = None
        self._resolvers: List[Resolver] = []

    @property
    def wait_seconds(self) -> int:
        return self._core.settings.wait_seconds

    def guard(
        self,
        tool: str,
        args: Mapping[str, Any],
        fn: Callable[[Mapping[str, Any]], T],
        *,
        key: Optional[str] = None,
        session: Optional[str] = None,
        key_source: Optional[str] = None,
        probe: Optional[Probe] = None,
    ) -> T:
        """Run ``fn(args)`` at most once for ``key``, and return its result, or the stored one.

        ``key`` is the Idempotency-Key naming this logical action (the same on every retry); None takes
        it from the action context (``with idemgate.action(key=...)``), and without one there this
        raises TypeError before anything is reserved.

        1. Reserves ``key`` for ``tool`` with ``args`` (validated and fingerprinted by Idemgate). A
           stored result is returned without running ``fn`` (a stored final error is raised as
           :class:`FinalError` with ``replayed`` True); so is a result this process has seen done
           (the replay cache), without a request.
        2. Only after the reservation (HTTP 201) runs ``fn(args)``, heartbeating at a third of the
           lease (``leaseMs``) meanwhile. Any other answer leaves ``fn`` unrun and is raised (the
           problem type's class from ``idemgate._problems``; a proxy's HTML page as IdemgateError).
        3. ``fn`` returned: its result (JSON-serialisable) is stored and returned. ``fn`` raised
           :class:`FinalError` (or an exception with a 4xx ``status``): stored, then re-raised.
           :class:`NotAppliedError` (or 408/425/429): the key is released, the error re-raised, and a
           retry runs ``fn`` again. Anything else (a result that is not JSON included): the key is held
           as unknown and :class:`OutcomeUnknownError` is raised from the exception; ``fn`` never runs
           again with this key until a probe or an operator decides.
        4. With ``probe`` (a function of a :class:`HeldCall`, sync or async), an exception that would
           leave the outcome unknown is first put to the probe, once, at once (a payment SDK that timed
           out: ask the provider whether the charge exists). :class:`Applied` stores its result, which
           is returned (a 4xx ``status`` is raised as :class:`FinalError`); :class:`NotApplied` releases
           the key and raises the function's exception again (a retry runs ``fn``); None,
           an exception or no answer within ``probe_timeout`` holds the key as unknown, as without it.

        A result that cannot be stored at once (Idemgate restarting) is still returned; the completion
        is retried in the background with the same token, and logged.
        """
        check_guardable(fn, "guard")
        if inspect.iscoroutinefunction(fn):
            raise TypeError("guard: fn is an async function: await it through AsyncIdemgate.guard or @idempotent (a sync guard cannot await it)")
        key, session = self._core.guard_key(key, session, "guard")
        return cast(T, run_sync(self._core, guard_flow(tool, args, key, session, key_source, self._core.settings, self._core.memory, probe), fn, args))

    def invoke(
        self,
        tool: str,
        args: Optional[Mapping[str, Any]] = None,
        *,
        key: Optional[str] = None,
        session: Optional[str] = None,
        key_source: Optional[str] = None,
    ) -> Any:
        """Call a tool Idemgate runs (upstream, built-in, guarded MCP tools): ``POST /api/v1/tools/{tool}/invoke``.

        Returns the tool's answer (fresh or replayed). A final 4xx answer of the tool (a declined card)
        is raised as :class:`FinalError`; Idemgate's own problems as their classes
        (:class:`OutcomeUnknownError` when the action may have happened: never retry that with a new
        key). ``key`` None takes the action context's key, else one random key for this call (reused by
        its retries; none for tools :meth:`list_tools` reported as reads).
        """
        chosen = self._core.invoke_key(tool, key)
        return run_sync(self._core, invoke_flow(tool, args or {}, chosen, self._core.session_for(session), key_source, self._core.settings))

    def list_tools(self) -> List[Dict[str, Any]]:
        """``GET /api/v1/tools``: the tools, as Idemgate describes them (``source`` says where each runs;
        ``paused``, while an operator has paused a write tool, says why and since when: its new calls
        raise :class:`ToolPausedError` until it is resumed)."""
        return self._core.learn_kinds(cast(List[Dict[str, Any]], run_sync(self._core, list_tools_flow(self._core.settings))))

    def start_resolver(
        self,
        probes: Mapping[str, Probe],
        *,
        interval: float = 5.0,
        claim_seconds: float = 30.0,
        probe_timeout: Optional[float] = None,
        holder: Optional[str] = None,
        on_decision: Optional[Callable[[HeldCall, str, str], None]] = None,
    ) -> Resolver:
        """Starts resolving held calls of client-run tools with their probes, in a background thread.

        ``probes`` maps each tool name to its probe: a function (sync or ``async def``) of a
        :class:`HeldCall` that asks the service whether the call happened, and answers
        :class:`Applied` (``Applied(result)`` or ``{"applied": True, "result": ...}``: the key becomes
        done with that result and retries replay it), :class:`NotApplied` (``{"applied": False}``: the
        key is released; the next retry runs the function) or None (still unknown: asked again later,
        with Idemgate's backoff). A probe that raises or takes longer than ``probe_timeout`` (default:
        the client's) is still unknown.

        The resolver lists the tools' held calls (unknown and stuck), claims one at a time (a lease of
        ``claim_seconds`` kept by Idemgate, so resolvers in several processes never probe one call at
        once), asks its probe and answers; then sleeps ``interval`` seconds (sooner when there was
        work). ``holder`` labels this process in the audit log (default ``host:pid``);
        ``on_decision(call, said, decision)`` is told of every answer Idemgate took (``said``: applied,
        not_applied or unknown; ``decision``: resolved, released, none or late). Returns a
        :class:`Resolver`: ``stop()`` ends it after the probe in progress; ``close()`` stops it too.
        """
        options = resolver_options(probes, interval=interval, claim_seconds=claim_seconds, probe_timeout=probe_timeout, holder=holder, settings=self._core.settings, on_decision=on_decision)
        resolver = Resolver(self._core, options, on_stop=self._forget)
        self._resolvers.append(resolver)
        return resolver

    def flush(self, timeout: Optional[float] = None) -> bool:
        """Waits (at most ``timeout``, default ``flush_timeout``) for background deliveries and replay reports."""
        reported = self._core.reporter.flush(timeout if timeout is not None else 5.0)
        return self._core.outbox.flush(timeout) and reported

    def close(self, timeout: Optional[float] = None) -> bool:
        """Stops the resolvers started here, delivers what is pending (bounded, logged) and stops the
        background work; True when all landed."""
        for resolver in list(self._resolvers):
            resolver.stop(timeout if timeout is not None else self._core.outbox.flush_timeout)
        try:
            return self._core.close(timeout)
        finally:
            if self._threads is not None:
                self._threads.shutdown()
                self._threads = None

    def __enter__(self) -> Idemgate:
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        self.close()

    def _async_transport(self) -> AsyncTransport:
        # an async function decorated with a sync client: its HTTP runs in threads
        if self._threads is None:
            self._threads = ThreadTransport(self._core.transport)
        return self._threads


def _bind(fn: Callable[..., Any]) -> Callable[..., Dict[str, Any]]:
    signature = inspect.signature(fn)

    def named(*args: Any, **kwargs: Any) -> Dict[str, Any]:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        out: Dict[str, Any] = {}
        for name, value in bound.arguments.items():
            if signature.parameters[name].kind is inspect.Parameter.VAR_KEYWORD:
                out.update(value)
            elif signature.parameters[name].kind is inspect.Parameter.VAR_POSITIONAL:
                out[name] = list(value)
            else:
                out[name] = value
        return out

    return named


def idempotent(
    client: Union[Idemgate, AsyncIdemgate],
    tool: str,
    key: Optional[Callable[..., str]] = None,
    *,
    session: Optional[str] = None,
    key_source: Optional[str] = None,
    arguments: Optional[Callable[..., Mapping[str, Any]]] = None,
    probe: Optional[Probe] = None,
) -> Callable[[F], F]:
    """Decorate a function so each call runs at most once per key, through the client's guard.

    On a sync function it returns a sync function; on an ``async def`` an ``async def`` that awaits the
    function once after the reservation (heartbeats as an asyncio task). Either works with
    :class:`Idemgate` or :class:`AsyncIdemgate` (a sync client's HTTP runs in threads for an async
    function). Generators and async generators are refused here, with TypeError.

    ``key`` gets the decorated function's arguments, by name
    (``key=lambda order_id, **_: f"order-{order_id}-charge"``) and must return a string: one that
    raises or returns anything else is a TypeError before anything is reserved. Without ``key`` the
    key comes from the action context (``with idemgate.action(key=...)``). The arguments sent to
    Idemgate (and fingerprinted there) are the function's bound arguments, defaults applied, unless
    ``arguments`` (called like ``key``) picks them. ``probe`` is asked once before an unknown outcome
    is reported, as :meth:`Idemgate.guard`'s; it gets those arguments as ``call.arguments``.
    """
    core: Core = client._core
    if probe is not None and not callable(probe):
        raise TypeError(f"@idempotent({tool!r}): probe must be a function of the held call, not {type(probe).__name__}")

    def decorate(fn: F) -> F:
        check_guardable(fn, "@idempotent")
        named_of = _bind(fn)
        parameters = inspect.signature(fn).parameters.values()
        by_name = not any(p.kind in (p.POSITIONAL_ONLY, p.VAR_POSITIONAL) for p in parameters)

        def prepare(args: Any, kwargs: Any) -> tuple[Mapping[str, Any], str, Optional[str]]:
            named = named_of(*args, **kwargs)

            def call(picker: Callable[..., Any]) -> Any:
                return picker(**named) if by_name else picker(*args, **kwargs)

            chosen: Optional[str] = None
            if key is not None:
                try:
                    chosen = call(key)
                except Exception as err:
                    raise TypeError(f"@idempotent({tool!r}): the key function raised {type(err).__name__}: {err}; nothing was reserved") from err
                check_key(chosen, f"@idempotent({tool!r}) key function")
            sent = call(arguments) if arguments else named
            picked_key, picked_session = core.guard_key(chosen, session, f"@idempotent({tool!r})")
            return sent, picked_key, picked_session

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                sent, chosen, picked_session = prepare(args, kwargs)

                async def run(_: Mapping[str, Any]) -> Any:
                    return await cast(Callable[..., Awaitable[Any]], fn)(*args, **kwargs)

                flow = guard_flow(tool, sent, chosen, picked_session, key_source, core.settings, core.memory, probe)
                return await run_async(core, client._async_transport(), flow, run, sent)

            return cast(F, async_wrapper)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            sent, chosen, picked_session = prepare(args, kwargs)
            flow = guard_flow(tool, sent, chosen, picked_session, key_source, core.settings, core.memory, probe)
            return run_sync(core, flow, lambda _: fn(*args, **kwargs), sent)

        return cast(F, wrapper)

    return decorate


__all__ = ["Idemgate", "RetryPolicy", "idempotent"]
