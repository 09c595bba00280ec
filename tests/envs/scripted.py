"""A scripted policy shared by the tests that play games turn by turn: fixed replies in order."""

from __future__ import annotations

from wander import Reply


class Says:
    """A policy that replies with the given texts in turn, whatever the conversation."""

    def __init__(self, *texts: str):
        self.texts = list(texts)

    def __call__(self, conversations):
        return [Reply(self.texts.pop(0)) for _ in conversations]
