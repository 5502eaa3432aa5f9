"""Idemgate's Python client: guard a function where it runs, so each action happens once.

>>> from idemgate import Idemgate, idempotent
>>> client = Idemgate("http://127.0.0.1:3000", "idg_...")
>>> @idempotent(client, tool="payments.charge", key=lambda order_id, **_: f"order-{order_id}-charge")
... def charge(order_id: str, amount_cents: int) -> dict: ...
"""

from ._http import RetryPolicy
from .client import Idemgate, idempotent
from .errors import FinalError, IdemgateError, NotAppliedError, OutcomeUnknownError

__all__ = ["FinalError", "Idemgate", "IdemgateError", "NotAppliedError", "OutcomeUnknownError", "RetryPolicy", "idempotent"]
__version__ = "0.1.0"
