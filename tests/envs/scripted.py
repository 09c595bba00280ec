"""Scripted policies shared by the env tests: fixed replies in order, whatever the conversation."""

from __future__ import annotations

from wander import Reply


class Scripted:
    """Answers the given replies in order, by how many replies the conversation already holds."""

    def __init__(self, *replies: str):
        self.replies = list(replies)

    def __call__(self, conversations):
        return [Reply(self.replies[sum(m["role"] == "assistant" for m in c)]) for c in conversations]


class Says:
    """Replies with the given texts in turn, one per call (for envs whose turns see only the current position)."""

    def __init__(self, *texts: str):
        self.texts = list(texts)

    def __call__(self, conversations):
        return [Reply(self.texts.pop(0)) for _ in conversations]
