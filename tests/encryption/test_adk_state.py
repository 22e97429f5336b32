"""ADK state at rest: with encryption on, a session's own state, its user's
and its app's are sealed as messages are, read back equal, and survive
``rotate-keys --reencrypt`` with the old master key gone."""

from __future__ import annotations

from io import StringIO
from typing import TYPE_CHECKING, Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.models import Model
from django.test import override_settings

from anvia_django.encryption.envelope import ENVELOPE_PREFIX
from anvia_django.integrations import adk
from anvia_django.models import AdkAppState, AdkSession, AdkUserState
from tests.encryption.support import KEY_1, KEY_2, encryption
from tests.helpers import run
from tests.integrations.adk_support import event, needs_adk

if TYPE_CHECKING:
    from anvia_django.integrations.adk import DjangoSessionService

pytestmark = needs_adk

STATE = {"app:motto": "app-secret", "user:name": "user-secret", "cart": "session-secret"}
DELTA = {"app:tier": "app-later", "user:city": "user-later", "step": "session-later"}


def raw_states() -> list[str]:
    """Every ADK state column's text, as the database holds it."""
    texts = []
    with connection.cursor() as cursor:
        for model in (AdkSession, AdkUserState, AdkAppState):
            cursor.execute(f"SELECT state FROM {model._meta.db_table}")
            texts += [str(text) for (text,) in cursor.fetchall()]
    return texts


def store_a_session() -> DjangoSessionService:
    service = adk.DjangoSessionService()
    session = run(service.create_session, app_name="shop", user_id="u", session_id="s", state=STATE)
    run(service.append_event, session, event(text="hi", delta=DELTA))
    return service


def read_back(service: DjangoSessionService) -> dict[str, Any]:
    got = run(service.get_session, app_name="shop", user_id="u", session_id="s")
    assert got is not None
    (listed,) = run(service.list_sessions, app_name="shop").sessions
    assert listed.state == got.state
    user = run(service.get_user_state, app_name="shop", user_id="u")
    assert user == {"name": "user-secret", "city": "user-later"}
    return dict(got.state)


@pytest.mark.django_db
def test_with_encryption_on_every_scope_of_state_is_sealed_and_reads_back() -> None:
    with override_settings(ANVIA_DJANGO=encryption()):
        service = store_a_session()
        assert read_back(service) == STATE | DELTA
    texts = raw_states()
    assert len(texts) == 3
    for text in texts:
        assert text.startswith(ENVELOPE_PREFIX)
        for word in ("secret", "later", "motto", "cart", "city"):
            assert word not in text


@pytest.mark.django_db
def test_a_sealed_state_moved_to_another_row_does_not_open() -> None:
    from anvia_django.encryption.envelope import DecryptionError

    with override_settings(ANVIA_DJANGO=encryption()):
        service = store_a_session()
        other = run(service.create_session, app_name="shop", user_id="u", session_id="t")
        sealed = AdkSession.objects.get(conversation__session_id="s").state
        AdkSession.objects.filter(conversation__session_id="t").update(state=sealed)
        with pytest.raises(DecryptionError):
            run(service.get_session, app_name="shop", user_id="u", session_id=other.id)


def key_ids(model: type[Model]) -> set[int]:
    return {state["dk"] for state in model._default_manager.values_list("state", flat=True)}


@pytest.mark.django_db(transaction=True)
def test_state_survives_a_reencryption_without_the_old_master_key() -> None:
    with override_settings(ANVIA_DJANGO=encryption("k1", k1=KEY_1)):
        store_a_session()
        before = key_ids(AdkSession) | key_ids(AdkUserState) | key_ids(AdkAppState)
    with override_settings(ANVIA_DJANGO=encryption("k2", k1=KEY_1, k2=KEY_2)):
        call_command("anvia_memory", "rotate-keys", "--reencrypt", verbosity=0, stdout=StringIO())
    with override_settings(ANVIA_DJANGO=encryption("k2", k2=KEY_2)):  # k1 gone
        assert read_back(adk.DjangoSessionService()) == STATE | DELTA
        after = key_ids(AdkSession) | key_ids(AdkUserState) | key_ids(AdkAppState)
    assert not before & after
