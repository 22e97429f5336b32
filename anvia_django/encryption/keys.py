"""Data keys in the database: one current key per owner (a user, else a
conversation), created on first use, unwrapped once per process, re-wrapped
by rotation, renewed by re-encryption, destroyed by erasure. What is sealed
with them, and how it is opened, is the sealed codec's
(``anvia_django/persistence/codec/sealed.py``).

Keys stay in :class:`~.secret.Secret` and AES-GCM ciphers (neither shows
its bytes), the functions that hold them are marked ``sensitive_variables``
(masked in the error report Django mails), and every error names key ids,
never keys."""

from __future__ import annotations

import hashlib
from collections.abc import Collection
from functools import lru_cache
from typing import Any, cast

from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.db import IntegrityError, connections, transaction
from django.db.models import Q
from django.utils import timezone
from django.views.decorators.debug import sensitive_variables

from anvia_django.conf import SETTINGS_NAME, app_settings
from anvia_django.models import DataKey

from .envelope import (
    Cipher,
    DecryptionError,
    cipher_of,
    new_data_key,
    unwrap,
    wrap,
)
from .keyring import Keyring, KeyringError, MissingKeyError, parse_keyring

_keyring: Keyring | None = None
_ciphers: dict[tuple[str, int], tuple[str, Cipher]] = {}
"""(key alias, data key id) -> (its wrapped form, its cipher): unwrapped once."""


def keyring() -> Keyring:
    """The parsed keyring; ``ImproperlyConfigured`` naming the key id at fault."""
    global _keyring
    if _keyring is None:
        try:
            _keyring = parse_keyring(app_settings.ENCRYPTION)
        except KeyringError as error:
            raise ImproperlyConfigured(f"{SETTINGS_NAME}['ENCRYPTION']: {error}") from None
    return _keyring


def forget_keys() -> None:
    """Drop the parsed keyring and every unwrapped data key of this process."""
    global _keyring
    _keyring = None
    _ciphers.clear()


def _forget_if_changed(*, setting: str, **kwargs: Any) -> None:
    if setting == SETTINGS_NAME:
        forget_keys()


setting_changed.connect(_forget_if_changed)


def key_alias(alias: str) -> str:
    """The database alias of the data key table for messages on ``alias``."""
    return keyring().key_database or alias


USER = "user:"
CONVERSATION = "conversation:"
SCOPED_USER = "scoped-user:"
"""A user's key within one scope: ``scoped-user:<user id>:<scope digest>``."""
HASHED_SCOPED_USER = "scoped-userh:"
"""The same when the user id is too long: ``scoped-userh:<its SHA-256>:<scope digest>``."""
ADK_APP = "adk-app:"
"""An ADK app's key for its shared state: ``adk-app:<app scope digest>``."""
SCOPE_DIGEST_CHARS = 16
OWNER_MAX_LENGTH = cast(int, DataKey._meta.get_field("owner").max_length)
LANGGRAPH_THREAD = "lg-thread:"
"""A LangGraph thread's key (its checkpoints): ``lg-thread:<thread id>``, or
``lg-threadh:<its SHA-256>`` when the id is too long."""
HASHED_LANGGRAPH_THREAD = "lg-threadh:"
LANGGRAPH_STORE = "lg-store:"
"""A LangGraph store namespace's key (its items): ``lg-store:<namespace>``,
or ``lg-storeh:<its SHA-256>`` when it is too long."""
HASHED_LANGGRAPH_STORE = "lg-storeh:"


def adk_app_owner(app_scope: str) -> str:
    """The data key owner of an ADK app's shared state (no user's: erasing
    a user leaves it)."""
    return f"{ADK_APP}{_digest(app_scope)}"


def owner_of(user_id: str | None, ref: str, scope_key: str = "") -> str:
    """The data key owner of a conversation: its user within its scope,
    else the conversation.

    A scope key that is the user id or empty (the default scope, and scopes
    without the user id) keeps the form every key had before scopes counted:
    ``user:<user id>``. Any other scope key (metadata keys such as a tenant,
    or a scope function) gives the user one key per scope, so a user present
    in two tenants has two keys and erasing one tenant's data leaves the
    other's readable. The scope key goes in as a digest: it may be longer
    than the column, and the key table need not name tenants."""
    if not user_id:
        return f"{CONVERSATION}{ref}"
    if scope_key in ("", user_id):
        return f"{USER}{user_id}"
    digest = _digest(scope_key)[:SCOPE_DIGEST_CHARS]
    owner = f"{SCOPED_USER}{user_id}:{digest}"
    if len(owner) <= OWNER_MAX_LENGTH:
        return owner
    return f"{HASHED_SCOPED_USER}{_digest(user_id)}:{digest}"


def owner_of_thread(thread_id: str) -> str:
    """The data key owner of a LangGraph thread's checkpoints: the thread,
    so that deleting it destroys its key (``forget_checkpoint_threads``)."""
    return _bounded(LANGGRAPH_THREAD, HASHED_LANGGRAPH_THREAD, thread_id)


def owner_of_namespace(namespace: str) -> str:
    """The data key owner of the items of a LangGraph store namespace."""
    return _bounded(LANGGRAPH_STORE, HASHED_LANGGRAPH_STORE, namespace)


def _bounded(prefix: str, hashed_prefix: str, name: str) -> str:
    owner = f"{prefix}{name}"
    if len(owner) <= OWNER_MAX_LENGTH:
        return owner
    return f"{hashed_prefix}{_digest(name)}"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def is_owner_of_user(owner: str, user_id: str) -> bool:
    """Whether data key ``owner`` is one of ``user_id``'s, in any scope."""
    if owner == f"{USER}{user_id}":
        return True
    for prefix in (f"{SCOPED_USER}{user_id}:", f"{HASHED_SCOPED_USER}{_digest(user_id)}:"):
        rest = owner[len(prefix) :]
        # Exactly a digest after the prefix: "scoped-user:u1:<digest>" is
        # u1's, "scoped-user:u1:x:<digest>" is user "u1:x"'s.
        if (
            owner.startswith(prefix)
            and len(rest) == SCOPE_DIGEST_CHARS
            and not rest.strip("0123456789abcdef")
        ):
            return True
    return False


def owners_of_user(alias: str, user_id: str) -> list[str]:
    """Every data key owner of ``user_id`` (one per scope) in the key table."""
    candidates = (
        DataKey.objects.using(key_alias(alias))
        .filter(
            Q(owner=f"{USER}{user_id}")
            | Q(owner__startswith=f"{SCOPED_USER}{user_id}:")
            | Q(owner__startswith=f"{HASHED_SCOPED_USER}{_digest(user_id)}:")
        )
        .values_list("owner", flat=True)
        .distinct()
    )
    return sorted(owner for owner in candidates if is_owner_of_user(owner, user_id))


@sensitive_variables("ring", "raw", "cipher", "cached")
def _cipher(alias: str, pk: int, owner: str, master_id: str, wrapped: str) -> Cipher:
    cached = _ciphers.get((alias, pk))
    if cached is not None and cached[0] == wrapped:
        return cached[1]
    ring = keyring()
    try:
        raw = unwrap(ring.master(master_id), master_id, owner, wrapped)
    except DecryptionError as error:
        raise DecryptionError(f"data key {pk}: {error}") from None
    except MissingKeyError as error:
        raise MissingKeyError(f"data key {pk}: {error}") from None
    cipher = cipher_of(raw)
    _ciphers[(alias, pk)] = (wrapped, cipher)
    return cipher


@sensitive_variables("ring", "raw", "cipher")
def data_key_for(alias: str, owner: str) -> tuple[int, Cipher]:
    """The id and cipher of ``owner``'s current data key (its newest
    generation), created (wrapped by the current master key) when it has
    none. Raises naming the key id when the key cannot be unwrapped: the
    caller then writes nothing.

    Read from the database on every call, never from a per-owner cache:
    ``--reencrypt`` in another process may have made a newer key, and
    sealing under the one it is retiring would lose the message when that
    key is destroyed (see persistence/reencrypt.py)."""
    kalias = key_alias(alias)
    row = _key_of_owner(kalias, owner)
    if row is None:
        ring = keyring()
        raw = new_data_key()
        wrapped = wrap(ring.master(ring.current), ring.current, owner, raw)
        try:
            with transaction.atomic(using=kalias):
                created = DataKey.objects.using(kalias).create(
                    owner=owner,
                    generation=1,
                    master_key_id=ring.current,
                    created_under=ring.current,
                    wrapped_key=wrapped,
                    created_at=timezone.now(),
                )
        except IntegrityError:
            # Another writer created it first.
            row = _key_of_owner(kalias, owner)
            if row is None:
                raise
        else:
            cipher = cipher_of(raw)
            _ciphers[(kalias, created.pk)] = (wrapped, cipher)
            return created.pk, cipher
    pk, master_id, wrapped = row
    return pk, _cipher(kalias, pk, owner, master_id, wrapped)


def _key_of_owner(kalias: str, owner: str) -> tuple[int, str, str] | None:
    """``owner``'s data key row (id, master key id, wrapped key), read on
    every sealed append: SQL built once per alias, not a queryset each time
    (building and compiling one cost more than the query on SQLite)."""
    with connections[kalias].cursor() as cursor:
        cursor.execute(_key_of_owner_sql(kalias), [owner])
        row = cursor.fetchone()
    return None if row is None else (row[0], row[1], row[2])


@lru_cache(maxsize=16)
def _key_of_owner_sql(kalias: str) -> str:
    column = _key_columns(kalias)
    table = connections[kalias].ops.quote_name(DataKey._meta.db_table)
    return (
        f"SELECT {column['id']}, {column['master_key_id']}, {column['wrapped_key']} "
        f"FROM {table} WHERE {column['owner']} = %s "
        # The owner's current key: its newest generation (reencrypt.py).
        f"ORDER BY {column['generation']} DESC LIMIT 1"
    )


def _key_columns(alias: str) -> dict[str, str]:
    quote = connections[alias].ops.quote_name
    return {field.name: quote(cast(str, field.column)) for field in DataKey._meta.concrete_fields}


@sensitive_variables("hit")
def cipher_for(alias: str, pk: int, *, cached: bool = True) -> Cipher:
    """The cipher of data key ``pk``, which reads of messages on ``alias`` need."""
    kalias = key_alias(alias)
    if cached:
        hit = _ciphers.get((kalias, pk))
        if hit is not None:
            return hit[1]
    row = (
        DataKey.objects.using(kalias)
        .filter(pk=pk)
        .values_list("owner", "master_key_id", "wrapped_key")
        .first()
    )
    if row is None:
        raise MissingKeyError(
            f"data key {pk} does not exist (erased?): the messages sealed under it cannot be read"
        )
    return _cipher(kalias, pk, *row)


@sensitive_variables("ciphers")
def ciphers_of_owners(
    alias: str, owners: Collection[str] | None, *, at_most: int
) -> list[Cipher] | None:
    """The ciphers of every data key (all generations) of ``owners``
    (``None``: of every owner) in one query; ``None`` when there are more
    than ``at_most``."""
    kalias = key_alias(alias)
    keys = DataKey.objects.using(kalias)
    if owners is not None:
        keys = keys.filter(owner__in=list(owners))
    rows = list(
        keys.order_by("pk").values_list("pk", "owner", "master_key_id", "wrapped_key")[
            : at_most + 1
        ]
    )
    if len(rows) > at_most:
        return None
    # Checked against the wrapped form: a cached cipher of a reused id is not used.
    return [_cipher(kalias, *row) for row in rows]


def destroy_data_key(alias: str, owner: str) -> int:
    """Delete ``owner``'s data keys, every generation (erasure): how many rows went."""
    kalias = key_alias(alias)
    rows = DataKey.objects.using(kalias).filter(owner=owner)
    for pk in rows.values_list("pk", flat=True):
        _ciphers.pop((kalias, pk), None)
    deleted, _ = rows.delete()
    return deleted


@sensitive_variables("ring", "raw")
def renew_data_key(alias: str, owner: str) -> tuple[int, bool]:
    """Give ``owner`` a new current data key, made and wrapped under the
    current master key, unless its current key was made under it already:
    the current key's id, and whether it is new. The older generations stay (messages
    sealed under them still read) until :func:`destroy_retired_keys`."""
    kalias = key_alias(alias)
    ring = keyring()
    keys = DataKey.objects.using(kalias)
    current = (
        keys.filter(owner=owner)
        .order_by("-generation")
        .values_list("pk", "generation", "created_under")
        .first()
    )
    if current is not None and current[2] == ring.current:
        return current[0], False
    raw = new_data_key()
    wrapped = wrap(ring.master(ring.current), ring.current, owner, raw)
    try:
        with transaction.atomic(using=kalias):
            created = keys.create(
                owner=owner,
                generation=1 if current is None else current[1] + 1,
                master_key_id=ring.current,
                created_under=ring.current,
                wrapped_key=wrapped,
                created_at=timezone.now(),
            )
    except IntegrityError:
        # Another run, or a first append, made that generation first, under
        # the current master key too.
        return renew_data_key(alias, owner)
    _ciphers[(kalias, created.pk)] = (wrapped, cipher_of(raw))
    return created.pk, True


def destroy_retired_keys(alias: str, owner: str) -> int:
    """Delete ``owner``'s data keys older than its current one: how many
    went. The caller has made sure nothing is sealed under them any more."""
    kalias = key_alias(alias)
    keys = DataKey.objects.using(kalias).filter(owner=owner)
    newest = keys.order_by("-generation").values_list("generation", flat=True).first()
    if newest is None:
        return 0
    retired = keys.filter(generation__lt=newest)
    for pk in retired.values_list("pk", flat=True):
        _ciphers.pop((kalias, pk), None)
    deleted, _ = retired.delete()
    return deleted


@sensitive_variables("ring", "master", "raw")
def rotate_data_keys(alias: str, *, batch_size: int = 500) -> int:
    """Re-wrap every data key not wrapped by the current master key; how
    many were. Touches keys only, never messages. Safe to run again."""
    kalias = key_alias(alias)
    ring = keyring()
    master = ring.master(ring.current)
    keys = DataKey.objects.using(kalias)
    rotated = 0
    last = 0
    while True:
        page = list(
            keys.filter(pk__gt=last)
            .exclude(master_key_id=ring.current)
            .order_by("pk")
            .values_list("pk", "owner", "master_key_id", "wrapped_key")[:batch_size]
        )
        if not page:
            return rotated
        with transaction.atomic(using=kalias):
            for pk, owner, master_id, wrapped in page:
                try:
                    raw = unwrap(ring.master(master_id), master_id, owner, wrapped)
                except (DecryptionError, MissingKeyError) as error:
                    raise type(error)(f"data key {pk}: {error}") from None
                # Only if unchanged since it was read (another rotation).
                rotated += keys.filter(pk=pk, wrapped_key=wrapped).update(
                    master_key_id=ring.current,
                    wrapped_key=wrap(master, ring.current, owner, raw),
                )
        last = page[-1][0]
