"""Key material never leaves the keyring (issue 35): Django's error pages
and the report it mails to admins, rendered for a data key that fails to
unwrap, hold no byte of any key in any form."""

from __future__ import annotations

import base64
import html
import os
import pickle
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.http import HttpRequest
from django.test import RequestFactory, override_settings
from django.views.debug import ExceptionReporter, technical_500_response

from anvia_django.core.memory import MemoryContext
from anvia_django.encryption.blind_index import index_key
from anvia_django.encryption.envelope import DecryptionError, cipher_of, unwrap
from anvia_django.encryption.keyring import parse_keyring
from anvia_django.encryption.keys import forget_keys
from anvia_django.encryption.secret import Secret
from anvia_django.models import DataKey
from anvia_django.persistence import append_messages, load_messages, search_messages
from tests.helpers import append_input, user

pytestmark = [pytest.mark.django_db, pytest.mark.transactional_on("mysql")]

MASTER = os.urandom(32)
OTHER = os.urandom(32)  # deployed under the same id by mistake


def setting(key: bytes) -> dict[str, Any]:
    encoded = base64.urlsafe_b64encode(key).decode()
    return {"ENCRYPTION": {"KEYS": {"k1": encoded}, "CURRENT": "k1", "BLIND_INDEX": True}}


def forms(key: bytes) -> set[str]:
    """How a key's bytes, or the first half of them, could be shown."""
    shown = set()
    for part in (key, key[:16], key[15:]):
        shown |= {
            part.hex(),
            part.hex().upper(),
            repr(part)[2:-1],
            base64.b64encode(part[: len(part) // 3 * 3]).decode(),
            base64.urlsafe_b64encode(part[: len(part) // 3 * 3]).decode(),
        }
    return shown


@pytest.fixture
def stored_keys() -> Iterator[list[bytes]]:
    """A user's message stored under MASTER, with the blind index on; every
    key's bytes: the master key, the user's data key, its index MAC key."""
    with override_settings(ANVIA_DJANGO=setting(MASTER)):
        append_messages(append_input("s", [user("the parcel number")], user_id="alice"))
        master = parse_keyring(setting(MASTER)["ENCRYPTION"]).master("k1")
        data_keys = [
            unwrap(master, "k1", owner, wrapped).reveal()
            for owner, wrapped in DataKey.objects.values_list("owner", "wrapped_key")
        ]
        assert len(data_keys) == 1
        # The blind index's MAC key of the user's messages, derived from their data key.
        index_keys = [index_key(cipher_of(Secret(key))).reveal() for key in data_keys]
        yield [MASTER, OTHER, *data_keys, *index_keys]


def a_request() -> HttpRequest:
    return RequestFactory().get("/anvia/api/conversations/?q=parcel")


def failing_view(request: HttpRequest, read: Callable[[], object]) -> Any:
    """The exception of ``read`` as a view would raise it, caught here so
    the traceback starts at this frame (which holds no key)."""
    try:
        read()
    except DecryptionError:
        return sys.exc_info()
    raise AssertionError("the read did not fail")


READS: dict[str, Callable[[], object]] = {
    "load": lambda: load_messages(MemoryContext("s", user_id="alice")),
    "append": lambda: append_messages(append_input("s", [user("more")], user_id="alice")),
    "search": lambda: search_messages("parcel", limit=5),
}


def reports(exc_info: Any) -> list[str]:
    """The DEBUG page, and the HTML and text reports mailed to admins."""
    request = a_request()
    kind, error, traceback = exc_info
    with override_settings(DEBUG=True):
        page = technical_500_response(request, kind, error, traceback).content.decode()
    with override_settings(DEBUG=False):
        mailed = ExceptionReporter(request, kind, error, traceback, is_email=True)
        shown = [mailed.get_traceback_html(), mailed.get_traceback_text()]
        plain = ExceptionReporter(request, kind, error, traceback, is_email=False)
        shown += [plain.get_traceback_html(), plain.get_traceback_text()]
    return [page, *shown]


def assert_no_key_in(rendered: list[str], keys: list[bytes]) -> None:
    # The frame holding the keyring is on the DEBUG page, shown by its ids.
    assert "<Keyring ids=['k1']" in html.unescape(rendered[0])
    for text in rendered:
        for view in (text, html.unescape(text)):
            for key in keys:
                leaked = [form for form in forms(key) if form in view]
                assert not leaked, f"key bytes shown as {leaked[0]!r}"


@pytest.mark.parametrize("read", sorted(READS))
def test_a_wrong_key_under_a_known_id_shows_no_key(stored_keys: list[bytes], read: str) -> None:
    with override_settings(ANVIA_DJANGO=setting(OTHER)):
        exc_info = failing_view(a_request(), READS[read])
        assert "'k1'" in str(exc_info[1])  # the error names the key id
        rendered = reports(exc_info)
    assert "DecryptionError" in rendered[0]
    assert_no_key_in(rendered, stored_keys)


@pytest.mark.parametrize("read", sorted(READS))
def test_an_altered_wrapped_key_shows_no_key(stored_keys: list[bytes], read: str) -> None:
    # One character of every wrapped key changed: it no longer unwraps.
    for pk, wrapped in DataKey.objects.values_list("pk", "wrapped_key"):
        altered = ("B" if wrapped[20] == "A" else "A").join((wrapped[:20], wrapped[21:]))
        DataKey.objects.filter(pk=pk).update(wrapped_key=altered)
    with override_settings(ANVIA_DJANGO=setting(MASTER)):
        forget_keys()
        exc_info = failing_view(a_request(), READS[read])
        rendered = reports(exc_info)
    assert "does not unwrap" in rendered[0]
    assert_no_key_in(rendered, stored_keys)


def test_keys_and_the_keyring_show_their_ids_only() -> None:
    ring = parse_keyring(setting(MASTER)["ENCRYPTION"])
    for shown in (repr(ring), str(ring), repr(ring.keys), f"{ring.master('k1')}"):
        assert "k1" in shown
        assert not [form for form in forms(MASTER) if form in shown]
    secret = Secret(MASTER, "test key")
    with pytest.raises(TypeError):
        pickle.dumps(secret)
