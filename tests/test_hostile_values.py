"""Hostile values for the admin's filters and transcript paging, the API's
parameters and ``anvia_memory``: each gets a clear answer (a page, a 400, a
``CommandError``, exit status 1), never a 500 or a traceback."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from io import StringIO
from pathlib import Path

import pytest
from django.contrib import admin
from django.contrib.admin.options import IS_POPUP_VAR, TO_FIELD_VAR
from django.contrib.admin.views.main import ALL_VAR, ERROR_FLAG, ORDER_VAR, PAGE_VAR, SEARCH_VAR
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client, RequestFactory, override_settings

from anvia_django.api.params import RESERVED_PARAMS, metadata_params
from anvia_django.core.memory import InvalidMemoryInputError, MemoryContext, MemoryErrorInput
from anvia_django.management import memory_ops
from anvia_django.models import AgentRun, Conversation, FailedRun, MemoryMessage, MemorySummary
from anvia_django.persistence import append_messages, record_failed_run
from tests.helpers import append_input, assistant, user

from .api_client import LIST_URL, detail_url, messages_url
from .inspector_data import make_conversations, make_messages
from .inspector_records import make_runs, make_summaries

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.django_db


def staff_client() -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw"))
    return client


HOSTILE_PAGES = {
    "superscript two": ("²", 1),  # isdigit() is True, int() refuses it
    "Arabic-Indic digits": ("\u0663", 1),
    "5001 digits": ("9" * 5001, "last"),
    "5001 digits, leading zeros": ("0" * 4999 + "12", "last"),
    "a 64-bit overflow": (str(2**63), "last"),
    "negative": ("-1", 1),
    "a float": ("1.5", 1),
    "spaces": (" 2 ", 1),
    "empty": ("", 1),
    "NUL": ("\x00", 1),
}


@pytest.mark.parametrize(("raw", "shown"), HOSTILE_PAGES.values(), ids=HOSTILE_PAGES.keys())
def test_hostile_transcript_page_numbers_answer_a_page(raw: str, shown: int | str) -> None:
    conversation = make_conversations(1, prefix="paged")[0]
    make_messages(conversation, 250)  # 3 pages of 100
    response = staff_client().get(
        f"/admin/anvia_django/conversation/{conversation.pk}/change/", {"page": raw}
    )
    assert response.status_code == 200
    page = response.context["transcript_page"]
    assert page.number == (page.count if shown == "last" else shown)
    assert page.count == 3


NUL_VALUES = ("\x00", "acme\x00' OR '1'='1")
"""PostgreSQL cannot bind text holding U+0000 (its driver raises DataError)."""

TENANT_SCOPE = {"SCOPE": {"user_id": True, "metadata_keys": ["tenant_id"]}}
ADMIN_MODELS = (Conversation, MemoryMessage, AgentRun, FailedRun, MemorySummary)
LIST_CONTROLS = (SEARCH_VAR, ORDER_VAR, PAGE_VAR, ALL_VAR, ERROR_FLAG, TO_FIELD_VAR, IS_POPUP_VAR)
LINKED_LOOKUPS = ("conversation__id__exact", "forked_from__id__exact")
"""Lookups the app's own links put in changelist URLs."""


@pytest.fixture
def every_record() -> Conversation:
    """A conversation with a row in every table the admin and the API list."""
    tenant = {"tenant_id": "acme"}
    append_messages(
        append_input("hostile", [user("q"), assistant("a")], user_id="u1", metadata=tenant)
    )
    conversation = Conversation.objects.get(session_id="hostile")
    make_runs(conversation, 2)
    make_summaries(conversation, 1)
    context = MemoryContext("hostile", user_id="u1", metadata=tenant)
    record_failed_run(MemoryErrorInput(context, "run-9", RuntimeError("x"), []))
    return conversation


def admin_parameters(model: type, superuser: User) -> list[str]:
    """Every parameter of ``model``'s changelist: its filters' (read from
    the admin, so a filter added later is covered), the list's controls and
    the lookups of the app's own links."""
    request = RequestFactory().get("/")
    request.user = superuser
    changelist = admin.site.get_model_admin(model).get_changelist_instance(request)
    filters = [
        name for spec in changelist.filter_specs for name in spec.expected_parameters() if name
    ]
    assert filters or model in (FailedRun, MemorySummary), model
    return [*filters, *LIST_CONTROLS, *LINKED_LOOKUPS]


@override_settings(ANVIA_DJANGO=TENANT_SCOPE)
def test_nul_in_any_admin_filter_or_parameter_is_never_a_500(every_record: Conversation) -> None:
    root = User.objects.create_superuser("root", password="pw")
    client = Client(raise_request_exception=False)
    client.force_login(root)
    answers: dict[tuple[str, str, str], int] = {}
    for model in ADMIN_MODELS:
        url = f"/admin/anvia_django/{model._meta.model_name}/"
        parameters = admin_parameters(model, root)
        if model is Conversation:
            assert "scope_tenant_id" in parameters  # the tenant filter is swept too
        for name in parameters:
            for value in NUL_VALUES:
                answers[url, name, value] = client.get(url, {name: value}).status_code
        answers[url, "\x00", "x"] = client.get(url, {"\x00": "x"}).status_code
    page = f"/admin/anvia_django/conversation/{every_record.pk}/change/"
    for url, name in ((page, "page"), (f"{page}media/0/0/", "item")):
        for value in NUL_VALUES:
            answers[url, name, value] = client.get(url, {name: value}).status_code
    assert {key: status for key, status in answers.items() if status >= 500} == {}
    # A refused filter is the admin's "invalid lookup" redirect.
    assert answers["/admin/anvia_django/memorymessage/", "role", "\x00"] == 302


@override_settings(ANVIA_DJANGO=TENANT_SCOPE)
def test_nul_in_any_api_parameter_is_a_json_answer_never_a_500(
    every_record: Conversation,
) -> None:
    client = Client(raise_request_exception=False)
    client.force_login(User.objects.create_superuser("root", password="pw"))
    ref = every_record.ref
    urls = [
        "/anvia/api/",
        LIST_URL,
        detail_url(ref),
        messages_url(ref),
        *(f"{detail_url(ref)}{action}/" for action in ("runs", "lineage", "summaries")),
        f"{messages_url(ref)}0/media/0/",
    ]
    parameters = sorted({*RESERVED_PARAMS, *metadata_params(), "item"})
    assert "tenantId" in parameters
    answers: dict[tuple[str, str, str], int] = {}
    for url in urls:
        for name in parameters:
            for value in NUL_VALUES:
                response = client.get(url, {name: value})
                answers[url, name, value] = response.status_code
                if response.status_code >= 400:
                    assert response["Content-Type"].startswith("application/json"), (url, name)
    assert {key: status for key, status in answers.items() if status >= 500} == {}
    assert answers[LIST_URL, "tenantId", "\x00"] == 400
    assert answers[LIST_URL, "q", "\x00"] == 400


def memory(*args: str) -> str:
    out = StringIO()
    call_command("anvia_memory", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


HOSTILE_ARGUMENTS = {
    "limit past 64 bits": (("list", "--limit", str(2**63 - 1)), "at most 2147483647"),
    "limit of 5001 digits": (("list", "--limit", "9" * 5001), "at most 2147483647"),
    "a very negative limit": (("list", "--limit", str(-(2**63))), "at least 1"),
    "a superscript limit": (("list", "--limit", "²"), "not a whole number"),
    "batch size past 32 bits": (("export", "--batch-size", str(2**31)), "at most"),
    "a user id that is not UTF-8": (("list", "--user", "caf\udce9"), "not valid UTF-8"),
    "a session id that is not UTF-8": (("show", "\udcff"), "not valid UTF-8"),
    "an output name that is not UTF-8": (("export", "-o", "out\udcff.jsonl"), "not valid UTF-8"),
    "a NUL in a user id": (("clear", "--user", "a\x00b", "--yes"), "NUL"),
    "the day after the last one": (("usage", "--until", "9999-12-31"), "last day a date"),
    "before the year 1 in UTC": (
        ("usage", "--since", "0001-01-01T00:00+05:00"),
        "outside the years 1 to 9999",
    ),
    "after the year 9999 in UTC": (
        ("usage", "--until", "9999-12-31T23:00-05:00"),
        "outside the years 1 to 9999",
    ),
}


@pytest.mark.parametrize(("args", "says"), HOSTILE_ARGUMENTS.values(), ids=HOSTILE_ARGUMENTS.keys())
def test_hostile_command_arguments_are_a_command_error(args: tuple[str, ...], says: str) -> None:
    with pytest.raises(CommandError, match=says):
        memory(*args)


def test_an_id_the_store_refuses_later_is_a_command_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise InvalidMemoryInputError("contains U+0000", path="user_id")

    monkeypatch.setattr(memory_ops, "list_conversations", refuse)
    with pytest.raises(CommandError, match="user_id: contains U"):
        memory("list", "--user", "u1")


def seed(session_id: str, *, user_id: str | None = None) -> None:
    append_messages(append_input(session_id, [user("q"), user("q2")], run_id="r1", user_id=user_id))


def test_export_to_a_directory_is_a_command_error_and_writes_nothing(tmp_path: Path) -> None:
    seed("s-1")
    with pytest.raises(CommandError, match="is a directory"):
        memory("export", "--output", str(tmp_path))
    assert list(tmp_path.iterdir()) == []


def test_clear_dry_run_reports_and_deletes_nothing() -> None:
    for session in ("a-1", "a-2"):
        seed(session, user_id="alice")
    seed("b-1", user_id="bob")

    said = memory("clear", "--user", "alice", "--dry-run")
    assert said.strip() == (
        "Would delete 2 conversations (4 messages) of user 'alice' (dry run; nothing deleted)."
    )
    said = memory("clear", "--session", "b-1", "--dry-run")
    assert "Would delete 1 conversation (2 messages): session 'b-1'" in said
    assert Conversation.objects.count() == 3
    assert "nothing deleted" in memory("clear", "--user", "nobody", "--dry-run")


def run_manage(*args: bytes, env: dict[str, str], **kwargs: object) -> subprocess.Popen[bytes]:
    return subprocess.Popen(  # type: ignore[call-overload, no-any-return]
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, **kwargs
    )


# The shell tests run the example project on a SQLite file of its own and
# never touch the test database: where that is a server, they would only
# repeat the SQLite cells' run.
from_the_shell = pytest.mark.sqlite


@pytest.fixture(scope="module")
def demo_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The example project on a scratch SQLite file, migrated, with one
    conversation: what an operator's shell sees. The shell tests only read it."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "example_project.settings",
        "ANVIA_DEMO_SQLITE": str(tmp_path_factory.mktemp("demo") / "demo.sqlite3"),
    }
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    seed = (
        "import django; django.setup()\n"
        "from anvia_django.persistence import append_messages\n"
        "from tests.helpers import append_input, user\n"
        "append_messages(append_input('s-1', [user('hi')], run_id='r1'))\n"
    )
    subprocess.run([sys.executable, "-c", seed], cwd=ROOT, env=env, check=True)
    return env


@from_the_shell
def test_from_the_shell_a_bad_argument_exits_1_without_a_traceback(
    demo_env: dict[str, str],
) -> None:
    for args in (
        [b"anvia_memory", b"list", b"--user", b"caf\xe9"],  # Latin-1, not UTF-8
        [b"anvia_memory", b"list", b"--limit", b"9223372036854775807"],
        [b"anvia_memory", b"export", b"--output", b"/"],
    ):
        child = run_manage(*args, env=demo_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _, err = child.communicate(timeout=60)
        assert child.returncode == 1, (args, err)
        assert b"Traceback" not in err
        assert b"error" in err.lower()


@from_the_shell
def test_export_into_a_closed_pipe_ends_quietly(demo_env: dict[str, str]) -> None:
    # ``export | head -1`` where head has already gone: closing our end
    # before the child writes makes its first write fail, deterministically.
    child = run_manage(
        b"anvia_memory",
        b"export",
        env=demo_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None
    assert child.stderr is not None
    child.stdout.close()
    with child.stderr:
        err = child.stderr.read()
    assert child.wait(timeout=60) == 141  # 128 + SIGPIPE, as `cat` ends
    assert err == b""


def test_usage_over_the_whole_calendar_answers() -> None:
    seed("s-1")
    assert "No runs in that range." in memory(
        "usage", "--since", "0001-01-01", "--until", "9999-12-30"
    )


def test_export_to_a_fifo_writes_through_it_and_leaves_it_a_fifo(tmp_path: Path) -> None:
    seed("s-1")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    memory("export", "--output", str(fifo))
    reader.join(timeout=30)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    lines = received[0].decode().splitlines()
    assert len(lines) == 3  # the conversation and its two messages
    assert json.loads(lines[0])["sessionId"] == "s-1"


def test_export_through_a_symlink_replaces_the_file_it_names_not_the_link(
    tmp_path: Path,
) -> None:
    seed("s-1")
    real = tmp_path / "real.jsonl"
    real.write_text("old\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    memory("export", "--output", str(link))
    assert link.is_symlink()
    assert os.readlink(link) == str(real)
    assert len(real.read_text().splitlines()) == 3
    # A dangling link: the file it names is created.
    (tmp_path / "dangling.jsonl").symlink_to(tmp_path / "new.jsonl")
    memory("export", "--output", str(tmp_path / "dangling.jsonl"))
    assert (tmp_path / "dangling.jsonl").is_symlink()
    assert len((tmp_path / "new.jsonl").read_text().splitlines()) == 3


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_export_to_a_full_device_is_a_command_error_and_the_device_stays(tmp_path: Path) -> None:
    seed("s-1")
    # Through a link of the test's own: were the export to replace what it
    # writes to, it would replace the link, never the machine's device.
    device = tmp_path / "full"
    device.symlink_to("/dev/full")
    with pytest.raises(CommandError, match="No space left on device"):
        memory("export", "--output", str(device))
    assert os.readlink(device) == "/dev/full"
    assert stat.S_ISCHR(os.stat(device).st_mode)


@from_the_shell
@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_export_to_a_full_stdout_from_the_shell_is_one_line_without_a_traceback(
    demo_env: dict[str, str],
) -> None:
    with open("/dev/full", "wb") as full:
        child = run_manage(
            b"anvia_memory", b"export", env=demo_env, stdout=full, stderr=subprocess.PIPE
        )
        _, err = child.communicate(timeout=60)
    assert child.returncode == 1
    assert b"Traceback" not in err
    assert b"No space left on device" in err
    assert err.count(b"\n") == 1
