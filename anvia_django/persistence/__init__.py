"""The synchronous query code: the one source of truth for every read and write.

The async store, the admin, the API and the management commands all call
these functions; none of them queries the models on its own.
"""

from anvia_django.persistence.dialects.json_values import MetadataString
from anvia_django.persistence.inspector.conversations import (
    ConversationPage,
    FoundConversation,
    MarkedMessagePage,
    MessagePage,
    find_conversation,
    get_conversation_with_messages,
    list_conversation_page,
    list_conversation_summaries,
    list_failed_runs,
    list_marked_message_page,
    list_message_page,
    validate_after,
    validate_limit,
)
from anvia_django.persistence.inspector.keyset import RowKey
from anvia_django.persistence.inspector.listing_columns import (
    PreviewSource,
    message_preview_source,
    opened_preview_source,
    with_message_preview,
    with_preview_columns,
)
from anvia_django.persistence.inspector.metadata_values import (
    TenantRestriction,
    filter_by_metadata,
    restrict_to_tenants,
    validate_metadata_filter,
)
from anvia_django.persistence.inspector.row_ids import conversation_row_ids, run_row_ids
from anvia_django.persistence.inspector.search import (
    first_matching_positions,
    matching_conversations,
    search_conversation_page,
    search_message_page,
    search_messages,
    validate_query,
)
from anvia_django.persistence.inspector.unreadable import (
    OpenedFailedRun,
    UnreadableMessage,
    UnreadableRecordError,
    UnreadableSummary,
    opened_failed_run,
    opened_record_message,
    opened_summary,
    unopenable_errors,
    with_summary_text,
)
from anvia_django.persistence.lifecycle.compaction import (
    list_summaries,
    list_summary_page,
    load_through_summary,
    plan_compaction,
    write_summary,
)
from anvia_django.persistence.lifecycle.entries import load_entries
from anvia_django.persistence.lifecycle.forks import (
    conversation_lineage,
    fork_conversation,
    lineage_page,
)
from anvia_django.persistence.lifecycle.rewind import rewind_conversation
from anvia_django.persistence.lifecycle.run_records import (
    list_run_page,
    list_runs,
    record_run,
    run_totals,
    usage_by_user,
)
from anvia_django.persistence.maintenance import (
    ConversationFilter,
    ExportedAdkState,
    ExportedMessage,
    ExportRecord,
    compact_after_erase,
    count_conversations,
    delete_matching_conversations,
    erase_user_conversations,
    iter_export_records,
    resolve_conversation,
    scope_keys_of,
    tenants_of,
)
from anvia_django.persistence.transcript.append import append_messages
from anvia_django.persistence.transcript.deletion import DeletionCounts
from anvia_django.persistence.transcript.load import load_latest_messages, load_messages
from anvia_django.persistence.transcript.writes import (
    clear_conversation,
    pop_last_message,
    record_failed_run,
)

__all__ = [
    "ConversationFilter",
    "ConversationPage",
    "DeletionCounts",
    "ExportRecord",
    "ExportedAdkState",
    "ExportedMessage",
    "FoundConversation",
    "MarkedMessagePage",
    "MessagePage",
    "MetadataString",
    "OpenedFailedRun",
    "PreviewSource",
    "RowKey",
    "TenantRestriction",
    "UnreadableMessage",
    "UnreadableRecordError",
    "UnreadableSummary",
    "append_messages",
    "clear_conversation",
    "compact_after_erase",
    "conversation_lineage",
    "conversation_row_ids",
    "count_conversations",
    "delete_matching_conversations",
    "erase_user_conversations",
    "filter_by_metadata",
    "find_conversation",
    "first_matching_positions",
    "fork_conversation",
    "get_conversation_with_messages",
    "iter_export_records",
    "lineage_page",
    "list_conversation_page",
    "list_conversation_summaries",
    "list_failed_runs",
    "list_marked_message_page",
    "list_message_page",
    "list_run_page",
    "list_runs",
    "list_summaries",
    "list_summary_page",
    "load_entries",
    "load_latest_messages",
    "load_messages",
    "load_through_summary",
    "matching_conversations",
    "message_preview_source",
    "opened_failed_run",
    "opened_preview_source",
    "opened_record_message",
    "opened_summary",
    "plan_compaction",
    "pop_last_message",
    "record_failed_run",
    "record_run",
    "resolve_conversation",
    "restrict_to_tenants",
    "rewind_conversation",
    "run_row_ids",
    "run_totals",
    "scope_keys_of",
    "search_conversation_page",
    "search_message_page",
    "search_messages",
    "tenants_of",
    "unopenable_errors",
    "usage_by_user",
    "validate_after",
    "validate_limit",
    "validate_metadata_filter",
    "validate_query",
    "with_message_preview",
    "with_preview_columns",
    "with_summary_text",
    "write_summary",
]
