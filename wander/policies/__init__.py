"""Policies: the agent side of an environment (scripted, local transformers, OpenAI-compatible)."""

from wander.core.policy import Conversation, Message, Policy, Reply

__all__ = ["Conversation", "Message", "Policy", "Reply"]
