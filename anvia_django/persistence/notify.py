"""Sending this app's signals once a write has committed."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.dispatch import Signal

from anvia_django.models import Conversation

logger = logging.getLogger(__name__)


def send_after_commit(signal: Signal, *, using: str, **kwargs: Any) -> None:
    """Send ``signal`` (``sender=Conversation``) after the transaction commits.

    Robust: a receiver that raises is logged by Django and never turns a
    write that has already committed into an error for the caller (who
    would then retry and duplicate it).
    """

    # A function, not a partial: Django names the callback when logging its failure.
    def send() -> None:
        signal.send(sender=Conversation, using=using, **kwargs)

    transaction.on_commit(send, using=using, robust=True)


async def send_committed(signal: Signal, *, using: str, **kwargs: Any) -> None:
    """Send ``signal`` for a write that has already committed, from async code.

    As robust as :func:`send_after_commit`: a receiver's error is logged,
    never raised. Sync receivers run on asgiref's sync thread.
    """
    for receiver, outcome in await signal.asend_robust(sender=Conversation, using=using, **kwargs):
        if isinstance(outcome, Exception):
            logger.error(
                "Error calling %s for a committed write (%s).",
                getattr(receiver, "__qualname__", receiver),
                outcome,
                exc_info=outcome,
            )
