"""Two tenants racing to create the same new session ids: each gets its own
conversation, and neither ever holds the other's messages."""

from __future__ import annotations

import pytest

from anvia_django.models import Conversation, MemoryMessage

from . import scope_workers
from .concurrently import Job, run_at_once
from .test_concurrency import WRITERS

SESSIONS = 10


@pytest.mark.django_db(transaction=True)
def test_tenants_racing_on_one_session_id_stay_apart(processes: bool) -> None:
    session_ids = [f"shared-{index}" for index in range(SESSIONS)]
    jobs: list[Job] = [
        (scope_workers.append_as_tenant, (session_ids, writer)) for writer in range(WRITERS)
    ]
    assert run_at_once(jobs, processes=processes) == [SESSIONS] * WRITERS
    conversations = Conversation.objects.filter(session_id__in=session_ids)
    # One conversation per (session, tenant), each holding its own tenant's
    # appends only, all of them, at gap-free positions.
    assert conversations.count() == 2 * SESSIONS
    for conversation in conversations:
        tenant = conversation.metadata["tenant_id"]
        assert conversation.scope_key == f'[null,"{tenant}"]'
        # Model instances, which open sealed messages (ANVIA_TEST_ENCRYPTION=1).
        rows = [
            (row.position, row.message)
            for row in MemoryMessage.objects.filter(conversation=conversation)
            .order_by("position")
            .only("conversation_id", "position", "message")
        ]
        assert [position for position, _ in rows] == list(range(WRITERS // 2))
        writers = sorted(int(message["content"].split(":")[1]) for _, message in rows)
        assert all(message["content"].startswith(f"{tenant}:") for _, message in rows)
        assert writers == [w for w in range(WRITERS) if f"t{w % 2}" == tenant]
        assert conversation.message_count == WRITERS // 2
