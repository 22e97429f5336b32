"""The Anvia memory contract (``@anvia/core/memory`` in Python). No Django needed."""

from .errors import ConversationScopeError, InvalidMemoryInputError, MemoryNotConfiguredError
from .in_process import InProcessMemoryInspector, InProcessMemoryStore
from .options import resolve_memory_options
from .types import (
    SAVE_POLICIES,
    ErrorRecordingMemoryStore,
    FailedRunRecord,
    JsonObject,
    MemoryAppendInput,
    MemoryContext,
    MemoryConversation,
    MemoryConversationListOptions,
    MemoryConversationMessage,
    MemoryConversationSummary,
    MemoryErrorInput,
    MemoryInspector,
    MemoryOptions,
    MemoryRegistration,
    MemorySavePolicy,
    MemoryStore,
    Message,
    ResolvedMemoryOptions,
    SessionOptions,
    get_inspector,
)
from .validation import InputLimits
from .window import window_start

__all__ = [
    "SAVE_POLICIES",
    "ConversationScopeError",
    "ErrorRecordingMemoryStore",
    "FailedRunRecord",
    "InProcessMemoryInspector",
    "InProcessMemoryStore",
    "InputLimits",
    "InvalidMemoryInputError",
    "JsonObject",
    "MemoryAppendInput",
    "MemoryContext",
    "MemoryConversation",
    "MemoryConversationListOptions",
    "MemoryConversationMessage",
    "MemoryConversationSummary",
    "MemoryErrorInput",
    "MemoryInspector",
    "MemoryNotConfiguredError",
    "MemoryOptions",
    "MemoryRegistration",
    "MemorySavePolicy",
    "MemoryStore",
    "Message",
    "ResolvedMemoryOptions",
    "SessionOptions",
    "get_inspector",
    "resolve_memory_options",
    "window_start",
]
