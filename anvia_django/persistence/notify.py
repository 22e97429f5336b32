"""Sending this app's signals once a write has committed."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.dispatch import Signal

from anvia_django.models import Conversation


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
