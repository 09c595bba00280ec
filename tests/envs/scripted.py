"""A scripted policy shared by the env tests: fixed replies in order, whatever the conversation."""

from __future__ import annotations

from wander import Reply


class Scripted:
    """Answers the given replies in order, whatever the conversation."""

    def __init__(self, *replies: str):
        self.replies = list(replies)

    def __call__(self, conversations):
        return [Reply(self.replies[sum(m["role"] == "assistant" for m in c)]) for c in conversations]
