"""Tool-calling envs under GRPO through TRL's `environment_factory`: the env's tools become a TRL environment.

TRL runs the tool-calling loop: the chat template renders the tool schemas, the model's `<tool_call>` blocks are
parsed by the tokenizer's response template, and each call goes to a method of the TRL environment, which runs
the tool with the env's own `ToolEnv.call_tool` (same errors, same counters). After the rollout, the conversation
is rebuilt in the env's message format and scored by its rubric like any other episode.
"""

from __future__ import annotations

import json
from typing import Any

from wander.core.episode import Episode
from wander.core.policy import Message
from wander.core.tool_env import TOOL_PROMPT, ToolEnv, forwarding
from wander.training.args import replace_args
from wander.training.episode_data import SPEC_KEY, rollout_dataset
from wander.training.rewards import rubric_args, rubric_reward_funcs
from wander.training.rollout_config import RolloutConfig


class ToolSession:
    """One rollout's TRL environment: `reset` starts an episode; every other public method is a tool."""

    def __init__(self, env: ToolEnv):
        self._env = env
        self._episode: Episode | None = None

    def reset(self, **row: Any) -> None:
        """Start the episode of a dataset row; the prompt already holds its opening, so nothing is appended."""
        self._episode = self._env.start(json.loads(row[SPEC_KEY]))

    def _call(self, name: str, arguments: dict) -> str:
        state = self._episode.state
        state["tool_calls"] = state.get("tool_calls", 0) + 1  # counted as ToolEnv.env_response counts them
        return self._env.call_tool(json.dumps({"name": name, "arguments": arguments}), state)


def _tool_method(name: str, func: Any) -> Any:
    """A method forwarding to the env's tool, with the tool's signature and docstring (TRL reads its schema)."""
    return forwarding(func, lambda self, **arguments: self._call(name, arguments), method=True)


def session_class(env: ToolEnv) -> type:
    """A ToolSession subclass with one method per tool of the env."""
    methods = {name: _tool_method(name, func) for name, func in env.tools.items()}
    clash = sorted(set(methods) & {"reset", "get_reward"} | {n for n in methods if n.startswith("_")})
    if clash:
        raise ValueError(f"tool names {clash} clash with TRL's environment protocol; rename these tools")
    return type(f"{type(env).__name__}Session", (ToolSession,), methods)


def base_system_prompt(env: ToolEnv) -> str:
    """The env's system prompt without its text tool protocol (TRL's chat template renders the tools instead)."""
    schemas = "\n".join(json.dumps(s) for s in env.tool_schemas)
    protocol = TOOL_PROMPT.format(schemas=schemas)
    prompt = env.system_prompt
    return prompt[: -len(protocol)].rstrip("\n") if prompt.endswith(protocol) else prompt


def as_env_messages(completion: list[Message]) -> list[Message]:
    """TRL's parsed completion (tool_calls fields) in the env's text format (`<tool_call>` JSON in content)."""
    out = []
    for m in completion:
        if m.get("role") == "assistant":
            calls = [c.get("function", c) for c in m.get("tool_calls") or []]
            blocks = [json.dumps({"name": c.get("name"), "arguments": c.get("arguments", {})}) for c in calls]
            parts = ([m["content"]] if m.get("content") else []) + [
                f"<tool_call>{b}</tool_call>" for b in blocks
            ]
            out.append({"role": "assistant", "content": "\n".join(parts)})
        else:
            content = m.get("content")
            out.append(
                {
                    "role": m.get("role", "tool"),
                    "content": content if isinstance(content, str) else str(content),
                }
            )
    return out


def score_sessions(env: ToolEnv, completions: list, environments: list, **_: Any) -> list[tuple]:
    """Rebuild each rollout as an env episode and score it with the rubric."""
    episodes = []
    for completion, session in zip(completions, environments, strict=True):
        episode = session._episode
        turn_messages = as_env_messages(completion)
        episode.messages = episode.messages[: episode.prompt_len] + turn_messages
        episode.state["turn"] = sum(m["role"] == "assistant" for m in turn_messages)
        episode.done = True
        episodes.append(episode)
    env.score(episodes)
    return [(ep.reward, ep.values) for ep in episodes]


def tool_env_trainer(
    env: ToolEnv, trainer_cls: type, *, model: Any, args: Any, rollout: RolloutConfig, **kwargs: Any
) -> Any:
    """A GRPOTrainer running the env's tools through TRL's environment_factory, rewarded by the env's rubric."""
    import functools

    funcs, weights = rubric_reward_funcs(env, functools.partial(score_sessions, env))
    args = rubric_args(args, weights)
    # The env's turn limit counts model turns; the first one is not a tool iteration.
    iterations = args.max_tool_calling_iterations or env.max_turns - 1
    args = replace_args(args, max_tool_calling_iterations=iterations)
    dataset = rollout_dataset(env, rollout, args)
    system = base_system_prompt(env)

    def with_base_system(row: dict) -> dict:
        prompt = [dict(m) for m in row["prompt"]]
        if prompt and prompt[0]["role"] == "system":
            prompt = ([{**prompt[0], "content": system}] if system else []) + prompt[1:]
        return {"prompt": prompt}

    dataset = dataset.map(with_base_system)
    sessions = session_class(env)
    return trainer_cls(
        model=model,
        args=args,
        reward_funcs=funcs,
        train_dataset=dataset,
        environment_factory=lambda: sessions(env),
        **kwargs,
    )
