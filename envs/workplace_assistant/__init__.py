"""Workplace assistant (tool calling, multi-step): requests such as "send an email to ... with subject ... and
body ...", "schedule a meeting ...", "reply to / forward / delete the email from ...", "cancel the meeting
...", done with ten typed tools over an in-memory mailbox and calendar drawn from the episode seed (contacts,
inbox, events; `workspace.py`). The episode is verified by the state it leaves, not by the text of the calls
(`goals.py`): the reward is the share of the task's state checks that hold (every expected email: recipients,
subject, body; every expected event: title, day and time, attendees; every expected deletion), minus 0.5 for
each unwanted side effect (an email or event nobody asked for, a deletion not asked), floored at 0. The strata
are the tool calls a task needs (stratum k: k+1, lookups included). With GRPO the tools run through TRL's
`environment_factory` (`wander.training.tools`). `load_environment(**kwargs)`: its keyword defaults are the
env's config."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator

from envs.workplace_assistant.goals import MAX_STRATA, expectations, make_task, sentence, verify
from envs.workplace_assistant.teacher import WorkplaceTeacher, longest_reply, longest_result
from envs.workplace_assistant.workspace import TOOLS, bound, make_workspace
from wander.core.evaluation_suite import EvaluationSuite
from wander.core.pipeline_hooks import FRAME_TOKENS, text_tokens
from wander.core.policy import Message, Policy
from wander.core.rubric import Rubric
from wander.core.splits import SPLIT_SEEDS, SeededSplits
from wander.core.tool_env import TOOL_CALL, ToolEnv

SYSTEM_PROMPT = (
    "You are the user's workplace assistant. Carry out the user's request with the mailbox and calendar "
    "tools: look up the addresses and ids you need, then act. Do only what is asked. When everything is "
    "done, reply without a tool call."
)


def verdict(state: dict, info: dict) -> dict:
    """The state checks of a finished episode: the initial workspace (from the seed) against the final one."""
    initial = make_workspace(info["seed"])
    return verify(initial, state["workspace"], expectations(json.loads(info["task"]), initial))


def task_reward(state: dict, info: dict) -> float:
    """The share of the task's state checks that hold, minus 0.5 per side effect, floored at 0."""
    return verdict(state, info)["task_reward"]


def state_checks(state: dict, info: dict) -> float:
    """The share of the task's state checks that hold."""
    return verdict(state, info)["state_checks"]


def side_effects(state: dict, info: dict) -> float:
    """Changes nobody asked for: extra emails or events, wrong deletions."""
    return verdict(state, info)["side_effects"]


def completed(state: dict, info: dict) -> float:
    """1 when every check holds and nothing else changed."""
    return verdict(state, info)["completed"]


def protocol_format(completion: list) -> float:
    """1 when every tool call names a tool with a JSON object of arguments and the last reply closes the episode."""
    replies = [m.get("content") or "" for m in completion if m.get("role") == "assistant"]
    calls = [TOOL_CALL.findall(reply) for reply in replies]
    if not replies or calls[-1]:
        return 0.0  # cut off by the turn limit, still calling tools
    if any(reply.count("<tool_call>") != len(found) for reply, found in zip(replies, calls, strict=True)):
        return 0.0  # a call opened and never closed: the scratch model's `<tool_call>{"name": " " " ...`
    for raw in (call for found in calls for call in found):
        try:
            call = json.loads(raw)
        except ValueError:
            return 0.0
        if (
            not isinstance(call, dict)
            or call.get("name") not in TOOLS
            or not isinstance(call.get("arguments"), dict)
        ):
            return 0.0
    return 1.0


def tool_calls(state: dict) -> float:
    """Tool calls made in the episode."""
    return float(state.get("tool_calls", 0))


def tool_errors(state: dict) -> float:
    """Tool calls that failed (bad JSON, unknown tool, bad arguments, unknown ids)."""
    return float(state.get("tool_errors", 0))


class WorkplaceEnv(SeededSplits, ToolEnv):
    """Mailbox and calendar requests verified by the resulting state; strata are numbers of tool calls."""

    teacher_skill = 0.2  # the embedded teacher slips on a fifth of the requests; curation drops those
    # What the agent may not see: the task's goals (the reference: resolved addresses and ids) and the workspace,
    # which the agent must look up through the tools.
    private_spec_keys = frozenset({"task"})
    private_state_keys = frozenset({"workspace"})

    def __init__(
        self,
        num_train: int,
        num_eval: int,
        num_test: int,
        seed: int,
        num_groups: int,
        specs_dir: str | None,
        max_turns: int,
        tools_over: str,
    ):
        rubric = Rubric()
        rubric.add(task_reward, 1.0)
        for metric in (state_checks, side_effects, completed):
            rubric.add(metric, 0.0)
        rubric.add(protocol_format, 0.0, name="format")  # curation's format floor reads it
        rubric.add(tool_calls, 0.0)
        rubric.add(tool_errors, 0.0)
        super().__init__(
            tools=list(TOOLS.values()),
            rubric=rubric,
            system_prompt=SYSTEM_PROMPT,
            max_turns=max_turns,
            tools_over=tools_over,
            name="workplace_assistant",
        )
        self.init_splits(num_train, num_eval, num_test, seed, num_groups, specs_dir)

    def spec_fields(self, seed: int, stratum: int) -> dict:
        """The request of a seed in a stratum and its goals (JSON: a spec column of one type)."""
        goals = make_task(make_workspace(seed), seed, stratum)
        return {"request": " ".join(sentence(g) for g in goals), "task": json.dumps(goals)}

    def setup_state(self, spec: dict) -> dict:
        """The episode's workspace, fresh from its seed."""
        return {"workspace": make_workspace(spec["seed"])}

    def initial_messages(self, spec: dict, state: dict) -> list[Message]:
        """The instruction with the tools, then the request."""
        return [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": spec["request"]},
        ]

    def reply_tokens(self) -> int:
        """The teacher's longest possible reply (a tool call with the longest values), for any tokenizer."""
        return text_tokens(longest_reply())

    def completion_tokens(self) -> int:
        """The teacher's longest episode: the calls of the hardest stratum, one more when a slip repeats an action,
        and the closing reply, each at the reply budget; between turns the longest tool result in its chat
        template frame."""
        turns = min(self.max_turns, self.num_groups + 2)
        return turns * self.reply_tokens() + (turns - 1) * (text_tokens(longest_result()) + FRAME_TOKENS)

    def call_tool(self, raw: str, state: dict) -> str:
        """Run one tool call on this episode's workspace."""
        with bound(state["workspace"]):
            return super().call_tool(raw, state)

    def corpus(self) -> Iterator[str]:
        """The instruction (repeated: a tokenizer learns it as few tokens), then the teacher's episodes."""
        yield from [self.system_prompt] * 100
        for split in SPLIT_SEEDS:
            for episode in self.rollout(WorkplaceTeacher(), self.get_dataset(split).to_list()):
                yield from (m["content"] for m in episode.messages[1:])

    def evaluation_suite(self) -> EvaluationSuite:
        """The rubric means per stratum and split (the shares in [0, 1], the counts >= 0); fewer side effects and
        failed tool calls are better."""
        counts = ("side_effects", "tool_errors")
        suite = super().evaluation_suite().lower_is_better(*counts).bounded(0.0, math.inf, *counts)
        return suite.bounded(0.0, 1.0, "reward", "task_reward", "state_checks", "completed", "format")

    def curation_defaults(self) -> dict:
        """Completed requests only: partial credit and side effects are what curation removes."""
        return {"allowed_outcomes": [], "min_values": {"completed": 1.0}}

    def teacher_policy(self, skill: float, seed: int) -> Policy:
        """The tool-calling teacher with slip rate `skill`."""
        return WorkplaceTeacher(skill, seed)


def load_environment(
    num_train: int = 2000,
    num_eval: int = 200,
    num_test: int = 200,
    seed: int = 0,
    num_groups: int = 3,
    specs_dir: str | None = None,
    max_turns: int = 8,
    tools_over: str = "local",
) -> WorkplaceEnv:
    """The workplace env: split sizes, split seed, tool-call strata, generated specs, turn limit, where the tools
    run ("local": in process; "mcp": a `wander env mcp` server per episode, over stdio)."""
    if not 1 <= num_groups <= MAX_STRATA:
        raise ValueError(f"num_groups must be within 1..{MAX_STRATA}, got {num_groups}")
    if max_turns < num_groups + 1:
        raise ValueError(f"max_turns {max_turns} leaves no turn for the reply after {num_groups} tool calls")
    return WorkplaceEnv(num_train, num_eval, num_test, seed, num_groups, specs_dir, max_turns, tools_over)
