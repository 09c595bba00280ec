"""Policies: the agent side of an environment (scripted, local transformers, OpenAI-compatible)."""

from envs.policies.base import Conversation, Message, Policy, Reply

__all__ = ["Conversation", "Message", "Policy", "Reply"]
