"""What the ADK queries raise; the integration turns them into ADK's errors."""

from __future__ import annotations


class SessionAlreadyExists(Exception):
    """``create_session`` with the id of a stored session."""


class SessionNotStored(LookupError):
    """An append to a session that is not stored (never created, or deleted)."""


class SessionSuperseded(Exception):
    """An append from a session that another append has moved past since it
    was read: checked under the conversation's row lock, in the transaction
    that would have written the event, so nothing of it is written."""
