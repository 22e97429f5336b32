"""Re-encryption (``anvia_memory rotate-keys --reencrypt``): every owner whose
data key was made under an earlier master key gets a new key, every sealed
row is sealed again under its owner's current key (rows written before
encryption was on included), and the old keys are destroyed once nothing is
sealed under them.

Re-wrapping (plain ``rotate-keys``) is not enough after a master key may
have leaked: whoever holds it and a copy of the key table can unwrap the
old data keys, and with them every copy of the messages.

The phases, each safe to run again, so a run killed anywhere is finished by
running the command again (nothing records where it stopped: the data says):

1. renew: each owner whose current key was made under a master key other
   than ``CURRENT`` gets a new generation. From its commit on, every writer
   that fetches the owner's key gets the new one (``data_key_for`` reads
   the table each time).
2. reseal: conversation by conversation, in id order, under the
   conversation's row lock (the lock an append holds while it fetches its
   key, seals and inserts), every row not sealed under the owner's current
   key is sealed again, at most ``batch_size`` rows per transaction.
   A writer holding the lock with the old key commits before the sweep
   reads the conversation; a writer after the sweep gets the new key.
3. wait for the writes in flight (``Dialect.wait_for_writes_in_flight``): a writer that
   fetched the old key for a conversation it was creating could not be
   seen by phase 2.
4. retire: each owner with older generations has its conversations swept
   once more, then the older keys are destroyed.

Every sealed table (messages, failed runs, summaries, ADK session and user
state) is one step of :data:`SEALED_TABLES`, run under the conversation's
lock; ADK apps' shared state, which no conversation owns, is swept after
phase 2 and again in phase 4 (``reseal_app_states``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, NamedTuple

from django.db import connections, transaction
from django.db.models import Count, Model, Q, QuerySet, Sum, TextField
from django.db.models.functions import Cast, Length, Substr

from anvia_django.core.memory.errors import ErrorDescription
from anvia_django.core.memory.validation import dumps
from anvia_django.encryption.blind_index import INDEX_OWNER, indexed
from anvia_django.encryption.envelope import (
    Cipher,
    envelope_head,
    envelope_parts,
    is_envelope,
    seal,
)
from anvia_django.encryption.keys import (
    ADK_APP,
    CONVERSATION,
    HASHED_LANGGRAPH_STORE,
    HASHED_LANGGRAPH_THREAD,
    LANGGRAPH_STORE,
    LANGGRAPH_THREAD,
    OWNER_MAX_LENGTH,
    SCOPE_DIGEST_CHARS,
    SCOPED_USER,
    USER,
    adk_app_owner,
    data_key_for,
    destroy_retired_keys,
    key_alias,
    keyring,
    owner_of,
    renew_data_key,
)
from anvia_django.encryption.records import failed_run_place, seal_record_with, summary_place
from anvia_django.models import (
    AdkAppState,
    AdkSession,
    AdkUserState,
    Conversation,
    DataKey,
    FailedRun,
    MemoryMessage,
    MemorySummary,
)
from anvia_django.persistence.dialects import dialect_for, vendor_dialect
from anvia_django.persistence.dialects.statements import quoted

from .base import StatePlace
from .sealed import bounded_sealed_record, sealed_codec


class CurrentKey(NamedTuple):
    """The data key a conversation's rows must be sealed under."""

    id: int
    cipher: Cipher


ResealStep = Callable[[str, int, CurrentKey, int], int]
"""``(alias, conversation id, current key, limit)``: seal again at most
``limit`` of the conversation's rows in one table that are not sealed under
the key; how many it did (fewer than ``limit``: none is left)."""


def reseal_messages(alias: str, conversation_id: int, key: CurrentKey, limit: int) -> int:
    """The :data:`ResealStep` of the message table."""
    rows = list(
        _not_under(key, MemoryMessage, "message", alias, conversation_id)
        # The column's text, not the decoded message: a plain row is sealed
        # as it was stored, byte for byte.
        .annotate(text=Cast("message", output_field=TextField()))
        .order_by("position")
        .values_list("pk", "position", "text")[:limit]
    )
    if rows:
        codec = sealed_codec(alias)
        texts = [codec.open_text(conversation_id, p, text) for _, p, text in rows]
        envelopes = [
            seal(key.cipher, key.id, conversation_id, position, text)
            for (_, position, _), text in zip(rows, texts, strict=True)
        ]
        # The blind index's tokens too, when it is on (a plain row gets its first).
        envelopes = indexed(key.cipher, envelopes, texts)
        resealed = [(envelope, pk) for envelope, (pk, _, _) in zip(envelopes, rows, strict=True)]
        _update(alias, MemoryMessage, ("message",), resealed)
    return len(rows)


def reseal_failed_runs(alias: str, conversation_id: int, key: CurrentKey, limit: int) -> int:
    """The :data:`ResealStep` of failed runs: error message, traceback and
    partial messages sealed together in ``messages`` (the text columns emptied)."""
    rows = list(
        _not_under(key, FailedRun, "messages", alias, conversation_id)
        .order_by("pk")
        .values_list("pk", "run_id", "error_message", "traceback", "messages")[:limit]
    )
    if rows:
        codec = sealed_codec(alias)
        record_limit = dialect_for(alias).record_limit
        resealed = []
        for pk, run_id, *stored in rows:
            error_message, traceback, messages = codec.open_failed_run(
                conversation_id, run_id, *stored
            )
            place = failed_run_place(run_id)

            def seal(payload: str, place: str = place) -> str:
                return seal_record_with(key.cipher, key.id, conversation_id, place, payload)

            # Bounded as record_error bounds it: the envelope must fit MariaDB's packet.
            error = ErrorDescription("", error_message, traceback)
            encoded = [dumps(message) for message in messages]
            resealed.append(("", "", bounded_sealed_record(seal, error, encoded, record_limit), pk))
        _update(alias, FailedRun, ("error_message", "traceback", "messages"), resealed)
    return len(rows)


def reseal_summaries(alias: str, conversation_id: int, key: CurrentKey, limit: int) -> int:
    """The :data:`ResealStep` of compaction summaries."""
    rows = list(
        _not_under(key, MemorySummary, "message", alias, conversation_id)
        .order_by("pk")
        .values_list("pk", "covers_through", "message")[:limit]
    )
    if rows:
        codec = sealed_codec(alias)
        resealed = [
            (
                seal_record_with(
                    key.cipher,
                    key.id,
                    conversation_id,
                    summary_place(covers_through),
                    dumps(codec.open_summary(conversation_id, covers_through, message)),
                ),
                pk,
            )
            for pk, covers_through, message in rows
        ]
        _update(alias, MemorySummary, ("message",), resealed)
    return len(rows)


def _not_under(
    key: CurrentKey, model: type[Model], column: str, alias: str, conversation_id: int
) -> QuerySet[Any]:
    """The conversation's rows of ``model`` whose sealed ``column`` is not
    under ``key`` (plain ones included)."""
    head = envelope_head(key.id)
    rows: QuerySet[Any] = (
        model._default_manager.using(alias)
        .filter(conversation_id=conversation_id)
        .annotate(head=Substr(column, 1, len(head), output_field=TextField()))
        .exclude(head=head)
    )
    return rows


def _update(alias: str, model: type[Model], columns: tuple[str, ...], rows: list[Any]) -> None:
    """``rows`` (the new values of ``columns``, then the id) written back.
    One statement run for every row: bulk_update's CASE over the batch took
    most of the time of the whole command."""
    with connections[alias].cursor() as cursor:
        cursor.executemany(_update_sql(alias, model, *columns), rows)


@lru_cache(maxsize=16)
def _update_sql(alias: str, model: type[Model], *columns: str) -> str:
    table, c = quoted(alias, model)
    assignments = ", ".join(f"{c[column]} = %s" for column in columns)
    return f"UPDATE {table} SET {assignments} WHERE {c['id']} = %s"


def reseal_adk_states(alias: str, conversation_id: int, key: CurrentKey, limit: int) -> int:
    """The :data:`ResealStep` of an ADK session's own state and of its
    user's state in its app, both under the conversation owner's key (the
    user row under its own lock too: the user's other sessions write it)."""
    session = AdkSession.objects.using(alias).filter(conversation_id=conversation_id)
    found = session.values_list("app_scope", "user_id").first()
    if found is None or limit < 1:
        return 0
    app_scope, user_id = found
    head = envelope_head(key.id)
    codec = sealed_codec(alias)
    done = 0
    for model, rows, place in (
        (AdkSession, session, StatePlace("", conversation_id=conversation_id)),
        (
            AdkUserState,
            AdkUserState.objects.using(alias).filter(app_scope=app_scope, user_id=user_id),
            StatePlace(app_scope, user_id),
        ),
    ):
        stale = (
            rows.select_for_update()
            .annotate(head=Substr("state", 1, len(head), output_field=TextField()))
            .exclude(head=head)
            .values_list("pk", "state")
            .first()
        )
        if stale is not None and done < limit:
            pk, stored = stale
            text = dumps(codec.open_state(place, stored))
            envelope = seal_record_with(key.cipher, key.id, 0, place.name, text)
            _update(alias, model, ("state",), [(envelope, pk)])
            done += 1
    return done


def reseal_app_states(alias: str, *, batch_size: int) -> int:
    """Seal each ADK app's shared state again under its app's current key
    (no conversation owns it), a row per transaction under its row lock;
    how many were."""
    resealed = 0
    last = 0
    codec = sealed_codec(alias)
    rows = AdkAppState.objects.using(alias)
    while True:
        page = list(
            rows.filter(pk__gt=last).order_by("pk").values_list("pk", flat=True)[:batch_size]
        )
        if not page:
            return resealed
        for pk in page:
            with transaction.atomic(using=alias):
                row = (
                    rows.select_for_update().filter(pk=pk).values_list("app_scope", "state").first()
                )
                if row is None:
                    continue
                app_scope, stored = row
                key_id, cipher = data_key_for(alias, adk_app_owner(app_scope))
                if is_envelope(stored) and envelope_parts(stored)[0] == key_id:
                    continue
                place = StatePlace(app_scope)
                text = dumps(codec.open_state(place, stored))
                envelope = seal_record_with(cipher, key_id, 0, place.name, text)
                _update(alias, AdkAppState, ("state",), [(envelope, pk)])
                resealed += 1
        last = page[-1]


SEALED_TABLES: tuple[ResealStep, ...] = (
    reseal_messages,
    reseal_failed_runs,
    reseal_summaries,
    reseal_adk_states,
)
"""The steps that seal one conversation's rows again, table by table."""


@dataclass(slots=True)
class ReencryptCounts:
    renewed_keys: int = 0
    conversations: int = 0
    resealed_rows: int = 0
    destroyed_keys: int = 0
    left_to_run: list[str] = field(default_factory=list)
    """What compacting the key table left to the operator (``Dialect.compact``)."""


Report = Callable[[str], None]


def reencrypt(alias: str, *, batch_size: int, report: Report) -> ReencryptCounts:
    """Run the four phases on the conversations of ``alias``; ``report``
    gets a line of progress per batch."""
    counts = ReencryptCounts()
    counts.renewed_keys = renew_keys(alias, batch_size=batch_size)
    report(f"{counts.renewed_keys} data key(s) renewed")
    reseal_conversations(alias, counts, batch_size=batch_size, report=report)
    counts.resealed_rows += reseal_app_states(alias, batch_size=batch_size)
    dialect_for(alias).wait_for_writes_in_flight(alias)
    retire_keys(alias, counts, batch_size=batch_size, report=report)
    # The old wrapped keys stay in dead row versions of the key table (and
    # with them, for whoever holds an old master key, the data keys).
    kalias = key_alias(alias)
    counts.left_to_run = vendor_dialect(connections[kalias]).compact(kalias, [DataKey])
    return counts


def renew_keys(alias: str, *, batch_size: int) -> int:
    """Phase 1: a new key for every owner whose current key was made under
    a master key other than the current one; how many were made."""
    # Not the blind index's key: every token stored would stop matching (it
    # is re-wrapped like every key; docs/production.md says what that leaves).
    # Nor a LangGraph thread's or store namespace's: no step here seals their
    # values again, so retiring an old key would lose them (re-wrapped only).
    stale = (
        DataKey.objects.using(key_alias(alias))
        .exclude(created_under=keyring().current)
        .exclude(owner=INDEX_OWNER)
        .exclude(owner__startswith=LANGGRAPH_THREAD)
        .exclude(owner__startswith=HASHED_LANGGRAPH_THREAD)
        .exclude(owner__startswith=LANGGRAPH_STORE)
        .exclude(owner__startswith=HASHED_LANGGRAPH_STORE)
    )
    renewed = 0
    last = 0
    while True:
        page = list(
            stale.filter(pk__gt=last).order_by("pk").values_list("pk", "owner")[:batch_size]
        )
        if not page:
            return renewed
        for _, owner in page:
            renewed += renew_data_key(alias, owner)[1]
        last = page[-1][0]


def reseal_conversation(alias: str, conversation_id: int, *, batch_size: int) -> int:
    """Seal every row of the conversation that is not under its owner's
    current key again, ``batch_size`` rows per transaction, each under the
    conversation's row lock; how many rows were."""
    resealed = 0
    while True:
        with transaction.atomic(using=alias):
            row = (
                Conversation.objects.using(alias)
                .select_for_update()
                .filter(pk=conversation_id)
                .values_list("user_id", "ref", "scope_key")
                .first()
            )
            if row is None:  # deleted meanwhile
                return resealed
            key = CurrentKey(*data_key_for(alias, owner_of(*row)))
            done = 0
            for step in SEALED_TABLES:
                done += step(alias, conversation_id, key, batch_size - done)
                if done == batch_size:
                    break
        resealed += done
        if done < batch_size:
            return resealed


def reseal_conversations(
    alias: str, counts: ReencryptCounts, *, batch_size: int, report: Report
) -> None:
    """Phase 2: every conversation, in pages of ``batch_size``, in id order."""
    conversations = Conversation.objects.using(alias)
    # Estimates: appends and deletions go on meanwhile.
    totals = conversations.aggregate(conversations=Count("pk"), messages=Sum("message_count"))
    last = 0
    while True:
        page = list(
            conversations.filter(pk__gt=last)
            .order_by("pk")
            .values_list("pk", flat=True)[:batch_size]
        )
        if not page:
            return
        for conversation_id in page:
            counts.resealed_rows += reseal_conversation(
                alias, conversation_id, batch_size=batch_size
            )
        counts.conversations += len(page)
        report(
            f"{counts.conversations}/{totals['conversations']} conversation(s) swept, "
            f"{counts.resealed_rows}/{totals['messages'] or 0} message(s) sealed again"
        )
        last = page[-1]


def _conversations_of(alias: str, owner: str) -> list[int]:
    """The conversations whose data key owner is ``owner`` (see ``owner_of``)."""
    found = Conversation.objects.using(alias)
    if owner.startswith(ADK_APP):
        return []  # an ADK app's shared state: resealed by reseal_app_states
    if owner.startswith(CONVERSATION):
        ref = owner[len(CONVERSATION) :]
        found = found.filter(Q(user_id__isnull=True) | Q(user_id=""), ref=ref)
        return list(found.order_by("pk").values_list("pk", flat=True))
    if owner.startswith(USER):
        # Every conversation of the user, in whatever scope: rows sealed
        # before scopes counted are under this key there too.
        found = found.filter(user_id=owner[len(USER) :])
        return list(found.order_by("pk").values_list("pk", flat=True))
    if owner.startswith(SCOPED_USER):
        # "scoped-user:<user id>:<digest>": the user id is all but the digest.
        found = found.filter(user_id=owner[len(SCOPED_USER) : -SCOPE_DIGEST_CHARS - 1])
    else:
        # A user id too long for the column, kept as its digest: the long ones.
        found = found.annotate(user_id_length=Length("user_id")).filter(
            user_id_length__gt=OWNER_MAX_LENGTH - len(SCOPED_USER) - SCOPE_DIGEST_CHARS - 1
        )
    rows = found.order_by("pk").values_list("pk", "user_id", "ref", "scope_key")
    return [pk for pk, user_id, ref, key in rows if owner_of(user_id, ref, key) == owner]


def retire_keys(alias: str, counts: ReencryptCounts, *, batch_size: int, report: Report) -> None:
    """Phase 4 (after the writes in flight have ended): each owner with
    older keys has its conversations swept again, then loses those keys."""
    owners = (
        DataKey.objects.using(key_alias(alias))
        .values("owner")
        .annotate(keys=Count("pk"))
        .filter(keys__gt=1)
        .order_by("owner")
        .values_list("owner", flat=True)
    )
    # ADK apps' keys own no conversation: their rows, swept once more here.
    counts.resealed_rows += reseal_app_states(alias, batch_size=batch_size)
    last = ""
    while True:
        page = list(owners.filter(owner__gt=last)[:batch_size])
        if not page:
            return
        for owner in page:
            for conversation_id in _conversations_of(alias, owner):
                counts.resealed_rows += reseal_conversation(
                    alias, conversation_id, batch_size=batch_size
                )
            counts.destroyed_keys += destroy_retired_keys(alias, owner)
        report(f"{counts.destroyed_keys} old data key(s) destroyed")
        last = page[-1]
