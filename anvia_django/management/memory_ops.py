"""The work behind each ``anvia_memory`` subcommand.

The command module parses arguments; these functions check what the
arguments mean, call :mod:`anvia_django.persistence` and report. User
mistakes raise :class:`~django.core.management.CommandError` before anything
is read or deleted.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import TextIO

from django.core.management import CommandError
from django.core.management.base import OutputWrapper
from django.utils import timezone

from anvia_django.core.memory.types import MemoryConversationSummary
from anvia_django.integrations.langgraph.removal import ThreadCounts
from anvia_django.persistence import (
    ConversationFilter,
    DeletionCounts,
    ExportedAdkState,
    ExportedMessage,
    count_conversations,
    delete_matching_conversations,
    erase_user_conversations,
    get_conversation_with_messages,
    iter_export_records,
    list_conversation_summaries,
    resolve_conversation,
)

from . import langgraph_ops
from .jsonl import record_json
from .pipes import closed_stdout, quiet_stdout
from .progress import Progress, plain
from .tenants import NO_TENANT, TenantChoice, describe, require_one_tenant
from .transcript import render_transcript, terminal_safe

Confirm = Callable[[str], bool]
"""Asks the operator a yes/no question; only called in interactive mode."""


def list_conversations(out: OutputWrapper, *, user_id: str | None, limit: int) -> None:
    summaries = list_conversation_summaries(limit, user_id)
    if not summaries:
        out.write("No conversations.")
        return
    out.write(f"{'UPDATED':<25}  {'REF':<22}  {'MESSAGES':>8}  {'USER':<20}  SESSION")
    for s in summaries:
        updated = s.updated_at.isoformat(timespec="seconds")
        user = s.user_id if s.user_id is not None else "-"
        line = f"{updated:<25}  {s.ref:<22}  {s.message_count:>8}  {user:<20}  {s.session_id}"
        out.write(terminal_safe(line))


def show_conversation(out: OutputWrapper, *, session: str) -> None:
    summary = _require_conversation(session)
    conversation = get_conversation_with_messages(summary.ref)
    if conversation is None:  # cleared between the two reads
        raise CommandError(f"No conversation has the session id or ref {session!r}.")
    for line in render_transcript(conversation):
        out.write(terminal_safe(line))


def export_conversations(
    out: OutputWrapper,
    err: OutputWrapper,
    *,
    session: str | None,
    user_id: str | None,
    output: Path | None,
    batch_size: int,
    verbosity: int,
    tenants: TenantChoice = NO_TENANT,
    thread: str | None = None,
) -> None:
    # JSON Lines on stdout must stay clean, so reports go to stderr there.
    report = err if output is None else out
    graph = langgraph_ops.NOTHING
    selection: ConversationFilter | None
    if thread is not None:
        selection = None
        graph = langgraph_ops.plan_thread(report, thread, tenants)
    elif session is not None:
        selection = ConversationFilter(ref=_require_conversation(session, tenants).ref)
    else:
        selection = ConversationFilter(user_id=user_id, metadata=tenants.metadata)
        subject = "The conversations" if user_id is None else f"User {user_id!r}'s conversations"
        require_one_tenant(selection, tenants, subject=subject, verb="export", done="exported")
        whose = "The" if user_id is None else f"User {user_id!r}'s"
        graph = langgraph_ops.plan_for_user(
            report,
            user_id,
            tenants,
            subject=f"{whose} LangGraph threads and store items",
            verb="export",
        )
    progress = Progress(err, verbosity, label="Exporting")
    records = _Export(selection, graph, batch_size, progress)
    if output is None:
        try:
            counts = _write_records(out, records)
            # Now, not at exit: a reader that has gone away (``| head -1``) must
            # surface while the command can still end quietly, and before the report.
            out.flush()
        except BrokenPipeError:
            raise
        except OSError as error:  # a full disk, a closed descriptor (``> /dev/full``)
            if closed_stdout(out):
                quiet_stdout()  # or Python reports the failed flush again at exit
            raise CommandError(
                f"Cannot write the export to standard output: {error.strerror or error}."
            ) from None
    else:
        counts = _export_to_file(output, records)
    progress.done()
    if verbosity >= 1:
        target = "" if output is None else f" to {output}"
        summary = (
            f"{_plural(counts.conversations, 'conversation')} "
            f"({_plural(counts.messages, 'message')})"
        )
        if selection is None:
            summary = langgraph_ops.describe(counts.graph)
        elif graph:
            summary += f", {langgraph_ops.describe(counts.graph)}"
        report.write(f"Exported {summary}{target}.", style_func=plain)


def clear_conversations(
    out: OutputWrapper,
    *,
    session: str | None,
    user_id: str | None,
    interactive: bool,
    confirm: Confirm,
    dry_run: bool = False,
    tenants: TenantChoice = NO_TENANT,
    thread: str | None = None,
) -> None:
    if thread is not None:
        _clear_thread(out, thread, interactive, confirm, dry_run=dry_run, tenants=tenants)
        return
    if session is not None:
        found = resolve_conversation(session, metadata=tenants.metadata)
        if found is None:
            out.write(
                f"No conversation{describe(tenants)} has the session id or ref {session!r}; "
                "nothing cleared."
            )
            return
        if dry_run:
            planned = count_conversations(ConversationFilter(ref=found.ref))
            out.write(
                f"Would delete {_describe(planned)}: session {found.session_id!r} "
                "(dry run; nothing deleted)."
            )
            return
        question = f"Delete conversation {found.session_id!r} ({found.message_count} messages)?"
        _confirm(interactive, confirm, question)
        # By ref: under a scope a session id alone may name another conversation.
        counts = delete_matching_conversations(ConversationFilter(ref=found.ref))
    else:
        assert user_id is not None  # the parser requires --session or --user
        selection = ConversationFilter(user_id=user_id, metadata=tenants.metadata)
        require_one_tenant(
            selection,
            tenants,
            subject=f"User {user_id!r}'s conversations",
            verb="delete",
            done="deleted",
        )

        graph_subject = f"User {user_id!r}'s LangGraph threads and store items"
        graph = langgraph_ops.plan_for_user(
            out, user_id, tenants, subject=graph_subject, verb="delete"
        )
        whose = f"user {user_id!r}{describe(tenants)}"
        planned = count_conversations(selection)
        graph_planned = graph.counts() if graph else None
        also = f", {langgraph_ops.describe(graph_planned)}" if graph_planned else ""
        if dry_run:
            out.write(
                f"Would delete {_describe(planned)}{also} of {whose} (dry run; nothing deleted)."
            )
            return
        if not planned.conversations and not graph:
            out.write(f"{whose[0].upper()}{whose[1:]} has no conversations; nothing cleared.")
            return
        _confirm(interactive, confirm, f"Delete {_describe(planned)}{also} of {whose}?")
        if interactive:
            # Again, as erase does: threads the user made while the prompt
            # waited go too (the conversations are read again when deleted).
            graph = langgraph_ops.plan_for_user(
                None, user_id, tenants, subject=graph_subject, verb="delete"
            )
        counts = erase_user_conversations(user_id, metadata=tenants.metadata)
        if graph:
            deleted = langgraph_ops.delete(graph)
            out.write(f"Deleted {_describe(counts)}, {langgraph_ops.describe(deleted)}.")
            return
    out.write(f"Deleted {_describe(counts)}.")


def _clear_thread(
    out: OutputWrapper,
    thread: str,
    interactive: bool,
    confirm: Confirm,
    *,
    dry_run: bool,
    tenants: TenantChoice,
) -> None:
    graph = langgraph_ops.plan_thread(out, thread, tenants)
    planned = langgraph_ops.describe(graph.counts())
    if dry_run:
        out.write(f"Would delete {planned}: {thread!r} (dry run; nothing deleted).")
        return
    _confirm(interactive, confirm, f"Delete {planned}: {thread!r}?")
    out.write(f"Deleted {langgraph_ops.describe(langgraph_ops.delete(graph))}: {thread!r}.")


def prune_conversations(
    out: OutputWrapper,
    err: OutputWrapper,
    *,
    older_than: timedelta,
    dry_run: bool,
    batch_size: int,
    interactive: bool,
    confirm: Confirm,
    verbosity: int,
    tenants: TenantChoice = NO_TENANT,
) -> None:
    try:
        cutoff = timezone.now() - older_than
    except OverflowError:
        raise CommandError("--older-than reaches before the year 1; use a shorter age.") from None
    selection = ConversationFilter(updated_before=cutoff, metadata=tenants.metadata)
    # " of tenant_id 'acme' last updated before ...", or without the tenant.
    when = f"{describe(tenants)} last updated before {cutoff.isoformat(timespec='seconds')}"
    require_one_tenant(
        selection,
        tenants,
        subject=f"The conversations{when}",
        verb="delete",
        done="deleted",
    )
    # A thread's age is its latest checkpoint's.
    written = f"{describe(tenants)} last written before {cutoff.isoformat(timespec='seconds')}"
    graph = langgraph_ops.plan_stale(
        out, cutoff, tenants, subject=f"The LangGraph threads{written}"
    )
    planned = count_conversations(selection)
    graph_planned = graph.counts() if graph else None
    also = f", {langgraph_ops.describe(graph_planned)}" if graph_planned else ""
    if dry_run:
        out.write(f"Would delete {_describe(planned)}{also}{when} (dry run; nothing deleted).")
        return
    if not planned.conversations and not graph:
        out.write(f"No conversations{when}; nothing deleted.")
        return
    _confirm(interactive, confirm, f"Delete {_describe(planned)}{also}{when}?")
    progress = Progress(err, verbosity, label="Pruning")
    if graph:
        deleted = langgraph_ops.delete(graph, batch_size=batch_size, progress=progress)
        if deleted.threads or not deleted.leftovers:
            stale = replace(deleted, leftovers=0)
            out.write(f"Deleted {langgraph_ops.describe(stale)}{written}.")
        if deleted.leftovers:
            rest = langgraph_ops.describe(ThreadCounts(leftovers=deleted.leftovers))
            out.write(f"Deleted {rest} (values without a checkpoint).")
    if not planned.conversations:
        progress.done()
        return
    done = DeletionCounts()

    def on_batch(counts: DeletionCounts) -> None:
        nonlocal done
        done += counts
        progress.update(f"{done.conversations} of about {planned.conversations} conversations")

    counts = delete_matching_conversations(selection, batch_size=batch_size, on_batch=on_batch)
    progress.done()
    out.write(f"Deleted {_describe(counts)}{when}.")


def _export_to_file(output: Path, records: _Export) -> _Exported:
    target = replaced_file(output)
    if target is None:
        # A FIFO, a device, a terminal: written to, never replaced.
        try:
            with open(output, "w", encoding="utf-8", newline="\n") as stream:
                return _write_records(stream, records)
        except OSError as error:
            raise CommandError(f"Cannot write {output}: {error.strerror or error}.") from None
    # Written beside the file and renamed at the end: a failed export
    # leaves no truncated file behind, and never half-overwrites an old one.
    directory = target.parent if str(target.parent) else Path()
    if not directory.is_dir():
        raise CommandError(f"Cannot write {output}: {directory} is not a directory.")
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as stream:
            counts = _write_records(stream, records)
        os.replace(temporary, target)
    except BaseException as error:
        with suppress(FileNotFoundError):
            os.unlink(temporary)
        if isinstance(error, OSError):
            raise CommandError(f"Cannot write {output}: {error.strerror or error}.") from None
        raise
    return counts


def replaced_file(output: Path) -> Path | None:
    """The regular file an export to ``output`` writes by replacing it: the
    file itself, or the one a symbolic link names (the link stays). ``None``
    for anything else that exists (a FIFO, a device such as ``/dev/stdout``):
    that is written to in place, never replaced."""
    try:
        mode = os.stat(output).st_mode  # through symbolic links
    except FileNotFoundError:
        mode = None
    except OSError as error:
        raise CommandError(f"Cannot write {output}: {error.strerror or error}.") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise CommandError(f"Cannot write {output}: it is a directory; name a file in it.")
    if mode is not None and not stat.S_ISREG(mode):
        return None
    return Path(os.path.realpath(output)) if output.is_symlink() else output


@dataclass(frozen=True, slots=True)
class _Export:
    """What an export writes: conversations, then LangGraph's threads and items."""

    selection: ConversationFilter | None
    """``None``: no conversations (``export --thread``)."""
    graph: langgraph_ops.GraphPlan
    batch_size: int
    progress: Progress


@dataclass(slots=True)
class _Exported:
    conversations: int = 0
    messages: int = 0
    graph: ThreadCounts = field(default_factory=ThreadCounts)


def _write_records(stream: TextIO | OutputWrapper, export: _Export) -> _Exported:
    counts = _Exported()
    batch_size, progress = export.batch_size, export.progress
    selected = export.selection
    records = () if selected is None else iter_export_records(selected, batch_size=batch_size)
    for record in records:
        _write_line(stream, record_json(record))
        if isinstance(record, ExportedMessage):
            counts.messages += 1
            if counts.messages % batch_size == 0:
                progress.update(f"{counts.conversations} conversations, {counts.messages} messages")
        elif not isinstance(record, ExportedAdkState):
            counts.conversations += 1
            if counts.conversations % batch_size == 0:
                progress.update(f"{counts.conversations} conversations, {counts.messages} messages")
    if export.graph:
        counts.graph = langgraph_ops.export(
            lambda line: _write_line(stream, line), export.graph, batch_size, progress
        )
    return counts


def _write_line(stream: TextIO | OutputWrapper, line: str) -> None:
    if isinstance(stream, OutputWrapper):
        stream.write(line)  # OutputWrapper adds the newline
    else:
        stream.write(line + "\n")


def _require_conversation(
    session: str, tenants: TenantChoice = NO_TENANT
) -> MemoryConversationSummary:
    found = resolve_conversation(session, metadata=tenants.metadata)
    if found is None:
        raise CommandError(
            f"No conversation{describe(tenants)} has the session id or ref {session!r}."
        )
    return found


def _confirm(interactive: bool, confirm: Confirm, question: str) -> None:
    if interactive and not confirm(question):
        raise CommandError("Cancelled; nothing was deleted.")


def _describe(counts: DeletionCounts) -> str:
    text = f"{_plural(counts.conversations, 'conversation')} ({_plural(counts.messages, 'message')}"
    if counts.failed_runs:
        text += f", {_plural(counts.failed_runs, 'failed run')}"
    return text + ")"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
