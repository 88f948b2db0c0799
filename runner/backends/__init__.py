"""Agent backends: the Backend protocol and the three implementations.

==========  ==========================================================
simulated   offline, deterministic, writes from a persona (the default)
openai      an OpenAI-compatible chat-completions endpoint (Ollama by default)
command     an external program: request JSON on stdin, entry JSON on stdout
==========  ==========================================================
"""

from __future__ import annotations

from runner.backends.base import (
    MAX_REPLY_BYTES,
    MAX_REPLY_DEPTH,
    REPLY_FIELDS,
    Backend,
    ReflectionRequest,
    check_reply,
    keep_shown_ids,
    parse_reply_text,
)
from runner.errors import ConfigError
from runner.settings.config import AgentConfig

__all__ = [
    "MAX_REPLY_BYTES",
    "MAX_REPLY_DEPTH",
    "REPLY_FIELDS",
    "Backend",
    "ReflectionRequest",
    "build_backend",
    "check_reply",
    "keep_shown_ids",
    "parse_reply_text",
]


def build_backend(agent: AgentConfig) -> Backend:
    """The backend an agent is configured with.

    Raises:
        ConfigError: a simulated agent without a persona.
    """
    settings = agent.backend
    if settings.type == "openai":
        from runner.backends.openai_chat import OpenAIBackend

        return OpenAIBackend(settings)
    if settings.type == "command":
        from runner.backends.command import CommandBackend

        return CommandBackend(settings)
    if agent.persona is None:
        raise ConfigError("<agent>", f"agents.{agent.name}.persona", "a persona file for the simulated backend", "nothing")
    from runner.backends.simulated import SimulatedBackend

    return SimulatedBackend(agent.persona)
