"""The agent runtime: builder, agent, sessions, tools and the model protocol."""

from .agent import Agent
from .builder import DEFAULT_MAX_TURNS, AgentBuilder
from .conversation import repair_tool_exchanges
from .errors import InvalidModelOutputError, TurnLimitExceededError
from .model import ChatModel, ModelReply, ToolSpec, UsageReportingChatModel
from .run import AgentResponse
from .session import AgentSession, Prompt
from .tools import Tool, make_tool

__all__ = [
    "DEFAULT_MAX_TURNS",
    "Agent",
    "AgentBuilder",
    "AgentResponse",
    "AgentSession",
    "ChatModel",
    "InvalidModelOutputError",
    "ModelReply",
    "Prompt",
    "Tool",
    "ToolSpec",
    "TurnLimitExceededError",
    "UsageReportingChatModel",
    "make_tool",
    "repair_tool_exchanges",
]
