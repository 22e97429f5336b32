"""The codec of a database: how its messages, failed runs and summaries are
stored and read, plain or sealed (encryption at rest).

:func:`codec_for` is the one place that decides: every query, the models
and the fields ask it (see :mod:`.base` for what a codec does).
"""

from __future__ import annotations

from anvia_django.encryption import encryption_enabled

from .base import CheckpointSealer, CheckpointValue, Codec, Owner, SearchScope, StatePlace
from .plain import PLAIN


def codec_for(alias: str) -> Codec:
    """The codec of the rows on database ``alias``."""
    if not encryption_enabled():
        return PLAIN
    # Only with the setting: it imports ``cryptography``, an optional extra.
    from .sealed import sealed_codec

    return sealed_codec(alias)


__all__ = [
    "CheckpointSealer",
    "CheckpointValue",
    "Codec",
    "Owner",
    "SearchScope",
    "StatePlace",
    "codec_for",
]
