"""``anvia_memory list --threads`` and ``show --thread``: LangGraph threads
as an operator reads them in a terminal.

The list is the inspector API's (``integrations/langgraph/threads.py``),
the values are decoded as the admin and the API decode them
(``decoding.py``), and messages are written as ``show`` writes a
conversation's (``transcript.py``). Both need the ``langgraph`` extra.
"""

from __future__ import annotations

from typing import Any

from django.core.management import CommandError
from django.core.management.base import OutputWrapper

from anvia_django.integrations.langgraph import maintenance
from anvia_django.integrations.langgraph.maintenance import thread_scope_of
from anvia_django.persistence.databases import read_alias

from .langgraph_ops import plan_thread
from .tenants import NO_TENANT
from .transcript import content_text, terminal_safe

NEEDS_LANGGRAPH = "{} reads LangGraph's checkpoints: install the langgraph extra."


def list_threads(out: OutputWrapper, *, user_id: str | None, limit: int) -> None:
    """Threads, the one with the newest checkpoint first (of ``user_id``:
    those whose id carries them, ``scoped_thread_id``)."""
    try:
        from anvia_django.integrations.langgraph.threads import thread_page
    except ImportError:
        raise CommandError(NEEDS_LANGGRAPH.format("list --threads")) from None
    page = thread_page(limit, tenants=None, owner=user_id)
    if not page.items:
        out.write("No LangGraph threads.")
        return
    out.write(f"{'UPDATED':<25}  {'CHECKPOINTS':>11}  THREAD")
    for thread in page.items:
        updated = thread.updated_at.isoformat(timespec="seconds")
        line = f"{updated:<25}  {thread.checkpoint_count:>11}  {thread.thread_id}"
        out.write(terminal_safe(line))


def show_thread(out: OutputWrapper, thread_id: str) -> None:
    """The thread's latest checkpoint (of the graph, not a subgraph) and
    its ``messages`` channel as a transcript; other channels by name."""
    plan_thread(out, thread_id, NO_TENANT)  # refuses an unknown thread
    try:
        from anvia_django.integrations.langgraph.decoding import SERDE, is_messages, transcript
        from anvia_django.integrations.langgraph.reads import latest_or_named
    except ImportError:
        raise CommandError(NEEDS_LANGGRAPH.format("show --thread")) from None
    config: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    found = latest_or_named(SERDE, config, using=read_alias(None))
    if found is None:
        raise CommandError(
            f"LangGraph thread {thread_id!r} has no checkpoint left (a deletion was "
            "interrupted): clear --thread, prune or sweep deletes the rest."
        )
    scope = thread_scope_of(thread_id)
    values = found.checkpoint["channel_values"]
    messages = values.get("messages")
    lines = [
        f"Thread      {thread_id}",
        f"User        {(scope.user_id if scope else None) or '-'}",
        f"Tenant      {(scope.tenant if scope else None) or '-'}",
        f"Checkpoints {maintenance.count_checkpoints([thread_id])}",
        f"Latest      {found.checkpoint['id']} (step {found.metadata.get('step', '?')}, "
        f"{found.checkpoint['ts']})",
    ]
    if messages is not None and is_messages(messages):
        lines += [f"Messages    {len(messages)}", ""]
        for entry in transcript(messages):
            lines += _message_lines(entry["position"], entry["message"])
    else:
        lines.append(f"Channels    {', '.join(sorted(values)) or '-'} (no messages)")
    for line in lines:
        out.write(terminal_safe(line))


def _message_lines(position: int, stored: dict[str, Any]) -> list[str]:
    """A message in its stored form (``message_to_stored``) as ``show``
    writes a conversation's: ``[0] user: Hi``, then its tool calls."""
    data = stored.get("langchain", {}).get("data", {})
    label = f"[{position}] {stored.get('role', '?')}"
    if stored.get("role") == "tool":
        label += f" {data.get('name') or '?'} (call {data.get('tool_call_id', '?')})"
    text = content_text(stored.get("content"))
    lines = [f"{label}: {text}" if text else label]
    for call in data.get("tool_calls") or []:
        arguments = content_text(call.get("args", {}))
        lines.append(f"    -> {call.get('name', '?')}({arguments}) [call {call.get('id', '?')}]")
    return lines
