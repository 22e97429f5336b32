"""LangGraph's threads in the inspector API: the thread list newest first,
a thread's checkpoint history and a checkpoint decoded, each paged by
keyset in a number of queries that does not grow with the rows; 404 for
what is not stored; the API's permissions and the tenant gate.

One small set of threads, written once for the module (graph runs cost
more than the requests that read them): each test only reads it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import Permission, User
from django.test import override_settings
from rest_framework.test import APIClient

from anvia_django.encryption.envelope import DecryptionError
from anvia_django.integrations.langgraph import DjangoSaver
from anvia_django.integrations.langgraph.models import LangGraphCheckpoint
from anvia_django.integrations.langgraph.scopes import escape, scoped_thread_id, thread_scope
from anvia_django.persistence.threads.dispatch import close_db_threads
from tests.api_client import follow_all, next_url
from tests.encryption.support import encryption

from .langgraph_support import chat_graph, thread

pytestmark = pytest.mark.django_db

THREADS = "/anvia/api/langgraph/threads/"
RESTRICTED = {
    "SCOPE": {"user_id": True, "metadata_keys": ["tenant_id"]},
    "STAFF_TENANTS": "tests.test_staff_tenants.tenants_for",
}
ACME = scoped_thread_id("chat", user_id="ana@example.com", tenant="acme")  # holds "%2E"
OTHER_TENANT = scoped_thread_id("chat", user_id="u1", tenant="acme2")
SEEDED = ("t-one", "t-many", "t-review", "t-copy", ACME, OTHER_TENANT)


def history_url(thread_id: str) -> str:
    return f"{THREADS}{quote(thread_id, safe='')}/"


def checkpoint_url(thread_id: str, checkpoint_id: str) -> str:
    return f"{history_url(thread_id)}checkpoints/{checkpoint_id}/"


@pytest.fixture(scope="module")
def seeded(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    """t-one (one turn), t-many (three), t-review (a turn waiting for a
    human: a pending interrupt), t-copy (t-many copied: the same checkpoint
    ids in another thread, a tie in the thread list) and t-one copied to a
    thread of tenant acme and one of tenant acme2."""
    with django_db_blocker.unblock():
        saver = DjangoSaver()
        try:
            for thread_id, texts in (("t-one", ["hello"]), ("t-many", ["one", "two", "three"])):
                graph = chat_graph(saver)
                for text in texts:
                    async_to_sync(graph.ainvoke)({"messages": [("user", text)]}, thread(thread_id))
            review = chat_graph(saver, review=True)
            async_to_sync(review.ainvoke)({"messages": [("user", "refund 42")]}, thread("t-review"))
            saver.copy_thread("t-many", "t-copy")
            for scoped in (ACME, OTHER_TENANT):
                saver.copy_thread("t-one", scoped)
            yield
        finally:
            for thread_id in SEEDED:
                saver.delete_thread(thread_id)
            close_db_threads()


def checkpoint_ids(thread_id: str) -> list[str]:
    rows = LangGraphCheckpoint.objects.filter(thread_id=thread_id)
    return list(rows.order_by("-checkpoint_id").values_list("checkpoint_id", flat=True))


def newest_first() -> list[str]:
    """The seeded threads by their newest checkpoint id, then thread id, descending."""
    return sorted(SEEDED, key=lambda t: (checkpoint_ids(t)[0], t), reverse=True)


@pytest.mark.usefixtures("seeded")
def test_threads_are_listed_newest_first_and_paged_in_one_query_a_page(
    staff: APIClient, django_assert_num_queries: Any
) -> None:
    assert checkpoint_ids("t-copy")[0] == checkpoint_ids("t-many")[0]  # the tie is there

    with django_assert_num_queries(1):
        everything = staff.get(THREADS)
    with django_assert_num_queries(1):
        one = staff.get(THREADS, {"threadId": "t-one"})
    pages = follow_all(staff, f"{THREADS}?limit=1")

    assert [row["threadId"] for row in everything.json()] == newest_first()
    assert [[row["threadId"] for row in page] for page in pages] == [[t] for t in newest_first()]
    (row,) = one.json()
    assert row["threadId"] == "t-one"
    assert row["checkpointCount"] == len(checkpoint_ids("t-one"))
    assert row["latestCheckpointId"] == checkpoint_ids("t-one")[0]
    assert row["updatedAt"].endswith("+00:00")


@pytest.mark.usefixtures("seeded")
def test_a_threads_history_is_paged_newest_first_in_one_query_a_page(
    staff: APIClient, django_assert_num_queries: Any
) -> None:
    for thread_id in ("t-one", "t-many"):
        with django_assert_num_queries(1):
            response = staff.get(history_url(thread_id), {"limit": 2})
        assert response.status_code == 200
        assert next_url(response) is not None  # each has more than two checkpoints
    pages: list[Any] = follow_all(staff, f"{history_url('t-many')}?limit=2")  # objects

    assert {page["threadId"] for page in pages} == {"t-many"}
    shown = [checkpoint for page in pages for checkpoint in page["checkpoints"]]
    assert [c["checkpointId"] for c in shown] == checkpoint_ids("t-many")
    oldest, newest = shown[-1], shown[0]
    assert (oldest["source"], oldest["step"], oldest["parentCheckpointId"]) == ("input", -1, None)
    assert newest["source"] == "loop"
    assert newest["parentCheckpointId"] == shown[1]["checkpointId"]
    assert newest["checkpointNs"] == ""
    assert newest["createdAt"].endswith("+00:00")


@pytest.mark.usefixtures("seeded")
def test_a_checkpoint_shows_its_messages_values_and_writes_decoded(
    staff: APIClient, django_assert_max_num_queries: Any
) -> None:
    latest = checkpoint_ids("t-review")[0]

    with django_assert_max_num_queries(4):  # the row, the values, their chains, the writes
        response = staff.get(checkpoint_url("t-review", latest))

    assert response.status_code == 200
    body = response.json()
    assert (body["threadId"], body["checkpointId"], body["checkpointNs"]) == (
        "t-review",
        latest,
        "",
    )
    messages = body["transcripts"]["messages"]
    assert [(m["position"], m["message"]["role"], m["message"]["content"]) for m in messages] == [
        (0, "user", "refund 42"),
        (1, "assistant", "reply 1"),
    ]
    assert messages[0]["message"]["langchain"]["type"] == "human"  # the stored form
    assert "messages" not in body["channelValues"]
    (interrupt,) = [w for w in body["pendingWrites"] if w["channel"] == "__interrupt__"]
    assert "send this reply?" in str(interrupt["value"])
    assert body["metadata"]["step"] == body["step"]


@pytest.mark.usefixtures("seeded")
def test_a_checkpoint_costs_the_same_queries_in_a_short_and_a_long_thread(
    staff: APIClient, django_assert_num_queries: Any
) -> None:
    short, long = (checkpoint_url(t, checkpoint_ids(t)[0]) for t in ("t-one", "t-many"))
    with django_assert_num_queries(4):  # the row, the values, their chains, the writes
        assert staff.get(short).status_code == 200
    with django_assert_num_queries(4):
        assert staff.get(long).status_code == 200


@pytest.mark.usefixtures("seeded")
def test_what_is_not_stored_is_a_404_and_bad_parameters_a_400(staff: APIClient) -> None:
    latest = checkpoint_ids("t-one")[0]
    for url, params in [
        (history_url("nope"), {}),
        (history_url("t-one\x00"), {}),
        (checkpoint_url("t-one", "nope"), {}),
        (checkpoint_url("nope", latest), {}),
        (checkpoint_url("t-one", latest), {"checkpointNs": "child"}),
    ]:
        response = staff.get(url, params)
        assert response.status_code == 404, url
        assert "detail" in response.json()
    assert staff.get(THREADS, {"threadId": "nope"}).json() == []
    assert staff.get(checkpoint_url("t-one", latest), {"checkpointNs": ""}).status_code == 200

    assert "cursor" in staff.get(THREADS, {"cursor": "forged"}).json()
    assert "limit" in staff.get(history_url("t-one"), {"limit": "0"}).json()
    assert "thread_id" in staff.get(THREADS, {"thread_id": "t-one"}).json()  # misspelt: refused
    # A cursor of the history is refused by the list.
    history_cursor = next_url(staff.get(history_url("t-many"), {"limit": 1}))
    assert history_cursor is not None
    cursor = history_cursor.split("cursor=")[1].split("&")[0]
    assert staff.get(THREADS, {"cursor": cursor}).status_code == 400


@pytest.mark.usefixtures("seeded")
def test_the_root_links_the_threads_and_a_browser_reads_them(staff: APIClient) -> None:
    links = staff.get("/anvia/api/").json()
    assert links["langgraphThreads"] == f"http://testserver{THREADS}"
    for url in urls():  # and a browser gets the browsable page of each
        paged = {"limit": "1"} if url == THREADS else {}
        page = staff.get(url, {"format": "api", **paged})
        assert page.status_code == 200
        assert "text/html" in page["Content-Type"]
    crumbs = page.content.decode().split('class="breadcrumb"')[1].split("</ul>")[0]
    names = re.findall(r"<a [^>]*>([^<]+)</a>", crumbs)
    assert names[-3:] == ["LangGraph threads", "LangGraph thread", "LangGraph checkpoint"]


def urls() -> list[str]:
    return [THREADS, history_url("t-one"), checkpoint_url("t-one", checkpoint_ids("t-one")[0])]


@pytest.mark.usefixtures("seeded")
def test_the_apis_permissions_apply(client: Any) -> None:
    client.force_login(User.objects.create_user("someone"))  # not staff
    assert {client.get(url).status_code for url in urls()} == {403}

    rule = {"INSPECTOR_PERMISSION_CLASSES": ["anvia_django.api.permissions.AdminViewPermission"]}
    with override_settings(ANVIA_DJANGO=rule):
        staff = User.objects.create_user("viewer", is_staff=True)
        client.force_login(staff)
        assert {client.get(url).status_code for url in urls()} == {403}
        staff.user_permissions.set(Permission.objects.filter(codename="view_langgraphcheckpoint"))
        client.force_login(User.objects.get(pk=staff.pk))  # permissions cached on the user
        assert {client.get(url).status_code for url in urls()} == {200}


@pytest.mark.usefixtures("seeded")
@override_settings(ANVIA_DJANGO=RESTRICTED)
def test_staff_limited_to_tenants_see_their_tenants_threads_alone() -> None:
    superuser, acme = APIClient(), APIClient()
    superuser.force_authenticate(User.objects.create_user("root", is_staff=True, is_superuser=True))
    acme.force_authenticate(User.objects.create_user("acme-staff", is_staff=True))
    acme_latest = checkpoint_ids(ACME)[0]

    assert len(superuser.get(THREADS).json()) == len(SEEDED)  # may see every tenant
    assert {superuser.get(url).status_code for url in urls()} == {200}
    assert [row["threadId"] for row in acme.get(THREADS).json()] == [ACME]
    assert acme.get(history_url(ACME)).status_code == 200
    assert acme.get(checkpoint_url(ACME, acme_latest)).status_code == 200
    assert [acme.get(url).status_code for url in urls()[1:]] == [404, 404]  # t-one
    assert acme.get(history_url(OTHER_TENANT)).status_code == 404


@pytest.mark.usefixtures("seeded")
@override_settings(ANVIA_DJANGO={"INSPECTOR_OWNER_MODE": True})
def test_owner_mode_shows_the_callers_threads_alone(staff: APIClient) -> None:
    mine = scoped_thread_id("mine", user_id=str(User.objects.get(username="staff").pk))
    DjangoSaver().copy_thread("t-one", mine)

    assert [row["threadId"] for row in staff.get(THREADS).json()] == [mine]
    assert staff.get(history_url(mine)).status_code == 200
    assert [staff.get(url).status_code for url in urls()[1:]] == [404, 404]  # t-one
    assert staff.get(history_url(ACME)).status_code == 404  # ana's


OWNER = "bób.1+(x)"  # not ASCII, a dot to escape, and regular expression syntax


def owner(request: Any) -> str:
    return OWNER


@pytest.mark.usefixtures("seeded")
@override_settings(ANVIA_DJANGO={"INSPECTOR_OWNER_MODE": True, "INSPECTOR_USER_RESOLVER": owner})
def test_owner_mode_reads_the_user_as_thread_scope_does(staff: APIClient) -> None:
    mine = [
        scoped_thread_id("chát 😀", user_id=OWNER),
        scoped_thread_id("chat", user_id=OWNER, tenant="äcme"),
    ]
    named = f"u={escape(OWNER)}:"
    others = [
        scoped_thread_id("chat", user_id=OWNER.upper(), tenant="acme"),  # another user
        f"anvia:t=x:foo:{named}bar",  # not the form: no user (thread_scope)
        f"anvia:{named}a:b",
        f"anvia:t=acme:{named}a.b",  # an unescaped dot
        f"anvia:{named}",  # no thread
    ]
    for thread_id in mine + others:
        DjangoSaver().copy_thread("t-one", thread_id)
    assert {thread_scope(t).user_id for t in others} == {None, OWNER.upper()}

    assert sorted(row["threadId"] for row in staff.get(THREADS).json()) == sorted(mine)
    assert [staff.get(history_url(t)).status_code for t in others] == [404] * len(others)


@pytest.mark.usefixtures("seeded")
def test_a_value_that_does_not_open_is_the_documented_500(
    staff: APIClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def altered(*args: Any, **kwargs: Any) -> Any:
        raise DecryptionError("altered")

    monkeypatch.setattr("anvia_django.api.langgraph.shown_checkpoint", altered)
    with override_settings(ANVIA_DJANGO=encryption()):
        response = staff.get(urls()[2])

    assert response.status_code == 500
    assert response.json() == {
        "detail": "The value of this checkpoint cannot be opened (DecryptionError).",
        "code": "unreadable_record",
        "record": "value",
        "position": None,
        "errorType": "DecryptionError",
    }
