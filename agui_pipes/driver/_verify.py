"""The one place the producer-side ordering verifier plugs into the driver.

Every post-transform event goes through the ``Observe`` function built here;
a rejection becomes ``RunError`` with code PROTOCOL_VIOLATION carrying the
verifier's ``VerificationError`` (its ``rule``, ``event`` and ``detail``).
"""

from __future__ import annotations

from ag_ui.core import BaseEvent

from ._errors import RunError
from ._pipeline import Observe

__all__ = ["producer_observer"]


def producer_observer() -> Observe:
    """A fresh producer-profile verifier (one per run), as an ``Observe`` callable."""
    from ..verify import VerificationError, Verifier

    check = Verifier(profile="producer").observe

    def observe(event: BaseEvent) -> None:
        try:
            check(event)
        except VerificationError as failure:
            raise RunError.violation(str(failure), verification=failure) from None

    return observe
