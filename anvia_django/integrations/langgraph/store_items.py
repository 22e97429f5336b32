"""The store's operations on its table: a batch of gets, puts, searches
and namespace listings, run in order in one transaction.

Items whose time has passed (``expires_at``) are never returned, even before
``maintenance.sweep_expired`` deletes them. A read that refreshes (``refresh_ttl``)
moves the expiry of the items it returns to now plus their TTL.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone
from langgraph.store.base import (
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from anvia_django.persistence.codec import codec_for
from anvia_django.persistence.databases import write_alias
from anvia_django.persistence.dialects.upserts import conflict_target

from .maintenance import expired
from .models import LangGraphStoreItem
from .places import item_place, opened_item
from .store_matching import (
    SEPARATOR,
    matches_conditions,
    matches_filter,
    namespace_of,
    namespace_text,
)

JSON = "json"


def run_ops(ops: Iterable[Op], *, using: str | None) -> list[Result]:
    """The result of each of ``ops``, in order (``None`` for a put)."""
    alias = write_alias(using)
    now = timezone.now()
    results: list[Result] = []
    with transaction.atomic(using=alias):
        for op in ops:
            if isinstance(op, GetOp):
                found = _read(alias, _live(alias, now).filter(**_place(op)), now, op.refresh_ttl)
                results.append(found[0] if found else None)
            elif isinstance(op, SearchOp):
                results.append(_search(alias, op, now))
            elif isinstance(op, ListNamespacesOp):
                results.append(_namespaces(alias, op, now))
            elif isinstance(op, PutOp):
                _put(alias, op, now)
                results.append(None)
            else:
                raise ValueError(f"unknown store operation {type(op).__name__}")
    return results


def _place(op: GetOp | PutOp) -> dict[str, str]:
    return {"namespace": namespace_text(op.namespace), "key": str(op.key)}


def _live(alias: str, now: datetime) -> QuerySet[LangGraphStoreItem]:
    return LangGraphStoreItem.objects.using(alias).exclude(expired(now))


_COLUMNS = ("pk", "namespace", "key", "value", "created_at", "updated_at", "ttl_minutes")


def _read(
    alias: str, rows: QuerySet[LangGraphStoreItem], now: datetime, refresh: bool
) -> list[Item]:
    found = list(rows.values_list(*_COLUMNS))
    if refresh:
        _refresh(alias, [(pk, ttl) for pk, *_, ttl in found if ttl is not None], now)
    codec = codec_for(alias)
    items = []
    for _, namespace, key, stored, created_at, updated_at, _ttl in found:
        items.append(
            Item(
                value=json.loads(opened_item(codec, namespace, key, stored)),
                key=key,
                namespace=namespace_of(namespace),
                created_at=created_at,
                updated_at=updated_at,
            )
        )
    return items


def _refresh(alias: str, rows: list[tuple[int, float]], now: datetime) -> None:
    by_ttl: dict[float, list[int]] = {}
    for pk, ttl in rows:
        by_ttl.setdefault(ttl, []).append(pk)
    for ttl, pks in by_ttl.items():
        LangGraphStoreItem.objects.using(alias).filter(pk__in=pks).update(
            expires_at=now + timedelta(minutes=ttl)
        )


def _search(alias: str, op: SearchOp, now: datetime) -> list[SearchItem]:
    rows = _live(alias, now)
    if op.namespace_prefix:
        prefix = namespace_text(op.namespace_prefix)
        rows = rows.filter(Q(namespace=prefix) | Q(namespace__startswith=prefix + SEPARATOR))
    ordered = rows.order_by("-updated_at", "-pk")
    matching = [
        item for item in _read(alias, ordered, now, False) if matches_filter(item.value, op.filter)
    ]
    page = matching[op.offset : op.offset + op.limit]
    if op.refresh_ttl and page:
        keys = Q(pk__in=[])
        for item in page:
            keys |= Q(namespace=namespace_text(item.namespace), key=item.key)
        _read(alias, ordered.filter(keys), now, True)
    return [
        SearchItem(
            namespace=item.namespace,
            key=item.key,
            value=item.value,
            created_at=item.created_at,
            updated_at=item.updated_at,
        )
        for item in page
    ]


def _namespaces(alias: str, op: ListNamespacesOp, now: datetime) -> list[tuple[str, ...]]:
    names = _live(alias, now).values_list("namespace", flat=True).distinct().order_by()
    found = set()
    for text in names:
        namespace = namespace_of(text)
        if matches_conditions(namespace, op.match_conditions):
            found.add(namespace if op.max_depth is None else namespace[: op.max_depth])
    return sorted(found)[op.offset : op.offset + op.limit]


def _put(alias: str, op: PutOp, now: datetime) -> None:
    place = _place(op)
    rows = LangGraphStoreItem.objects.using(alias)
    if op.value is None:
        rows.filter(**place).delete()
        return
    data = json.dumps(dict(op.value), ensure_ascii=False).encode()
    seal = codec_for(alias).store_sealer(place["namespace"])
    sealed = seal(item_place(place["key"]), (JSON, data))
    stored: Any = sealed[1] if sealed[0] != JSON else data
    ttl = op.ttl
    item = LangGraphStoreItem(
        **place,
        value=stored,
        created_at=now,
        updated_at=now,
        ttl_minutes=ttl,
        expires_at=None if ttl is None else now + timedelta(minutes=ttl),
    )
    # One statement, so two first puts of a key at once cannot collide; an
    # existing item keeps its created_at.
    rows.bulk_create(
        [item],
        update_conflicts=True,
        unique_fields=conflict_target(alias, ("namespace", "key")),
        update_fields=["value", "updated_at", "ttl_minutes", "expires_at"],
    )
