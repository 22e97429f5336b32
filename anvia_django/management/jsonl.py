"""Export records as JSON Lines, with the inspector API's camelCase keys."""

from __future__ import annotations

import json
from typing import Any

from anvia_django.persistence import ExportedAdkState, ExportedMessage, ExportRecord


def record_json(record: ExportRecord) -> str:
    """One line (without the newline) for a conversation or a message record."""
    return json_line(record_dict(record))


def json_line(record: dict[str, Any]) -> str:
    """One line (without the newline) for a record already in its JSON form."""
    return json.dumps(record, allow_nan=False, separators=(",", ":"))


def record_dict(record: ExportRecord) -> dict[str, Any]:
    if isinstance(record, ExportedMessage):
        entry = record.message
        return {
            "type": "message",
            "ref": record.ref,
            "sessionId": record.session_id,
            "position": entry.position,
            "runId": entry.run_id,
            "turn": entry.turn,
            "createdAt": entry.created_at.isoformat(),
            "message": entry.message,
        }
    if isinstance(record, ExportedAdkState):
        states = record.states
        return {
            "type": "adkState",
            "ref": record.ref,
            "sessionId": record.session_id,
            "appName": states.app_name,
            "userId": states.user_id,
            "sessionState": states.session,
            "userState": states.user,
            "appState": states.app,
        }
    return {
        "type": "conversation",
        "ref": record.ref,
        "sessionId": record.session_id,
        "userId": record.user_id,
        "metadata": record.metadata,
        "createdAt": record.created_at.isoformat(),
        "updatedAt": record.updated_at.isoformat(),
        "messageCount": record.message_count,
    }
