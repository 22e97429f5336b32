"""``manage.py anvia_memory``: list, read, export, erase and prune agent memory.

Argument parsing only; the work is in :mod:`anvia_django.management.memory_ops`.
"""

from __future__ import annotations

import argparse
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.core.management import BaseCommand, CommandError, CommandParser

from anvia_django.conf import ID_MAX_LENGTH
from anvia_django.management import memory_ops, usage
from anvia_django.management.durations import parse_age
from anvia_django.persistence.maintenance import DEFAULT_BATCH_SIZE

DEFAULT_LIST_LIMIT = 50


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def identifier(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    if len(text) > ID_MAX_LENGTH:
        raise argparse.ArgumentTypeError(f"must be at most {ID_MAX_LENGTH} characters")
    return text


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


class Command(BaseCommand):
    help = (
        "List, show, export, clear (erase) and prune stored agent conversations; "
        "report token usage."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(
            dest="action", required=True, metavar="{list,show,export,clear,prune,usage}"
        )

        listing = self._subcommand(actions, "list", "Conversations, most recently updated first.")
        listing.add_argument("--user", dest="user_id", type=identifier, help="Only this user's.")
        listing.add_argument(
            "--limit", type=positive_int, default=DEFAULT_LIST_LIMIT, help="At most this many."
        )

        show = self._subcommand(actions, "show", "One conversation's transcript, readably.")
        show.add_argument("session", type=identifier, help="A session id or a conversation ref.")

        export = self._subcommand(
            actions, "export", "JSON Lines: each conversation, then its messages."
        )
        which = export.add_mutually_exclusive_group()
        which.add_argument("--session", type=identifier, help="One session (id or ref).")
        which.add_argument("--user", dest="user_id", type=identifier, help="A user's sessions.")
        export.add_argument(
            "--output", "-o", type=Path, help="Write to this file instead of stdout."
        )
        self._batch_size_option(export)

        clear = self._subcommand(
            actions, "clear", "Delete a session, or every session of a user (erasure)."
        )
        target = clear.add_mutually_exclusive_group(required=True)
        target.add_argument("--session", type=identifier, help="One session (id or ref).")
        target.add_argument(
            "--user", dest="user_id", type=identifier, help="Every session of this user."
        )
        self._no_input_option(clear)

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

    def handle(self, *args: Any, **options: Any) -> None:
        action: str = options["action"]
        verbosity: int = options["verbosity"]
        if action == "list":
            memory_ops.list_conversations(
                self.stdout, user_id=options["user_id"], limit=options["limit"]
            )
        elif action == "show":
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
            )
        elif action == "clear":
            memory_ops.clear_conversations(
                self.stdout,
                session=options["session"],
                user_id=options["user_id"],
                interactive=options["interactive"],
                confirm=self._ask,
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
