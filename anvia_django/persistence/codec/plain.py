"""The codec without encryption: values are stored as given."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

from anvia_django.core.memory.bounded_records import RecordLimit
from anvia_django.core.memory.errors import ErrorDescription
from anvia_django.core.memory.search_text import SearchTerms
from anvia_django.core.memory.validation import loads
from anvia_django.fields import EncodedJSON

from .base import CheckpointSealer, CheckpointValue, Codec, Owner, SearchScope, StatePlace


class PlainCodec(Codec):
    opens = False
    compares_in_sql = True
    cannot_open = ()  # nothing is opened

    def seal_messages(
        self, owner: Owner, conversation_id: int, first: int, texts: list[str]
    ) -> list[str]:
        return texts

    def open_text(self, conversation_id: int, position: int, text: str) -> str:
        return text

    def open_message(self, conversation_id: int, position: int, value: Any) -> Any:
        return value

    def open_texts(self, rows: Iterable[tuple[int, int, str]]) -> list[Any]:
        return [loads(text) for _, _, text in rows]

    def open_rows(
        self, conversation_id: int, rows: Iterable[Sequence[Any]], *, position: int, message: int
    ) -> list[Any]:
        return list(rows)

    def copier(self, source_id: int, owner: Owner, fork_id: int) -> Callable[[int, Any], Any]:
        return _as_is

    def failed_run_columns(
        self,
        owner: Owner,
        conversation_id: int,
        run_id: str,
        error: ErrorDescription,
        encoded: list[str],
        limit: RecordLimit,
    ) -> dict[str, Any]:
        return {
            "error_message": error.message,
            "traceback": error.traceback,
            "messages": EncodedJSON(f"[{','.join(encoded)}]"),
        }

    def open_failed_run(
        self, conversation_id: int, run_id: str, error_message: str, traceback: str, messages: Any
    ) -> tuple[str, str, Any]:
        return error_message, traceback, messages

    def summary_value(
        self, owner: Owner, conversation_id: int, covers_through: int, message: Any
    ) -> Any:
        return message

    def open_summary(self, conversation_id: int, covers_through: int, message: Any) -> Any:
        return message

    def state_value(self, place: StatePlace, state: dict[str, Any]) -> Any:
        return state

    def open_state(self, place: StatePlace, value: Any) -> dict[str, Any]:
        return dict(value)

    def value_to_save(self, instance: Any, value: Any) -> Any:
        return value

    def search_terms(self, terms: SearchTerms, scope: SearchScope) -> SearchTerms:
        return terms

    def forget_deleted(self, owners: list[Owner]) -> None:
        return None

    def shares_a_key_across_scopes(self, user_id: str) -> bool:
        return False

    def erase_user(self, user_id: str, scope_keys: Collection[str] | None = None) -> int:
        return 0

    def checkpoint_sealer(self, thread_id: str) -> CheckpointSealer:
        return _value_as_is

    def store_sealer(self, namespace: str) -> CheckpointSealer:
        return _value_as_is

    def open_checkpoint_value(
        self, thread_id: str, place: str, value: CheckpointValue
    ) -> CheckpointValue:
        return value

    def forget_checkpoint_threads(self, thread_ids: Collection[str]) -> None:
        return None

    def forget_store_namespaces(self, namespaces: Collection[str]) -> None:
        return None

    def erase_checkpoint_keys(
        self, thread_ids: Collection[str], namespaces: Collection[str]
    ) -> int:
        return 0


def _value_as_is(place: str, value: CheckpointValue) -> CheckpointValue:
    return value


def _as_is(position: int, value: Any) -> Any:
    return value


PLAIN = PlainCodec()
