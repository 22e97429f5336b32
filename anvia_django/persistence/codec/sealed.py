"""The codec with encryption at rest on (``ANVIA_DJANGO["ENCRYPTION"]``).

Messages are sealed under the data key of their conversation's owner, bound
to their place (conversation and position); an ADK state under its
owner's (a session's or a user's) or its app's own key, bound to its place
(``StatePlace``); a failed run's error message,
traceback and partial messages together in its ``messages`` column (its two
text columns empty, its error type readable: the admin filters by it); a
summary in its ``message`` column, bound to what it covers. With the blind
index on, each sealed message carries the tokens of its words. Values
written before encryption was on read as they are.

A path that seals writes its conversation row first (an append's
reservation, a fork's new row) and fetches the data key afresh each time:
``--reencrypt`` waits for the writers of the conversation table before it
destroys a retired key (reencrypt.py).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import Any

from django.db import transaction
from django.db.models import Q

from anvia_django.core.memory.bounded_records import RecordLimit, bound_record
from anvia_django.core.memory.errors import ErrorDescription, InvalidMemoryInputError
from anvia_django.core.memory.search_text import SearchTerms
from anvia_django.core.memory.validation import dumps, loads
from anvia_django.encryption import blind_index
from anvia_django.encryption.blind_index import (
    INDEX_OWNER,
    blind_index_enabled,
    indexed,
    search_alternatives,
)
from anvia_django.encryption.checkpoints import open_typed, seal_typed
from anvia_django.encryption.envelope import (
    ENVELOPE_PREFIX,
    Cipher,
    DecryptionError,
    envelope_parts,
    is_envelope,
    open_sealed,
    parse_envelope_text,
    seal,
)
from anvia_django.encryption.keyring import MissingKeyError
from anvia_django.encryption.keys import (
    adk_app_owner,
    cipher_for,
    ciphers_of_owners,
    data_key_for,
    destroy_data_key,
    owner_of,
    owner_of_namespace,
    owner_of_thread,
    owners_of_user,
)
from anvia_django.encryption.records import (
    failed_run_place,
    open_record,
    seal_record_with,
    summary_place,
)
from anvia_django.fields import EncodedJSON
from anvia_django.models import Conversation, MemorySummary

from .base import CheckpointSealer, CheckpointValue, Codec, Owner, SearchScope, StatePlace


class SealedCodec(Codec):
    """Encryption at rest for the rows of one database alias."""

    opens = True
    compares_in_sql = False  # each ciphertext has its own nonce
    # Altered or moved, or its data key destroyed (an erased owner's rows
    # restored from a backup) or its master key removed.
    cannot_open = (DecryptionError, MissingKeyError)

    def __init__(self, alias: str) -> None:
        self.alias = alias

    def _data_key(self, owner: Owner) -> tuple[int, Cipher]:
        # Read afresh on every write, never cached per owner (see the module).
        return data_key_for(self.alias, owner_of(*owner))

    # Messages.

    def seal_messages(
        self, owner: Owner, conversation_id: int, first: int, texts: list[str]
    ) -> list[str]:
        key_id, cipher = self._data_key(owner)
        envelopes = [
            seal(cipher, key_id, conversation_id, first + offset, text)
            for offset, text in enumerate(texts)
        ]
        return indexed(cipher, envelopes, texts)

    def is_sealed(self, text: str) -> bool:
        return text.startswith(ENVELOPE_PREFIX)

    def open_text(self, conversation_id: int, position: int, text: str) -> str:
        if not text.startswith(ENVELOPE_PREFIX):
            return text  # written before encryption was on
        key_id, ct = parse_envelope_text(text)
        return self._opened(key_id, ct, conversation_id, position)

    def open_message(self, conversation_id: int, position: int, value: Any) -> Any:
        if not is_envelope(value):
            return value
        key_id, ct = envelope_parts(value)
        return loads(self._opened(key_id, ct, conversation_id, position))

    def open_texts(self, rows: Iterable[tuple[int, int, str]]) -> list[Any]:
        # The loads' path: one cipher lookup per data key, no JSON parse of envelopes.
        opened: list[Any] = []
        ciphers: dict[int, Cipher] = {}
        for conversation_id, position, text in rows:
            if text.startswith(ENVELOPE_PREFIX):
                key_id, ct = parse_envelope_text(text)
                cipher = ciphers.get(key_id)
                if cipher is None:
                    cipher = ciphers[key_id] = cipher_for(self.alias, key_id)
                try:
                    text = open_sealed(cipher, key_id, ct, conversation_id, position)
                except DecryptionError:
                    text = self._opened(key_id, ct, conversation_id, position)
            opened.append(loads(text))
        return opened

    def _opened(self, key_id: int, ct: str, conversation_id: int, position: int) -> str:
        try:
            cipher = cipher_for(self.alias, key_id)
            return open_sealed(cipher, key_id, ct, conversation_id, position)
        except DecryptionError:
            # A cached cipher may be a stale one for a reused id: fetch once more.
            cipher = cipher_for(self.alias, key_id, cached=False)
            return open_sealed(cipher, key_id, ct, conversation_id, position)

    def copier(self, source_id: int, owner: Owner, fork_id: int) -> Callable[[int, Any], Any]:
        key_id, cipher = self._data_key(owner)

        def sealed_copy(position: int, value: Any) -> EncodedJSON:
            # The associated data binds a ciphertext to its conversation.
            if is_envelope(value):
                text = self._opened(*envelope_parts(value), source_id, position)
            else:
                text = dumps(value)  # written before encryption was on
            resealed = seal(cipher, key_id, fork_id, position, text)
            # The tokens too: the fork's owner has its own index key.
            return EncodedJSON(indexed(cipher, [resealed], [text])[0])

        return sealed_copy

    # Records.

    def failed_run_columns(
        self,
        owner: Owner,
        conversation_id: int,
        run_id: str,
        error: ErrorDescription,
        encoded: list[str],
        limit: RecordLimit,
    ) -> dict[str, Any]:
        key_id, cipher = self._data_key(owner)
        place = failed_run_place(run_id)

        def sealed(payload: str) -> str:
            return seal_record_with(cipher, key_id, conversation_id, place, payload)

        payload = bounded_sealed_record(sealed, error, encoded, limit)
        return {"error_message": "", "traceback": "", "messages": EncodedJSON(payload)}

    def open_failed_run(
        self, conversation_id: int, run_id: str, error_message: str, traceback: str, messages: Any
    ) -> tuple[str, str, Any]:
        if not is_envelope(messages):
            return error_message, traceback, messages
        payload = open_record(self.alias, conversation_id, failed_run_place(run_id), messages)
        return payload["error_message"], payload["traceback"], payload["messages"]

    def summary_value(
        self, owner: Owner, conversation_id: int, covers_through: int, message: Any
    ) -> Any:
        key_id, cipher = self._data_key(owner)
        place = summary_place(covers_through)
        return EncodedJSON(seal_record_with(cipher, key_id, conversation_id, place, dumps(message)))

    def open_summary(self, conversation_id: int, covers_through: int, message: Any) -> Any:
        return open_record(self.alias, conversation_id, summary_place(covers_through), message)

    def state_value(self, place: StatePlace, state: dict[str, Any]) -> Any:
        owner = place.owner
        key_id, cipher = data_key_for(
            self.alias, adk_app_owner(place.app_scope) if owner is None else owner_of(*owner)
        )
        return EncodedJSON(seal_record_with(cipher, key_id, 0, place.name, dumps(state)))

    def open_state(self, place: StatePlace, value: Any) -> dict[str, Any]:
        return dict(open_record(self.alias, 0, place.name, value))

    # Everything else.

    def value_to_save(self, instance: Any, value: Any) -> Any:
        """A message or summary saved through the ORM (``save()``,
        ``create()``, ``bulk_create()``) is sealed too; the store's own
        writes arrive sealed and pass through. ``QuerySet.update()`` does
        not go through here (docs/production.md)."""
        if value is None or _is_sealed(value):
            return value
        text = str(value) if isinstance(value, EncodedJSON) else dumps(value)
        conversation = instance.conversation
        owner = (conversation.user_id, conversation.ref, conversation.scope_key)
        if isinstance(instance, MemorySummary):
            covers_through = instance.covers_through
            return self.summary_value(owner, instance.conversation_id, covers_through, loads(text))
        return EncodedJSON(
            self.seal_messages(owner, instance.conversation_id, instance.position, [text])[0]
        )

    def search_terms(self, terms: SearchTerms, scope: SearchScope) -> SearchTerms:
        if terms.blind or not blind_index_enabled():
            return terms
        # Every generation of each owner's keys, the key their user had
        # before scopes counted, and the one index key of earlier versions.
        owners = _owners_in(self.alias, scope)
        ciphers = ciphers_of_owners(
            self.alias,
            None if owners is None else [*owners, INDEX_OWNER],
            at_most=blind_index.MAX_SEARCH_KEYS,
        )
        if ciphers is None:
            raise _too_wide()
        alternatives = search_alternatives(ciphers, terms.text) if ciphers else ()
        found = tuple(token for group in alternatives for token in group)
        return SearchTerms(" ".join(found), found, blind=True, alternatives=alternatives)

    def forget_deleted(self, owners: list[Owner]) -> None:
        # The data key of a conversation without a user goes with it; a
        # user's key stays for their other ones (``erase`` destroys it).
        gone = [owner_of(None, ref) for user_id, ref, _ in owners if not user_id]
        if not gone:
            return

        def destroy() -> None:
            for owner in gone:
                destroy_data_key(self.alias, owner)

        transaction.on_commit(destroy, using=self.alias)

    def erase_user(self, user_id: str, scope_keys: Collection[str] | None = None) -> int:
        if scope_keys is not None:
            # One tenant's keys; the key of before scopes counted seals
            # rows of the others too.
            owners = {owner_of(user_id, "", key) for key in scope_keys} - {owner_of(user_id, "")}
        else:
            # Every scope's key of the user (one per tenant), and the key of
            # the form before scopes counted.
            owners = set(owners_of_user(self.alias, user_id))
        return sum(destroy_data_key(self.alias, owner) for owner in sorted(owners))

    def shares_a_key_across_scopes(self, user_id: str) -> bool:
        return owner_of(user_id, "") in owners_of_user(self.alias, user_id)

    # LangGraph's checkpoints.

    def checkpoint_sealer(self, thread_id: str) -> CheckpointSealer:
        return self._sealer(owner_of_thread(thread_id), thread_id)

    def store_sealer(self, namespace: str) -> CheckpointSealer:
        return self._sealer(owner_of_namespace(namespace), namespace)

    def _sealer(self, owner: str, holder: str) -> CheckpointSealer:
        # Fetched afresh for each write, as for messages (see the module).
        key_id, cipher = data_key_for(self.alias, owner)

        def sealed(place: str, value: CheckpointValue) -> CheckpointValue:
            return seal_typed(cipher, key_id, holder, place, value)

        return sealed

    def open_checkpoint_value(
        self, thread_id: str, place: str, value: CheckpointValue
    ) -> CheckpointValue:
        return open_typed(self.alias, thread_id, place, value)

    def forget_checkpoint_threads(self, thread_ids: Collection[str]) -> None:
        self._forget_on_commit({owner_of_thread(thread_id) for thread_id in thread_ids})

    def forget_store_namespaces(self, namespaces: Collection[str]) -> None:
        self._forget_on_commit({owner_of_namespace(namespace) for namespace in namespaces})

    def _forget_on_commit(self, found: set[str]) -> None:
        owners = sorted(found)
        if not owners:
            return

        def destroy() -> None:
            for owner in owners:
                destroy_data_key(self.alias, owner)

        transaction.on_commit(destroy, using=self.alias)

    def erase_checkpoint_keys(
        self, thread_ids: Collection[str], namespaces: Collection[str]
    ) -> int:
        owners = {owner_of_thread(thread_id) for thread_id in thread_ids}
        owners.update(owner_of_namespace(namespace) for namespace in namespaces)
        return sum(destroy_data_key(self.alias, owner) for owner in sorted(owners))


def _owners_in(alias: str, scope: SearchScope) -> set[str] | None:
    """The data key owners of the conversations ``scope`` covers; ``None``
    for every owner. Refused (``_too_wide``) past the bound: an owner left
    out would leave their messages unfound without a word."""
    conversations = Conversation.objects.using(alias)
    if scope.conversation_id is not None:
        conversations = conversations.filter(pk=scope.conversation_id)
    elif scope.user_id is not None:
        return set(owners_of_user(alias, scope.user_id))
    elif scope.conversations is not None and scope.conversations.query.has_filters():
        conversations = scope.conversations.order_by()
    else:
        return None
    bound = blind_index.MAX_SEARCH_KEYS
    users = list(
        conversations.exclude(user_id__isnull=True)
        .exclude(user_id="")
        .values_list("user_id", "scope_key")
        .distinct()[: bound + 1]
    )
    ownerless = conversations.filter(Q(user_id__isnull=True) | Q(user_id=""))
    refs = list(ownerless.values_list("ref", flat=True)[: bound + 1])
    if len(users) + len(refs) > bound:
        raise _too_wide()
    owners = {owner_of(user_id, "", key) for user_id, key in users}
    owners |= {owner_of(user_id, "") for user_id, _ in users}  # their keys of before scopes
    owners |= {owner_of(None, ref) for ref in refs}
    return owners


def _too_wide() -> InvalidMemoryInputError:
    return InvalidMemoryInputError(
        f"covers sealed messages under more than {blind_index.MAX_SEARCH_KEYS} data keys, "
        "more than a search of the blind index serves: narrow it to a user or a tenant",
        path="q",
    )


def bounded_sealed_record(
    sealed: Callable[[str], str], error: ErrorDescription, encoded: list[str], limit: RecordLimit
) -> str:
    """``sealed`` of a failed run's payload (its error message, traceback and
    partial messages as one JSON object), bounded again, each time to half,
    until the envelope fits the database's statement: escaping made the
    text grow (control characters become ``\\u00XX``)."""
    bound = limit.bytes
    while True:
        payload = (
            f'{{"error_message":{dumps(error.message)},"traceback":{dumps(error.traceback)},'
            f'"messages":[{",".join(encoded)}]}}'
        )
        envelope = sealed(payload)
        if limit.fits(envelope) or bound is None:
            return envelope
        bound //= 2
        error, encoded = bound_record(error, encoded, bound)


def _is_sealed(value: Any) -> bool:
    if isinstance(value, EncodedJSON):
        return value.startswith(ENVELOPE_PREFIX)
    return is_envelope(value)


_codecs: dict[str, SealedCodec] = {}


def sealed_codec(alias: str) -> SealedCodec:
    codec = _codecs.get(alias)
    if codec is None:
        codec = _codecs[alias] = SealedCodec(alias)
    return codec
