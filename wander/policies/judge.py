"""LLM-judge rewards: a rubric function that asks a judge model to score a reply against a written rubric.

The judge is any policy wander builds (`make_policy`: an OpenAI-compatible URL, the embedded teacher server, a
local model folder), so its retries and its disk cache are the policy's. `Judge` is an async rubric function: a
rubric scores a batch's episodes in one `asyncio.gather`, and every judge call of that batch is collected and sent
as one policy call (in `batch_size` chunks). Answers are cached by (task, reply, reference); each request beyond
`max_calls` is refused (the episode errors), a hard budget on what a run may spend. `mode="group"` shows the judge
every reply to one task at once and asks for a score each, relative to the others (ART's RULER): a GRPO group's
replies are scored together. A reply the judge's answer gives no score for errors its episode, with the answer.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from wander.core.parser import last_assistant_content
from wander.core.policy import Conversation, Policy, Reply

EACH_PROMPT = """You grade a model's reply to a task against a rubric.

Rubric: {rubric}

Task:
{task}
{reference}
Reply:
{reply}

{instruction}"""

GROUP_PROMPT = """You grade {count} replies to the same task against a rubric, comparing them with one another.

Rubric: {rubric}

Task:
{task}
{reference}
{replies}

{instruction}"""

# What the judge is asked to answer, by verdict and mode: the prompt's last paragraph, one line.
INSTRUCTIONS = {
    ("score", "each"): 'Grade the reply from 0 (fails the rubric) to {scale} (meets it fully). End with a line "Score: N".',
    ("score", "group"): 'Grade each reply from 0 (fails the rubric) to {scale} (meets it fully). Answer one line per reply, "Reply K: N".',
    ("yes_no", "each"): "Does the reply meet the rubric? Answer Yes or No.",
    ("yes_no", "group"): 'Does each reply meet the rubric? Answer one line per reply, "Reply K: Yes" or "Reply K: No".',
}  # fmt: skip
SCORE = re.compile(r"score\s*[:=]\s*(\d+(?:\.\d+)?)", re.IGNORECASE)
GROUP_SCORE = re.compile(r"reply\s*(\d+)\s*[:=]\s*(\d+(?:\.\d+)?)", re.IGNORECASE)
YES_NO = re.compile(r"\b(yes|no)\b", re.IGNORECASE)
GROUP_YES_NO = re.compile(r"reply\s*(\d+)\s*[:=]\s*(yes|no)\b", re.IGNORECASE)


class JudgeError(RuntimeError):
    """A judge answer without a usable score, or a request past the judge's budget."""


@dataclass(frozen=True)
class _Item:
    task: str
    reply: str
    reference: str

    def key(self, *context: str) -> str:
        text = json.dumps([self.task, self.reply, self.reference, *context])
        return hashlib.sha256(text.encode()).hexdigest()


def _text(messages: Any, role: str) -> str:
    if isinstance(messages, str):
        return messages
    if role == "assistant":
        return last_assistant_content(messages) or ""
    return next((m.get("content") or "" for m in reversed(messages or []) if m.get("role") == role), "")


def _value(word: str) -> float:
    """A verdict's number: a grade as written, Yes 1, No 0."""
    if word.isalpha():
        return 1.0 if word.lower() == "yes" else 0.0
    return float(word)


class Judge:
    """A reward in [0, 1]: the judge's score of the reply against `rubric`, over `scale`. `reference` is what the
    judge is shown to compare with: the spec's `answer` (default), another spec key, a function of the spec, or
    None (a task without a reference: the rubric alone). `verdict` is what the judge answers: `score` (a grade of
    0-`scale`) or `yes_no` (Yes = 1, No = 0: the form verifiers' JudgeRubric asks, and the one a small model
    keeps to: docs/experiments/judges.md)."""

    def __init__(
        self,
        policy: Policy,
        rubric: str,
        *,
        scale: int = 10,
        mode: str = "each",
        verdict: str = "score",
        reference: str | Callable[[dict], str] | None = "answer",
        batch_size: int = 16,
        max_calls: int = 10_000,
        name: str = "judge",
    ):
        if mode not in ("each", "group"):
            raise ValueError(f"judge mode must be 'each' or 'group', got {mode!r}")
        if verdict not in ("score", "yes_no"):
            raise ValueError(f"judge verdict must be 'score' or 'yes_no', got {verdict!r}")
        if scale < 1 or batch_size < 1 or max_calls < 0:
            raise ValueError("judge scale and batch_size must be at least 1, max_calls at least 0")
        self.policy, self.rubric, self.scale, self.mode, self.verdict = policy, rubric, scale, mode, verdict
        self.instruction = INSTRUCTIONS[verdict, mode].format(scale=scale)
        self.reference, self.batch_size, self.max_calls = reference, batch_size, max_calls
        self.__name__ = name  # the rubric's name for this function
        self.calls = 0  # judge requests sent (cache hits are free)
        self.cache: dict[str, list[float]] = {}  # a request's scores, by its key
        self._pending: list[tuple[_Item, asyncio.Future]] = []

    @classmethod
    def from_spec(cls, spec: str, rubric: str, *, max_new_tokens: int | None = None, **options: Any) -> Judge:
        """A judge from a policy spec (an OpenAI-compatible URL, a model folder), greedy; an endpoint that does not
        answer is refused here, before any episode is judged. `max_new_tokens` None: 16 for one Yes/No (its first
        word is the verdict), else 256 (room to reason before the score)."""
        from wander.policies.loading import make_policy
        from wander.policies.openai_policy import OpenAIPolicy, PolicyRequestError

        if max_new_tokens is None:
            one_word = options.get("verdict") == "yes_no" and options.get("mode") != "group"
            max_new_tokens = 16 if one_word else 256

        policy = make_policy(spec, max_new_tokens=max_new_tokens)
        if isinstance(policy, OpenAIPolicy):
            try:
                policy.resolve_model()
            except PolicyRequestError as exc:
                raise ValueError(f"the judge endpoint {spec} does not answer: {exc}") from None
        return cls(policy, rubric, **options)

    async def __call__(self, prompt: Any, completion: Any, answer: Any, info: Any) -> float:
        """The reply's score, judged with the rest of this batch's replies."""
        reference = self._reference(answer, info or {})
        item = _Item(_text(prompt, "user"), _text(completion, "assistant"), reference)
        if self.mode == "each" and item.key() in self.cache:
            return self.cache[item.key()][0]
        future = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        if len(self._pending) == 1:  # after every coroutine of this gather has queued its reply
            asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(self._flush()))
        return await future

    def _reference(self, answer: Any, info: dict) -> str:
        """What the judge is shown as the reference: none, the spec's answer, or `reference(spec)`."""
        if self.reference is None:
            return ""
        if callable(self.reference):
            return str(self.reference(info))
        value = answer if self.reference == "answer" else info.get(self.reference)
        return "" if value is None else str(value)

    def _reference_line(self, item: _Item) -> str:
        return f"\nReference answer:\n{item.reference}\n" if item.reference else ""

    def _requests(self, batch: list[tuple[_Item, asyncio.Future]]) -> list[tuple[str, list, str]]:
        """(prompt, its (item, future) pairs, cache key) per judge request of the batch."""
        if self.mode == "each":
            out = []
            for item, future in batch:
                text = EACH_PROMPT.format(
                    rubric=self.rubric, task=item.task, reference=self._reference_line(item),
                    reply=item.reply, instruction=self.instruction,
                )  # fmt: skip
                out.append((text, [(item, future)], item.key()))
            return out
        groups: dict[tuple[str, str], list] = {}
        for item, future in batch:
            groups.setdefault((item.task, item.reference), []).append((item, future))
        out = []
        for members in groups.values():
            first = members[0][0]
            replies = "\n\n".join(f"Reply {k}:\n{item.reply}" for k, (item, _) in enumerate(members, 1))
            text = GROUP_PROMPT.format(
                count=len(members), rubric=self.rubric, task=first.task,
                reference=self._reference_line(first), replies=replies, instruction=self.instruction,
            )  # fmt: skip
            out.append((text, members, first.key(*(item.reply for item, _ in members))))
        return out

    def _scores(self, answer: str, count: int) -> list[float]:
        """The scores an answer gives, each in [0, 1]; JudgeError naming the answer when one is missing."""
        top = 1.0 if self.verdict == "yes_no" else float(self.scale)
        if self.mode == "each":
            # A grade is the last one written (a judge may reason first); a verdict is the answer's first word.
            found = SCORE.findall(answer)[-1:] if self.verdict == "score" else YES_NO.findall(answer)[:1]
            values = [_value(word) for word in found]
        else:
            pattern = GROUP_SCORE if self.verdict == "score" else GROUP_YES_NO
            by_reply = {int(k): _value(v) for k, v in pattern.findall(answer)}
            values = [by_reply[k] for k in range(1, count + 1) if k in by_reply]
        if len(values) != count or any(not 0 <= v <= top for v in values):
            wanted = "Yes or No" if self.verdict == "yes_no" else f"score 0-{self.scale}"
            raise JudgeError(f"the judge's answer gives no {wanted} for every reply: {answer[:200]!r}")
        return [v / top for v in values]

    async def _flush(self) -> None:
        batch, self._pending = self._pending, []
        requests = self._requests(batch)
        for start in range(0, len(requests), self.batch_size):
            chunk = requests[start : start + self.batch_size]
            todo = list({r[2]: r for r in chunk if r[2] not in self.cache}.values())  # one request a key
            spend = min(len(todo), max(0, self.max_calls - self.calls))
            self.calls += spend
            conversations: list[Conversation] = [[{"role": "user", "content": r[0]}] for r in todo[:spend]]
            try:
                replies = (
                    await asyncio.get_running_loop().run_in_executor(None, self.policy, conversations)
                    if conversations
                    else []
                )
            except Exception as exc:  # noqa: BLE001 - the judge's failure errors the episodes it was judging
                for _, members, _ in chunk:
                    for _, future in members:
                        if not future.done():
                            future.set_exception(exc)
                continue
            answers = {
                r[2]: (a.content if isinstance(a, Reply) else str(a))
                for r, a in zip(todo[:spend], replies, strict=True)
            }
            for _, members, key in chunk:
                try:
                    if key in self.cache:
                        scores = self.cache[key]
                    elif key in answers:
                        scores = self.cache[key] = self._scores(answers[key], len(members))
                    else:
                        raise JudgeError(f"the judge's budget of {self.max_calls} requests is spent")
                except JudgeError as exc:
                    for _, future in members:
                        future.set_exception(exc)
                    continue
                for (_, future), score in zip(members, scores, strict=True):
                    future.set_result(score)
