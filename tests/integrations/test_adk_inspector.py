"""An ADK session in the admin and the inspector API: its events are the
conversation's messages, readable with their author, function calls and
results, and the state each changed."""

from __future__ import annotations

import pytest

from anvia_django.models import AdkSession, Conversation
from tests.helpers import run
from tests.integrations.adk_support import needs_adk
from tests.test_admin_pages import every_view, html, staff_with, transcript

pytestmark = [pytest.mark.django_db, needs_adk]


def test_an_adk_session_reads_as_a_conversation_in_the_admin() -> None:
    from tests.integrations.adk_model import one_turn

    session_id = run(one_turn, "shop", "u1", "I like green tea")
    conversation = Conversation.objects.get(session_id=session_id)
    assert conversation.user_id == "u1"
    assert conversation.metadata == {"adk_app": "shop"}
    page = html(every_view(), transcript(conversation))
    assert page.count('class="anvia-block-label">author<') == 4
    assert page.count('class="anvia-block-label">ADK event<') == 4
    assert page.count('class="anvia-block-label">tool calls<') == 1
    assert page.count('class="anvia-block-label">state delta<') == 2  # the tool's, the answer's
    assert "&quot;user:fact&quot;: &quot;I like green tea&quot;" in page
    assert "noted: I like green tea" in page
    assert "temp:scratch" not in page

    # The session's own page: its state, linked to the conversation.
    adk_session = AdkSession.objects.get(conversation=conversation)
    page = html(
        staff_with("adksession", "conversation"),
        f"/admin/anvia_django/adksession/{adk_session.pk}/change/",
    )
    assert "&quot;last_answer&quot;: &quot;noted: I like green tea&quot;" in page
    assert f'href="{transcript(conversation)}"' in page
    listing = html(staff_with("adksession"), "/admin/anvia_django/adksession/", q="u1")
    assert "shop" in listing
