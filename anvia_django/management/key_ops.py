"""``anvia_memory erase`` and ``rotate-keys``: encryption at rest's commands."""

from __future__ import annotations

from collections.abc import Callable

from django.core.management import CommandError
from django.core.management.base import OutputWrapper

from anvia_django.encryption import encryption_enabled
from anvia_django.persistence import (
    ConversationFilter,
    count_conversations,
    erase_user_conversations,
)
from anvia_django.persistence.databases import write_alias

Confirm = Callable[[str], bool]


def erase_user(out: OutputWrapper, *, user_id: str, interactive: bool, confirm: Confirm) -> None:
    """Destroy the user's data key, then delete their conversations.

    The key goes first: should the deletion of the rows fail, they (and
    every copy of them, backups included) no longer decrypt, and running
    the command again deletes them.
    """
    planned = count_conversations(ConversationFilter(user_id=user_id))
    if interactive and not confirm(
        f"Erase user {user_id!r}: destroy their data key and delete "
        f"{planned.conversations} conversation(s) ({planned.messages} message(s))?"
    ):
        raise CommandError("Cancelled; nothing was deleted.")
    keys = 0
    if encryption_enabled():
        from anvia_django.encryption.keys import destroy_data_key, owner_of

        keys = destroy_data_key(write_alias(None), owner_of(user_id, ""))
    counts = erase_user_conversations(user_id)
    out.write(
        f"Erased user {user_id!r}: {counts.conversations} conversation(s), "
        f"{counts.messages} message(s), {counts.failed_runs} failed run(s); "
        f"{keys} data key(s) destroyed."
    )


def rotate_keys(out: OutputWrapper, *, batch_size: int) -> None:
    """Re-wrap every data key under the current master key."""
    if not encryption_enabled():
        raise CommandError("ANVIA_DJANGO['ENCRYPTION'] is not set: there are no keys to rotate.")
    from anvia_django.encryption.keys import keyring, rotate_data_keys

    rotated = rotate_data_keys(write_alias(None), batch_size=batch_size)
    out.write(f"Re-wrapped {rotated} data key(s) under master key {keyring().current!r}.")
