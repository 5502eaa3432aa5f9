"""Idemgate's Python client: guard a function where it runs, so each action happens once.

>>> import idemgate
>>> client = idemgate.AsyncIdemgate("http://127.0.0.1:3000", "idg_...")
>>> @idemgate.idempotent(client, tool="ledger.record", key=lambda account, amount_cents, **_: f"{account}-{amount_cents}")
... async def record(account: str, amount_cents: int) -> dict: ...
"""

from ._async import AsyncIdemgate
from ._canonical import action_key, canonical_json
from ._context import Action, action, current_action
from ._core import NotAwaitedError
from ._http import RetryPolicy
from ._probe import Applied, HeldCall, NotApplied
from ._problems import *  # noqa: F403 - the problem types' exception classes, generated
from ._problems import __all__ as _problem_names
from ._resolver import AsyncResolver, Resolver, ResolverStats
from .client import Idemgate, idempotent
from .errors import FinalError, IdemgateError, NotAppliedError, OutcomeUnknownError

__all__ = [
    "Action",
    "Applied",
    "AsyncIdemgate",
    "AsyncResolver",
    "FinalError",
    "HeldCall",
    "Idemgate",
    "IdemgateError",
    "NotApplied",
    "NotAppliedError",
    "NotAwaitedError",
    "OutcomeUnknownError",
    "Resolver",
    "ResolverStats",
    "RetryPolicy",
    "action",
    "action_key",
    "canonical_json",
    "current_action",
    "idempotent",
    *_problem_names,
]
__version__ = "0.2.0"
