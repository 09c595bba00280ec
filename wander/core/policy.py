"""The policy protocol: a batch of conversations in, the next assistant messages out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

Message = dict  # {"role": "system" | "user" | "assistant" | "tool", "content": str, ...}
Conversation = list[Message]


@dataclass(slots=True)
class Reply:
    """One assistant message produced by a policy, with exact tokens when the policy has them."""

    content: str
    prompt_ids: list[int] | None = None
    completion_ids: list[int] | None = None
    logprobs: list[float] | None = None
    extra: dict = field(default_factory=dict)

    def message(self) -> Message:
        """The reply as a chat message."""
        return {"role": "assistant", "content": self.content}


class UnplayableRequest(ValueError):
    """A well-formed conversation the policy cannot answer (no board, not the user's turn, a finished game).

    A server answers it with 422 and this message, and a client does not retry it: asking again cannot help.
    """


@runtime_checkable
class Policy(Protocol):
    """Anything that answers a batch of conversations: scripted players, local models, APIs."""

    def __call__(self, conversations: list[Conversation]) -> list[Reply]:
        """Return one Reply per conversation, in order."""
        ...
