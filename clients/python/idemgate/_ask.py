"""Asking a probe, in each shell: in a thread of its own (sync), or awaited in the event loop (async),
within its timeout. What its answer means is decided in ``_flow`` and ``_resolver``."""

from __future__ import annotations

import asyncio
import inspect
import threading
from typing import Any, Union

from ._flow import AskProbe, Raised, Ran


async def _awaited(value: Any) -> Any:
    return await value


def ask_probe_sync(effect: AskProbe) -> Union[Ran, Raised]:
    """Runs a probe in a thread of its own (an ``async def`` one in an event loop there) and waits at
    most its timeout; a probe that has not answered by then is left running and counts as unknown."""
    answers: list[Union[Ran, Raised]] = []

    def ask() -> None:
        try:
            value = effect.probe(effect.call)
            if inspect.isawaitable(value):
                value = asyncio.run(_awaited(value))
            answers.append(Ran(value))
        except BaseException as exc:  # whatever the probe raised makes the call still unknown
            answers.append(Raised(exc))

    thread = threading.Thread(target=ask, name=f"idemgate-probe-{effect.call.execution_id}", daemon=True)
    try:
        thread.start()
        thread.join(effect.timeout)
    except BaseException as exc:  # interrupted while waiting (Ctrl-C)
        return Raised(exc)
    if not answers:
        return Raised(TimeoutError(f"the probe did not answer within {effect.timeout:g} s"))
    return answers[0]


async def ask_probe_async(effect: AskProbe) -> Union[Ran, Raised]:
    """Awaits an ``async def`` probe (a sync one runs in a thread) for at most its timeout."""
    try:
        if inspect.iscoroutinefunction(effect.probe):
            value = await asyncio.wait_for(effect.probe(effect.call), effect.timeout)
        else:
            value = await asyncio.wait_for(asyncio.to_thread(effect.probe, effect.call), effect.timeout)
            if inspect.isawaitable(value):
                value = await asyncio.wait_for(value, effect.timeout)
        return Ran(value)
    except asyncio.TimeoutError:
        return Raised(TimeoutError(f"the probe did not answer within {effect.timeout:g} s"))
    except BaseException as exc:  # whatever the probe raised makes the call still unknown; a cancellation is passed on by the flow
        return Raised(exc)
