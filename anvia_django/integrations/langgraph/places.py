"""Where a config points: its thread and namespace, and the config of a
stored checkpoint; the place of a stored value in its thread or namespace
(what a sealed value is bound to); a binary column's value as bytes; a
column's value in a query compiled once; a store item's value opened.
Imports LangGraph only for type checking."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from django.db.models import Field, Model

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.serde.base import SerializerProtocol

    from anvia_django.persistence.codec import Codec

from anvia_django.persistence.compiled import Slot

EMPTY = "empty"
"""The type of a blob whose channel had no value at its version."""


def thread_and_namespace(config: RunnableConfig) -> tuple[str, str]:
    configurable = config["configurable"]
    return str(configurable["thread_id"]), configurable.get("checkpoint_ns") or ""


FOLLOWS_LATEST = "__anvia_follows_latest"
"""The key, in a config's ``configurable``, saying whether the checkpoint it
names was read as its thread's latest (``get_tuple`` without a
``checkpoint_id``): a put after it then refuses to fork the thread
(``writes.put_checkpoint``). LangGraph's loop keeps ``get_tuple``'s config
keys in every config it puts with; keys starting with ``__`` stay out of
checkpoint metadata."""


def checkpoint_config(
    thread_id: str, checkpoint_ns: str, checkpoint_id: str, *, follows: bool | None = None
) -> RunnableConfig:
    """The config of a stored checkpoint, with ``FOLLOWS_LATEST`` when ``follows`` is given."""
    configurable: dict[str, object] = {
        "thread_id": thread_id,
        "checkpoint_ns": checkpoint_ns,
        "checkpoint_id": checkpoint_id,
    }
    if follows is not None:
        configurable[FOLLOWS_LATEST] = follows
    return {"configurable": configurable}


def as_bytes(blob: object) -> bytes | None:
    """A binary column's value as bytes (PostgreSQL's driver gives a memoryview)."""
    return None if blob is None else bytes(blob)  # type: ignore[call-overload]


def loaded(serde: SerializerProtocol, value: tuple[str, bytes | None]) -> Any:
    """A stored (opened) value as ``serde`` reads it."""
    return serde.loads_typed((value[0], value[1] or b""))


def blob_place(checkpoint_ns: str, channel: str, version: str) -> str:
    return f"blob\x00{checkpoint_ns}\x00{channel}\x00{version}"


def write_place(checkpoint_ns: str, checkpoint_id: str, task_id: str, idx: int) -> str:
    return f"write\x00{checkpoint_ns}\x00{checkpoint_id}\x00{task_id}\x00{idx}"


def item_place(key: str) -> str:
    """A store item's place in its namespace (which takes a thread's part)."""
    return f"item\x00{key}"


SEALED_ITEM = "sealed"


def opened_item(codec: Codec, namespace: str, key: str, stored: object) -> bytes:
    """A store item's value column as its JSON bytes (opened when sealed)."""
    data = as_bytes(stored) or b""
    if data.startswith(b"{"):  # stored plain
        return data
    opened = codec.open_checkpoint_value(namespace, item_place(key), (SEALED_ITEM, data))
    return opened[1] or b"{}"


def slot(model: type[Model], name: str, called: str | None = None) -> Slot:
    """A value of ``model``'s field ``name`` given when a compiled query runs
    (``persistence/compiled.py``), under the name ``called`` (else ``name``)."""
    return Slot(called or name, cast("Field[Any, Any]", model._meta.get_field(name)))
