"""XML-tag parser for model output: robust to whatever a model writes."""

from __future__ import annotations

import re
from collections.abc import Sequence

from wander.core.policy import Message


class XMLParser:
    """Extracts `<field>...</field>` values from text.

    Every input gives a defined result and never raises: a missing, unclosed or empty tag
    gives None; when a tag appears more than once the last complete occurrence wins (the
    model's final word); nested same-name tags resolve to the innermost content.
    """

    def __init__(self, fields: Sequence[str] = ("think", "move"), answer_field: str = "move"):
        if answer_field not in fields:
            raise ValueError(f"answer_field {answer_field!r} must be one of fields {list(fields)}")
        self.fields = tuple(fields)
        self.answer_field = answer_field
        # Content may not contain another opening tag of the same name: this picks the
        # innermost element when tags nest, and skips an unclosed opener before a closed one.
        self._patterns = {f: re.compile(rf"<{f}>((?:(?!<{f}>).)*?)</{f}>", re.DOTALL) for f in self.fields}
        self._tags = {f: (f"<{f}>", f"</{f}>") for f in self.fields}
        self.tags = tuple(tag for pair in self._tags.values() for tag in pair)  # "<think>", "</think>", ...
        # Well formed: declared fields in order, each at most once, answer required, only
        # whitespace between them, and no field tag inside another field's content.
        any_tag = "|".join(map(re.escape, self.fields))
        content = rf"((?:(?!</?(?:{any_tag})>).)*)"
        parts = [
            rf"<{f}>{content}</{f}>\s*" if f == answer_field else rf"(?:<{f}>{content}</{f}>\s*)?"
            for f in self.fields
        ]
        self._well_formed_memo: dict[str, bool] = {}  # models repeat themselves; the check is pure
        self._well_formed = re.compile(r"\s*" + "".join(parts), re.DOTALL)

    def parse(self, text: object) -> dict[str, str | None]:
        """Return {field: stripped content or None} for every field."""
        if not isinstance(text, str):
            return dict.fromkeys(self.fields)
        out: dict[str, str | None] = {}
        for f in self.fields:
            value = self._last(f, text)
            out[f] = (value.strip() or None) if value is not None else None
        return out

    def parse_answer(self, completion: str | Sequence[Message] | None) -> str | None:
        """Answer field of the latest assistant message only (never an earlier one); None for anything else."""
        if isinstance(completion, str):
            text = completion
        elif isinstance(completion, Sequence):
            text = last_assistant_content(completion)
        else:
            return None  # None, a number, a dict: no assistant message to read
        if text is None:
            return None
        value = self._last(self.answer_field, text)
        return (value.strip() or None) if value is not None else None

    def _last(self, field: str, text: str) -> str | None:
        """Raw content of the last complete `field` element (innermost when nested), or None."""
        open_tag, close_tag = self._tags[field]
        start = text.find(open_tag)
        if start < 0:
            return None
        if text.find(open_tag, start + 1) < 0:
            # One opening tag, the usual reply: the element ends at the first closing tag after it, exactly as
            # the pattern below would match, at a fraction of its cost (the env's step parses every reply).
            start += len(open_tag)
            end = text.find(close_tag, start)
            return text[start:end] if end >= 0 else None
        value = None
        for m in self._patterns[field].finditer(text):
            value = m.group(1)
        return value

    def is_well_formed(self, text: object) -> bool:
        """True when the answer tag appears once, non-empty, and other fields at most once, in order."""
        if not isinstance(text, str):
            return False
        memo = self._well_formed_memo
        known = memo.get(text)
        if known is None:
            if len(memo) > 100_000:
                memo.clear()
            m = self._well_formed.fullmatch(text)
            known = memo[text] = m is not None and all(g is None or g.strip() for g in m.groups())
        return known

    def format_reward(self, completion: Sequence[Message], **_: object) -> float:
        """Fraction of assistant messages that are well formed (`<think>` optional, answer required)."""
        replies = well_formed = 0
        for m in completion if isinstance(completion, Sequence) and not isinstance(completion, str) else ():
            if isinstance(m, dict) and m.get("role") == "assistant":
                replies += 1
                well_formed += self.is_well_formed(m.get("content"))
        return well_formed / replies if replies else 0.0


def last_assistant_content(messages: Sequence[Message]) -> str | None:
    """Content of the latest assistant message, or None when there is none."""
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role") == "assistant":
            content = m.get("content")
            return content if isinstance(content, str) else None
    return None


INTEGER = re.compile(r"-?\d{1,30}")  # 30 digits: far beyond any answer, and int() of it never fails
# What int() itself skips around a number: str.strip() would also take the separators \x1c-\x1f, which int() refuses.
ASCII_SPACE = " \t\n\v\f\r"


def parse_integer(text: str | None) -> int | None:
    """The whole number a parsed answer holds (`-12`, ` 42 `), or None for anything else."""
    if not isinstance(text, str):
        return None
    text = text.strip(ASCII_SPACE)
    return int(text) if text.isascii() and INTEGER.fullmatch(text) else None
