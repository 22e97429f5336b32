"""``anvia_memory erase`` and ``rotate-keys``: encryption at rest's commands."""

from __future__ import annotations

from collections.abc import Callable

from django.core.management import CommandError
from django.core.management.base import OutputWrapper

from anvia_django.persistence import (
    ConversationFilter,
    compact_after_erase,
    count_conversations,
    erase_user_conversations,
    scope_keys_of,
)
from anvia_django.persistence.codec import codec_for
from anvia_django.persistence.databases import write_alias

from . import langgraph_ops
from .progress import Progress
from .tenants import NO_TENANT, TenantChoice, describe, require_one_tenant

Confirm = Callable[[str], bool]


def erase_user(
    out: OutputWrapper,
    *,
    user_id: str,
    interactive: bool,
    confirm: Confirm,
    tenants: TenantChoice = NO_TENANT,
) -> None:
    """Destroy the user's data keys, then delete their conversations (with
    ``tenants.metadata``, those of that tenant only, and that tenant's keys).

    The keys go first: should the deletion of the rows fail, they (and
    every copy of them, backups included) no longer decrypt, and running
    the command again deletes them. Under a tenant scope a user has a key
    per tenant; a key made before that (``user:<id>``) seals their rows of
    every tenant, so erasing one tenant keeps it while the user has
    conversations in another, and says so.
    """
    selection = ConversationFilter(user_id=user_id, metadata=tenants.metadata)
    require_one_tenant(
        selection, tenants, subject=f"User {user_id!r}'s conversations", verb="erase", done="erased"
    )

    graph_subject = f"User {user_id!r}'s LangGraph threads and store items"
    graph = langgraph_ops.plan_for_user(out, user_id, tenants, subject=graph_subject, verb="erase")
    whose = f"user {user_id!r}{describe(tenants)}"
    planned = count_conversations(selection)
    elsewhere = 0
    if tenants.metadata:
        everywhere = count_conversations(ConversationFilter(user_id=user_id))
        elsewhere = everywhere.conversations - planned.conversations
    if interactive:
        also = f", {langgraph_ops.describe(graph.counts())}" if graph else ""
        if not confirm(
            f"Erase {whose}: destroy their data key and delete "
            f"{planned.conversations} conversation(s) ({planned.messages} message(s)){also}?"
        ):
            raise CommandError("Cancelled; nothing was deleted.")
        # Again, as the conversations are read again when deleted: threads
        # the user made while the prompt waited go too.
        graph = langgraph_ops.plan_for_user(
            None, user_id, tenants, subject=graph_subject, verb="erase"
        )
    codec = codec_for(write_alias(None))
    if elsewhere:
        keys = codec.erase_user(user_id, scope_keys=scope_keys_of(selection))
        shared = codec.shares_a_key_across_scopes(user_id)
    else:
        keys, shared = codec.erase_user(user_id), False
    # Each thread and store namespace has a key of its own: theirs go first too.
    graph_keys = codec.erase_checkpoint_keys(graph.thread_ids, graph.namespaces) if graph else 0
    counts = erase_user_conversations(user_id, metadata=tenants.metadata)
    kept = ""
    if shared:
        kept = (
            " Their data key from before keys were per tenant was kept: it also seals rows "
            f"of their {elsewhere} conversation(s) in other tenants, so copies of erased rows "
            "sealed under it (backups) still decrypt with it. `rotate-keys --reencrypt` "
            "moves those rows to per-tenant keys."
        )
    out.write(
        f"Erased {whose}: {counts.conversations} conversation(s), "
        f"{counts.messages} message(s), {counts.failed_runs} failed run(s); "
        f"{keys} data key(s) destroyed.{kept}"
    )
    if graph:
        deleted = langgraph_ops.delete(graph)
        out.write(
            f"Erased {langgraph_ops.describe(deleted)} of {whose}; "
            f"{graph_keys} data key(s) destroyed."
        )
    # After the commit: what the deleted rows left in the live database
    # (their words in the full-text index, dead row versions).
    _left_to_run(out, compact_after_erase(), "of the erased rows")


def rotate_keys(
    out: OutputWrapper, err: OutputWrapper, *, batch_size: int, reencrypt: bool, verbosity: int
) -> None:
    """Re-wrap every data key under the current master key; with
    ``reencrypt``, also replace the keys made under earlier master keys and
    seal every message again (persistence/codec/reencrypt.py)."""
    alias = write_alias(None)
    if not codec_for(alias).opens:
        raise CommandError("ANVIA_DJANGO['ENCRYPTION'] is not set: there are no keys to rotate.")
    from anvia_django.encryption.envelope import DecryptionError
    from anvia_django.encryption.keyring import MissingKeyError
    from anvia_django.encryption.keys import keyring, rotate_data_keys

    try:
        rotated = rotate_data_keys(alias, batch_size=batch_size)
        out.write(f"Re-wrapped {rotated} data key(s) under master key {keyring().current!r}.")
        if not reencrypt:
            return
        from anvia_django.persistence.codec.reencrypt import reencrypt as reencrypt_all

        _refuse_a_shared_key_table(alias)

        # A long run that can be resumed: its progress belongs in the log
        # even when stderr is not a terminal.
        shown = verbosity if err.isatty() else (2 if verbosity >= 1 else 0)
        progress = Progress(err, shown, label="reencrypt")
        counts = reencrypt_all(alias, batch_size=batch_size, report=progress.update)
        progress.done()
        out.write(
            f"Re-encrypted under master key {keyring().current!r}: {counts.renewed_keys} data "
            f"key(s) renewed, {counts.resealed_rows} row(s) of {counts.conversations} "
            f"conversation(s) sealed again, {counts.destroyed_keys} old data key(s) destroyed."
        )
        _left_to_run(out, counts.left_to_run, "of the destroyed keys and replaced rows")
    except (DecryptionError, MissingKeyError) as error:
        # Names a key id, never content; the batches before it are
        # committed, and running the command again continues from there.
        raise CommandError(
            f"{error}. The batches done so far are kept; run the command again to continue."
        ) from None


def _left_to_run(out: OutputWrapper, statements: list[str], what: str) -> None:
    if statements:
        out.write(
            f"The database still holds dead copies {what} until these run "
            "outside a transaction:\n" + "\n".join(f"  {statement};" for statement in statements)
        )


def _refuse_a_shared_key_table(alias: str) -> None:
    """Re-encryption sweeps ``alias`` and then destroys every retired key
    in the key table. With ``KEY_DATABASE`` shared by other databases that
    may hold messages, their rows would stay under keys it destroys."""
    from django.db import connections, router

    from anvia_django.encryption.keys import keyring
    from anvia_django.models import MemoryMessage

    key_database = keyring().key_database
    if key_database is None:
        return
    others = [
        other
        for other in connections
        if other not in (alias, key_database) and router.allow_migrate_model(other, MemoryMessage)
    ]
    if others:
        raise CommandError(
            f"ENCRYPTION['KEY_DATABASE'] ({key_database!r}) may hold the keys of messages on "
            f"databases {sorted(others)} as well as {alias!r}, and re-encryption sweeps "
            f"{alias!r} only: the keys it retires would leave their rows unreadable. Route "
            "the anvia_django models to one database (allow_migrate), then run it again."
        )
