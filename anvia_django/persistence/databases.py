"""Which database alias a call uses."""

from __future__ import annotations

from django.db import router

from anvia_django.models import Conversation


def write_alias(using: str | None) -> str:
    return using or router.db_for_write(Conversation)


def read_alias(using: str | None) -> str:
    return using or router.db_for_read(Conversation)
