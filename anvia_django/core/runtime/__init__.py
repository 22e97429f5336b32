"""The agent runtime: builder, agent, sessions, tools and the model protocol."""

from .agent import Agent
from .builder import DEFAULT_MAX_TURNS, AgentBuilder
from .compaction import SUMMARY_PROMPT, CompactionPolicy, model_summariser
from .conversation import repair_tool_exchanges
from .errors import InvalidModelOutputError, TurnLimitExceededError
from .model import ChatModel, ModelReply, ToolSpec, UsageReportingChatModel
from .run import AgentResponse
from .session import AgentSession, Prompt
from .tools import Tool, make_tool

__all__ = [
    "DEFAULT_MAX_TURNS",
    "SUMMARY_PROMPT",
    "Agent",
    "AgentBuilder",
    "AgentResponse",
    "AgentSession",
    "ChatModel",
    "CompactionPolicy",
    "InvalidModelOutputError",
    "ModelReply",
    "Prompt",
    "Tool",
    "ToolSpec",
    "TurnLimitExceededError",
    "UsageReportingChatModel",
    "make_tool",
    "model_summariser",
    "repair_tool_exchanges",
]
