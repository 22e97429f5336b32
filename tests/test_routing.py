"""``using=`` picks a database; without it the project's routers decide."""

from __future__ import annotations

from typing import Any

import pytest
from django.db.models import Model
from django.test import override_settings

from anvia_django.core.memory import MemoryContext, MemoryConversationListOptions
from anvia_django.models import Conversation
from anvia_django.store import DjangoMemoryStore

from .helpers import append_input, run, user

pytestmark = pytest.mark.django_db(databases=["default", "other"])


class MemoryOnOther:
    def db_for_read(self, model: type[Model], **hints: Any) -> str | None:
        return "other" if model._meta.app_label == "anvia_django" else None

    db_for_write = db_for_read


def test_using_names_the_database() -> None:
    store = DjangoMemoryStore(using="other")
    run(store.append, append_input("s1", [user("hi")]))
    assert Conversation.objects.using("other").count() == 1
    assert Conversation.objects.using("default").count() == 0
    assert run(store.load, MemoryContext("s1")) == [user("hi")]
    assert run(DjangoMemoryStore(using="default").load, MemoryContext("s1")) == []
    listed = run(store.inspector.list_conversations, MemoryConversationListOptions(limit=5))
    assert [c.session_id for c in listed] == ["s1"]


@override_settings(DATABASE_ROUTERS=[f"{__name__}.MemoryOnOther"])
def test_without_using_the_routers_decide() -> None:
    store = DjangoMemoryStore()
    run(store.append, append_input("s1", [user("hi")]))
    run(store.clear, MemoryContext("s2"))
    assert Conversation.objects.using("other").count() == 1
    assert Conversation.objects.using("default").count() == 0
    assert run(store.load, MemoryContext("s1")) == [user("hi")]
    run(store.clear, MemoryContext("s1"))
    assert Conversation.objects.using("other").count() == 0
