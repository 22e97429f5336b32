"""Where a config points: its thread and namespace, and the config of a
stored checkpoint; a binary column's value as bytes."""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.serde.base import SerializerProtocol

EMPTY = "empty"
"""The type of a blob whose channel had no value at its version."""


def thread_and_namespace(config: RunnableConfig) -> tuple[str, str]:
    configurable = config["configurable"]
    return str(configurable["thread_id"]), configurable.get("checkpoint_ns") or ""


def checkpoint_config(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": checkpoint_ns,
            "checkpoint_id": checkpoint_id,
        }
    }


def as_bytes(blob: object) -> bytes | None:
    """A binary column's value as bytes (PostgreSQL's driver gives a memoryview)."""
    return None if blob is None else bytes(blob)  # type: ignore[call-overload]


def loaded(serde: SerializerProtocol, value: tuple[str, bytes | None]) -> Any:
    """A stored (opened) value as ``serde`` reads it."""
    return serde.loads_typed((value[0], value[1] or b""))
