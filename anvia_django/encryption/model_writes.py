"""Sealing on ORM writes: a message or summary saved through the model
(``save()``, ``objects.create()``, ``bulk_create()``) rather than the
store is sealed too, so no write path stores plain text while encryption
is on. The store's own writes arrive sealed and pass through unchanged.

``QuerySet.update()`` does not go through a model field's ``pre_save``;
docs/production.md says so.
"""

from __future__ import annotations

from typing import Any

from django.db import router

from anvia_django.core.memory.validation import dumps
from anvia_django.fields import EncodedJSON
from anvia_django.models import Conversation, MemoryMessage, MemorySummary

from .blind_index import indexed
from .envelope import ENVELOPE_PREFIX, is_envelope, seal
from .keys import data_key_for, owner_of
from .records import seal_record, summary_place


def is_sealed(value: Any) -> bool:
    """Whether ``value`` (a model attribute) is an envelope already."""
    if isinstance(value, EncodedJSON):
        return value.startswith(ENVELOPE_PREFIX)
    return is_envelope(value)


def sealed_for_save(instance: Any, value: Any) -> Any:
    """What the column of ``instance`` stores for its (plain) ``value``."""
    if value is None or is_sealed(value):
        return value
    alias = instance._state.db or router.db_for_write(type(instance), instance=instance)
    text = str(value) if isinstance(value, EncodedJSON) else dumps(value)
    user_id, ref = (
        Conversation.objects.using(alias)
        .filter(pk=instance.conversation_id)
        .values_list("user_id", "ref")
        .get()
    )
    if isinstance(instance, MemorySummary):
        place = summary_place(instance.covers_through)
        return EncodedJSON(
            seal_record(alias, (user_id, ref), instance.conversation_id, place, text)
        )
    assert isinstance(instance, MemoryMessage)
    key_id, cipher = data_key_for(alias, owner_of(user_id, ref))
    envelope = seal(cipher, key_id, instance.conversation_id, instance.position, text)
    return EncodedJSON(indexed(alias, [envelope], [text])[0])
