"""Encryption at rest of message content, opt-in with ``ANVIA_DJANGO["ENCRYPTION"]``.

Every encryption branch of the store hangs off :func:`encryption_enabled`:
without the setting nothing here runs (not even the import of
``cryptography``, which is an optional extra: ``anvia-django[encryption]``).
"""

from __future__ import annotations

from anvia_django.conf import app_settings


def encryption_enabled() -> bool:
    """Whether ``ANVIA_DJANGO["ENCRYPTION"]`` is set."""
    return app_settings.ENCRYPTION is not None


__all__ = ["encryption_enabled"]
