"""``manage.py anvia_memory``: list, read, export, erase and prune agent memory.

Argument parsing only; the work is in :mod:`anvia_django.management.memory_ops`.
"""

from __future__ import annotations

import argparse
import re
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, NoReturn

from django.core.management import BaseCommand, CommandError, CommandParser

from anvia_django.conf import ID_MAX_LENGTH
from anvia_django.core.memory import InvalidMemoryInputError
from anvia_django.management import key_ops, langgraph_ops, langgraph_views, memory_ops, usage
from anvia_django.management.durations import parse_age
from anvia_django.management.pipes import EXIT_BROKEN_PIPE, closed_stdout, quiet_stdout
from anvia_django.management.tenants import add_tenant_options, tenant_choice
from anvia_django.persistence.maintenance import DEFAULT_BATCH_SIZE

DEFAULT_LIST_LIMIT = 50
# A bound every backend's LIMIT and every batch loop takes (a 64-bit value
# overflows SQLite's LIMIT arithmetic); far beyond any real listing.
MAX_COUNT = 2**31 - 1
WHOLE_NUMBER = re.compile(r"\s*(-?)([0-9]+)\s*")


def shown(text: str) -> str:
    """``text`` quoted for an error message: short, and printable even when
    the shell passed bytes that are not UTF-8 (surrogate escapes)."""
    return repr(text if len(text) <= 24 else text[:24] + "...")


def positive_int(text: str) -> int:
    # ASCII digits only: int() would also take other scripts' digits, and
    # spend its time on a 5000-digit number before refusing it.
    match = WHOLE_NUMBER.fullmatch(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"{shown(text)} is not a whole number")
    sign, digits = match.groups()
    if len(digits.lstrip("0")) > len(str(MAX_COUNT)):
        value = MAX_COUNT + 1 if not sign else 0
    else:
        value = int(sign + digits)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {shown(text.strip())}")
    if value > MAX_COUNT:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_COUNT}, not {shown(text.strip())}")
    return value


def identifier(text: str) -> str:
    if not utf8(text):
        raise argparse.ArgumentTypeError(f"{shown(text)} is not valid UTF-8 text")
    if "\x00" in text:
        raise argparse.ArgumentTypeError("must not contain NUL characters")
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    if len(text) > ID_MAX_LENGTH:
        raise argparse.ArgumentTypeError(f"must be at most {ID_MAX_LENGTH} characters")
    return text


def utf8(text: str) -> bool:
    """False for an argument the shell passed as bytes that are not UTF-8:
    Python hands those over as lone surrogates, which no database stores."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def output_path(text: str) -> Path:
    if not utf8(text):
        # The file system would take it; the messages naming it could not be printed.
        raise argparse.ArgumentTypeError(f"{shown(text)} is not valid UTF-8 text")
    return Path(text)


def start_moment(text: str) -> datetime:
    try:
        return usage.parse_moment(text, end_of_day=False)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def end_moment(text: str) -> datetime:
    try:
        return usage.parse_moment(text, end_of_day=True)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def age(text: str) -> timedelta:
    try:
        return parse_age(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


class ActionParser(CommandParser):
    """A subcommand's parser: a bad argument value exits with status 1, as
    every other refusal of this command does (``CommandError``), rather than
    argparse's 2; called from code it raises ``CommandError`` as Django's does."""

    def error(self, message: str) -> NoReturn:
        if self.called_from_command_line:
            self.print_usage(sys.stderr)
            self.exit(1, f"{self.prog}: error: {message}\n")
        raise CommandError(f"Error: {message}")


class Command(BaseCommand):
    help = (
        "List, show, export, clear (erase) and prune stored agent conversations "
        "(and LangGraph's threads and store items); sweep expired store items; "
        "report token usage; erase a user and rotate keys (encryption at rest)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(
            parser_class=ActionParser,
            dest="action",
            required=True,
            metavar="{list,show,export,clear,prune,sweep,usage,erase,rotate-keys}",
        )

        listing = self._subcommand(
            actions,
            "list",
            "Conversations, most recently updated first (or LangGraph threads).",
        )
        listing.add_argument("--user", dest="user_id", type=identifier, help="Only this user's.")
        listing.add_argument(
            "--threads",
            action="store_true",
            help="LangGraph threads instead, the newest checkpoint first (with --user: "
            "those whose id carries the user).",
        )
        listing.add_argument(
            "--limit", type=positive_int, default=DEFAULT_LIST_LIMIT, help="At most this many."
        )

        show = self._subcommand(
            actions,
            "show",
            "One conversation's transcript, or a LangGraph thread's latest messages, readably.",
        )
        show.add_argument(
            "session", nargs="?", type=identifier, help="A session id or a conversation ref."
        )
        show.add_argument(
            "--thread", type=identifier, help="A LangGraph thread id instead (its latest messages)."
        )

        export = self._subcommand(
            actions, "export", "JSON Lines: each conversation, then its messages."
        )
        which = export.add_mutually_exclusive_group()
        which.add_argument("--session", type=identifier, help="One session (id or ref).")
        which.add_argument(
            "--user",
            dest="user_id",
            type=identifier,
            help="A user's sessions (and LangGraph threads and store items).",
        )
        which.add_argument(
            "--thread", type=identifier, help="One LangGraph thread (its id), alone."
        )
        export.add_argument(
            "--output", "-o", type=output_path, help="Write to this file instead of stdout."
        )
        self._batch_size_option(export)
        add_tenant_options(export, identifier)

        clear = self._subcommand(
            actions,
            "clear",
            "Delete a session, a LangGraph thread, or every session of a user (erasure).",
        )
        target = clear.add_mutually_exclusive_group(required=True)
        target.add_argument("--session", type=identifier, help="One session (id or ref).")
        target.add_argument(
            "--thread",
            type=identifier,
            help="One LangGraph thread (its id): every checkpoint, value and pending write.",
        )
        target.add_argument(
            "--user",
            dest="user_id",
            type=identifier,
            help="Every session of this user (and LangGraph thread and store item).",
        )
        clear.add_argument(
            "--dry-run", action="store_true", help="Report what would go; delete nothing."
        )
        self._no_input_option(clear)
        add_tenant_options(clear, identifier)

        prune = self._subcommand(
            actions, "prune", "Delete conversations not updated for a while (retention)."
        )
        prune.add_argument(
            "--older-than", type=age, required=True, help="An age such as 30d, 12h or 2w."
        )
        prune.add_argument(
            "--dry-run", action="store_true", help="Report what would go; delete nothing."
        )
        self._batch_size_option(prune)
        self._no_input_option(prune)
        add_tenant_options(prune, identifier)

        sweep = self._subcommand(
            actions,
            "sweep",
            "Delete the LangGraph store items whose TTL has passed, and what interrupted "
            "deletions left of LangGraph threads.",
        )
        sweep.add_argument(
            "--dry-run", action="store_true", help="Report what would go; delete nothing."
        )
        self._batch_size_option(sweep)

        report = self._subcommand(
            actions, "usage", "Token usage per user, from the run records, over a date range."
        )
        report.add_argument("--user", dest="user_id", type=identifier, help="Only this user.")
        report.add_argument(
            "--since", type=start_moment, help="Runs started at or after this date or time (UTC)."
        )
        report.add_argument(
            "--until",
            type=end_moment,
            help="Runs started before this time; a date includes that whole day (UTC).",
        )

        erase = self._subcommand(
            actions,
            "erase",
            "Erase a user: destroy their data key (encryption at rest), then delete "
            "every session of theirs.",
        )
        erase.add_argument(
            "--user", dest="user_id", type=identifier, required=True, help="The user to erase."
        )
        self._no_input_option(erase)
        add_tenant_options(erase, identifier)

        rotate = self._subcommand(
            actions, "rotate-keys", "Re-wrap every data key under the current master key."
        )
        rotate.add_argument(
            "--reencrypt",
            action="store_true",
            help="Also give every owner whose data key was made under an earlier master key "
            "a new one, seal every message again under it (rows from before encryption "
            "too) and destroy the old keys. Resumable: run it again after an interruption.",
        )
        self._batch_size_option(rotate)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            self._run(options)
        except InvalidMemoryInputError as error:
            # An id the store refuses (a NUL, say): the store's message names
            # the part and never echoes content, so it is the operator's answer.
            raise CommandError(str(error)) from None
        except BrokenPipeError:
            if not closed_stdout(self.stdout):
                raise
            # The reader went away (``export | head``): stop as ``cat`` does.
            # Python would otherwise report the failed flush of stdout at exit.
            quiet_stdout()
            raise SystemExit(EXIT_BROKEN_PIPE) from None

    def _run(self, options: dict[str, Any]) -> None:
        action: str = options["action"]
        verbosity: int = options["verbosity"]
        if action == "list":
            lister = (
                langgraph_views.list_threads
                if options["threads"]
                else memory_ops.list_conversations
            )
            lister(self.stdout, user_id=options["user_id"], limit=options["limit"])
        elif action == "show":
            if (options["session"] is None) == (options["thread"] is None):
                raise CommandError("show takes a session id or ref, or --thread: one of them.")
            if options["thread"] is not None:
                langgraph_views.show_thread(self.stdout, options["thread"])
            else:
                memory_ops.show_conversation(self.stdout, session=options["session"])
        elif action == "export":
            memory_ops.export_conversations(
                self.stdout,
                self.stderr,
                session=options["session"],
                user_id=options["user_id"],
                output=options["output"],
                batch_size=options["batch_size"],
                verbosity=verbosity,
                tenants=tenant_choice(options),
                thread=options["thread"],
            )
        elif action == "clear":
            memory_ops.clear_conversations(
                self.stdout,
                session=options["session"],
                user_id=options["user_id"],
                interactive=options["interactive"],
                confirm=self._ask,
                dry_run=options["dry_run"],
                tenants=tenant_choice(options),
                thread=options["thread"],
            )
        elif action == "prune":
            memory_ops.prune_conversations(
                self.stdout,
                self.stderr,
                older_than=options["older_than"],
                dry_run=options["dry_run"],
                batch_size=options["batch_size"],
                interactive=options["interactive"],
                confirm=self._ask,
                verbosity=verbosity,
                tenants=tenant_choice(options),
            )
        elif action == "sweep":
            langgraph_ops.sweep(
                self.stdout, dry_run=options["dry_run"], batch_size=options["batch_size"]
            )
        elif action == "usage":
            if options["since"] and options["until"] and options["since"] >= options["until"]:
                raise CommandError("--since must be before --until.")
            usage.print_usage(
                self.stdout,
                user_id=options["user_id"],
                since=options["since"],
                until=options["until"],
            )
        elif action == "erase":
            key_ops.erase_user(
                self.stdout,
                user_id=options["user_id"],
                interactive=options["interactive"],
                confirm=self._ask,
                tenants=tenant_choice(options),
            )
        elif action == "rotate-keys":
            key_ops.rotate_keys(
                self.stdout,
                self.stderr,
                batch_size=options["batch_size"],
                reencrypt=options["reencrypt"],
                verbosity=verbosity,
            )
        else:  # argparse only lets the choices through
            raise CommandError(f"Unknown action {action!r}.")

    def _ask(self, question: str) -> bool:
        try:
            answer = input(f"{question} Type 'yes' to continue: ")
        except EOFError:
            return False
        return answer.strip().lower() == "yes"

    def _subcommand(self, actions: Any, name: str, help_text: str) -> CommandParser:
        parser: CommandParser = actions.add_parser(name, help=help_text, description=help_text)
        # Django's common options belong to the parent parser, so they would
        # have to come before the action; this one is too handy not to repeat.
        parser.add_argument(
            "-v",
            "--verbosity",
            type=int,
            choices=[0, 1, 2, 3],
            default=argparse.SUPPRESS,
            help="0 = quiet, 1 = normal, 2 = progress on every batch, 3 = very verbose.",
        )
        return parser

    def _batch_size_option(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--batch-size",
            type=positive_int,
            default=DEFAULT_BATCH_SIZE,
            help=f"Rows per query or transaction (default {DEFAULT_BATCH_SIZE}).",
        )

    def _no_input_option(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--yes",
            "--no-input",
            "--noinput",
            dest="interactive",
            action="store_false",
            help="Do not ask for confirmation.",
        )
