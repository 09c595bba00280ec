"""GRPO one decision at a time, for environments whose every turn reads a fresh observation (no history).

When a model turn sees only the current observation (tic-tac-toe with `history="current"`), a whole episode is not
one token sequence, so it cannot be one GRPO sample. Here a sample is one decision instead: each group of
`num_generations` samples shares an episode spec, plays a common prefix of `depth` model turns (depth drawn from the
spec's seed), then branches: every sample answers the same position once (the tokens that carry the loss), then
plays on to the end (no loss on those turns): with the trainer's sampling, or greedily (`play_on="greedy"`). Its
reward is the episode's rubric reward, so the group's spread is the value of the branch move under the current
policy, a cleaner credit assignment than one outcome spread over every move of a game. Played on greedily, that
value is the one evaluation measures, with no luck of later samples in it: measured, sampled play-on left every
group with spread (reward std ~0.45) mostly from moves after the branch. With `play_on="expected"` the luck of
the environment goes too: the reward is the branch move's expected episode reward over every outcome of the env's
own randomness (tic-tac-toe: every answer of its opponent), the model greedy after it (`env.expected_outcomes`),
the same objective without the noise of one sampled game. With `play_on="best"` the play after the move is the
env's own best (`env.best_outcomes`, tic-tac-toe's solver), so a move is valued by itself, not by how well the
current model follows it up (measured on tic-tac-toe: the same plateau as "expected", at two thirds of the cost
per step; docs/experiments/training-report.md). Episode logic is the environment's own
(`start`/`advance`/`observation`/`score`), the same code `env.evaluate` runs.

With `branch_at="mistake"` the branch is not drawn but found: the position where the current model, greedy, loses
the most reward by its own reply (`mistake_positions`). Measured on the chat model after SFT (tic-tac-toe): its
greedy move is wrong in 11% of the positions evaluation asks, mostly late in a game where a prefix of 0-3 sampled
turns seldom leads, while its sampled moves there find the right one a quarter of the time: groups at those
positions are the ones whose gradient changes what greedy play does (docs/experiments/chat-model.md).

"expected", "best", `explore` and "mistake" need capabilities only some envs have (wander/core/capabilities.py):
`ExpectedOutcomes`, `BestOutcomes` and `CandidateReplies`; `DecisionRollout` refuses an env without the one it
needs (`MissingCapability`, naming it).

With `branch_at="adversary"` the groups first go where the model can be beaten: the positions on the lines an
opponent that knows its every move wins by (`LosingLines`, tic-tac-toe's exact worst case) where the model's own
reply gives up value, one group each; the other groups find their own mistakes as with "mistake". Measured on the
chat model: docs/experiments/chat-model.md.
"""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Callable
from typing import Any

from wander.core.capabilities import BestOutcomes, CandidateReplies, ExpectedOutcomes, LosingLines, require
from wander.core.environment import Environment
from wander.core.episode import Episode
from wander.core.policy import Message, Policy, Reply
from wander.training.chat_tokens import render_ids, trainer_template_kwargs
from wander.training.episode_data import spec_of
from wander.training.rollout_config import BRANCH_AT, PLAY_ON

# observations -> (prompt ids, completion ids, sampling logprobs or None, decoded replies), one per observation
TurnFn = Callable[
    [list[list[Message]]], tuple[list[list[int]], list[list[int]], list[list[float]] | None, list[str]]
]
# (episode at the branch, its reply) pairs -> each one's expected reward and rubric values
ExpectFn = Callable[[list[tuple[Episode, Reply]]], list[dict[str, float]]]
# (episode at the branch, a group's sampled texts, their completion ids) -> the texts and ids to play
ExploreFn = Callable[[Episode, list[str], list[list[int]]], tuple[list[str], list[list[int]]]]


def untried_moves(env: CandidateReplies, tokenizer: Any, share: float) -> ExploreFn:
    """Exploration at the branch: the last `share` of each group's samples play replies the group's sampled ones
    did not (the env's `candidate_replies`, in an order drawn from the episode seed), so a confident model still
    sees what its other moves are worth. Those samples are off-policy: the loss treats them as sampled."""

    def explore(episode: Episode, texts: list[str], completions: list[list[int]]) -> tuple[list, list]:
        forced = round(share * len(texts))
        kept = len(texts) - forced
        candidates = env.candidate_replies(episode)
        untried = [c for c in candidates if c not in texts[:kept]]
        if not forced or not untried:
            return texts, completions
        random.Random(int(episode.spec.get("seed", 0))).shuffle(untried)
        picks = [untried[i % len(untried)] for i in range(forced)]
        ids = [tokenizer.encode(t, add_special_tokens=False) + [tokenizer.eos_token_id] for t in picks]
        return texts[:kept] + picks, completions[:kept] + ids

    return explore


def branch_depth(spec: dict, max_depth: int) -> int:
    """Model turns played before the branch: a pure function of the spec's seed (0 = the first move)."""
    return (int(spec.get("seed", 0)) * 2654435761 >> 7) % max_depth


def opponent_variant(spec: dict, k: int) -> dict:
    """The spec with its k-th seed drawn from its own (k = 0: the spec itself): the same task, other luck."""
    if k == 0:
        return spec
    return {**spec, "seed": random.Random(f"{spec.get('seed', 0)}/{k}").randrange(2**31)}


def reply_losses(env: Environment, episodes: list[Episode], replies: list[Reply]) -> list[float]:
    """Per episode, the reward its reply gives up: the best candidate reply's reward, the env's best play after
    each (`best_outcomes` over `candidate_replies`), minus the reply's own (0 where none is better)."""
    candidates = [[Reply(c) for c in env.candidate_replies(ep)] for ep in episodes]
    branches = [
        (ep, r) for ep, cs, reply in zip(episodes, candidates, replies, strict=True) for r in [reply, *cs]
    ]
    rewards = iter(o["reward"] for o in env.best_outcomes(branches))
    losses = []
    for cs in candidates:
        own = next(rewards)
        losses.append(max((next(rewards) for _ in cs), default=own) - own)
    return losses


def mistake_positions(
    env: Environment, specs: list[dict], policy: Policy, tries: int
) -> list[tuple[Episode | None, float]]:
    """Per spec, the position where deterministic `policy` loses the most reward by its own reply over `tries`
    games (`opponent_variant`s of the spec), and that loss (`reply_losses`). (None, 0.0) where no reply of it
    loses any."""
    games = [(g, env.start(opponent_variant(spec, k))) for g, spec in enumerate(specs) for k in range(tries)]
    found: list[tuple[Episode | None, float]] = [(None, 0.0)] * len(specs)
    while live := [(g, ep) for g, ep in games if not ep.done]:
        episodes = [ep for _, ep in live]
        replies = ask_once(env, episodes, policy)
        losses = reply_losses(env, episodes, replies)
        for (g, ep), reply, loss in zip(live, replies, losses, strict=True):
            if loss > found[g][1] + 1e-9:  # the first of equal losses: the earliest position
                found[g] = (ep.fork(), loss)
            env.advance(ep, reply)
    return found


def ask_once(env: Environment, episodes: list[Episode], policy: Policy) -> list[Reply]:
    """A deterministic policy's reply at each episode, each distinct position asked once (games of one side open
    alike)."""
    observations = [env.observation(ep) for ep in episodes]
    keys = [json.dumps(o, sort_keys=True) for o in observations]
    asked = dict(zip(keys, observations, strict=True))
    answers = dict(zip(asked, policy(list(asked.values())), strict=True))
    return [answers[k] for k in keys]


class LosingLineMistakes:
    """`branch_at="adversary"`: the positions on the lines that beat the model (`env.losing_positions`) where its
    own reply gives up reward, costliest first. Every position a search found stays in the pool, each asked again
    every step: measured, with only the latest search's lines trained, a side GRPO had made unbeaten was beaten
    again at later curve points, so the groups return to any pooled position the model errs at again. The lines
    are searched again only when the model errs at none of the pool (a worst case asks every position the model can
    face: the cost of an exact evaluation), so most steps ask the model the pool alone."""

    def __init__(self, env: LosingLines) -> None:
        self.env, self.positions = env, []
        self._seen: set[str] = set()

    def __call__(self, policy: Policy) -> list[tuple[Episode, float]]:
        """(position, loss) of each mistake in the pool, costliest first; empty when no line beats the model and it
        errs at no pooled position."""
        mistakes = self._mistakes(policy)
        if not mistakes:
            self._pool(self.env.losing_positions(policy))
            mistakes = self._mistakes(policy)
        return mistakes

    def _pool(self, positions: list[Episode]) -> None:
        # One entry per position: both sides' lines and later searches reach the same ones.
        for ep in positions:
            key = json.dumps(self.env.observation(ep), sort_keys=True)
            if key not in self._seen:
                self._seen.add(key)
                self.positions.append(ep)

    def _mistakes(self, policy: Policy) -> list[tuple[Episode, float]]:
        if not self.positions:
            return []
        losses = reply_losses(self.env, self.positions, ask_once(self.env, self.positions, policy))
        lost = [(ep.fork(), loss) for ep, loss in zip(self.positions, losses, strict=True) if loss > 1e-9]
        return sorted(lost, key=lambda m: -m[1])


def play_decisions(
    env: Environment,
    specs: list[dict],
    group_size: int,
    turn: TurnFn,
    max_depth: int = 4,
    play_on: TurnFn | None = None,
    expect: ExpectFn | None = None,
    explore: ExploreFn | None = None,
    found: list[Episode | None] | None = None,
) -> list[dict]:
    """One decision sample per spec: groups share a prefix, then branch; later turns by `play_on` (else `turn`),
    or, with `expect`, no later turns: each episode's reward and values are its expected ones after the branch.
    `explore` may replace some branch moves of each group by untried ones before they are played. `found` gives
    groups their branch position instead (one per group; None = the prefix)."""
    if len(specs) % group_size:
        raise ValueError(f"{len(specs)} specs do not split into groups of {group_size}")
    groups = [specs[i] for i in range(0, len(specs), group_size)]
    found = found or [None] * len(groups)
    # A position found is its group's prefix already played: no start, no turns.
    prefixes = [env.start(spec) if at is None else at for spec, at in zip(groups, found, strict=True)]
    depths = [
        branch_depth(spec, max_depth) if at is None else 0 for spec, at in zip(groups, found, strict=True)
    ]
    branch_points = [ep.fork() for ep in prefixes]  # the latest live position of each prefix
    for depth in range(max_depth):
        live = [i for i, ep in enumerate(prefixes) if not ep.done and depth < depths[i]]
        if not live:
            break
        _play_turn(env, [prefixes[i] for i in live], turn)
        for i in live:
            if not prefixes[i].done:
                branch_points[i] = prefixes[i].fork()
    episodes = [branch_points[i // group_size].fork() for i in range(len(specs))]
    prompt_ids, completion_ids, logprobs = _play_turn(env, episodes, turn, explore, group_size)
    if expect is not None:
        # Each sample's position before its move is its group's branch point (expect forks, never changes it);
        # token ids are not needed to score: the reply's text is the move.
        outcomes = expect(
            [(branch_points[i // group_size], Reply(ep.replies[-1].content)) for i, ep in enumerate(episodes)]
        )
        for ep, outcome in zip(episodes, outcomes, strict=True):
            ep.reward = outcome["reward"]
            ep.values = {k: v for k, v in outcome.items() if k != "reward"}
        return _samples(episodes, prompt_ids, completion_ids, logprobs)
    while live := [ep for ep in episodes if not ep.done]:
        _play_turn(env, live, play_on or turn)
    env.score(episodes)
    return _samples(episodes, prompt_ids, completion_ids, logprobs)


def _samples(
    episodes: list[Episode],
    prompt_ids: list[list[int]],
    completion_ids: list[list[int]],
    logprobs: list[list[float]] | None,
) -> list[dict]:
    return [
        {
            "prompt_ids": prompt_ids[i],
            "completion_ids": completion_ids[i],
            "logprobs": logprobs[i] if logprobs is not None else None,
            "episode": episodes[i],
        }
        for i in range(len(episodes))
    ]


def _play_turn(
    env: Environment,
    episodes: list[Episode],
    turn: TurnFn,
    explore: ExploreFn | None = None,
    group_size: int = 1,
) -> tuple[list[list[int]], list[list[int]], list[list[float]] | None]:
    prompts, completions, logprobs, texts = turn([env.observation(ep) for ep in episodes])
    if explore is not None:
        for g in range(0, len(episodes), group_size):
            group = slice(g, g + group_size)
            texts[group], completions[group] = explore(episodes[g], texts[group], completions[group])
    env.advance_all([(ep, Reply(text)) for ep, text in zip(episodes, texts, strict=True)])
    return prompts, completions, logprobs


class DecisionRollout:
    """TRL `rollout_func(prompts, trainer)`: one decision per sample, scored by the episode it leads to."""

    def __init__(
        self,
        env: Environment,
        max_depth: int = 4,
        play_on: str = "sample",
        explore: float = 0.0,
        branch_at: str = "depth",
    ):
        if max_depth < 1:
            raise ValueError(f"max_depth must be at least 1, got {max_depth}")
        if not 0.0 <= explore < 1.0:
            raise ValueError(
                f"explore is the share of each group's samples that try untried moves, in [0, 1): {explore}"
            )
        if explore:
            require(env, CandidateReplies, "explore (trying untried moves)", "set explore to 0")
        if play_on not in PLAY_ON:
            raise ValueError(f"play_on must be one of {PLAY_ON}, got {play_on!r}")
        if play_on == "expected":
            require(env, ExpectedOutcomes, "play_on='expected'", "use play_on='sample' or 'greedy'")
        if play_on == "best":
            require(env, BestOutcomes, "play_on='best'", "use play_on='sample', 'greedy' or 'expected'")
        if branch_at not in BRANCH_AT:
            raise ValueError(f"branch_at must be one of {BRANCH_AT}, got {branch_at!r}")
        if branch_at in ("mistake", "adversary"):
            for capability in (BestOutcomes, CandidateReplies):
                require(
                    env,
                    capability,
                    f"branch_at={branch_at!r} (finding the model's mistakes)",
                    "use branch_at='depth'",
                )
        if branch_at == "adversary":
            require(
                env, LosingLines, "branch_at='adversary' (the lines that beat the model)", "use 'mistake'"
            )
        self.env, self.max_depth, self.play_on, self.explore = env, max_depth, play_on, explore
        self.branch_at = branch_at
        self.losing_lines = LosingLineMistakes(env) if branch_at == "adversary" else None

    def __call__(self, prompts: list[list[Message]], trainer: Any) -> dict[str, list]:
        """One sample per prompt; TRL repeats each prompt num_generations times in a row."""
        if trainer.accelerator.num_processes > 1 and collective_generation(trainer):
            # Each process plays its own groups, so the processes make different numbers of generate calls.
            raise NotImplementedError(
                "decision rollouts on several processes need each process to generate on its own (DDP or DeepSpeed "
                "ZeRO-2 with transformers generation); under vLLM or ZeRO-3 generation is a call all processes "
                "make together: use one process, or an env whose turns read the whole conversation"
            )
        tokenizer = trainer.processing_class
        template_kwargs = trainer_template_kwargs(trainer)

        def turn(conversations: list[list[Message]]):
            ids = [render_ids(tokenizer, c, True, **template_kwargs) for c in conversations]
            completions, logprobs = trainer._generate_single_turn(ids, None, {}, num_generations=1)
            completions = [list(c) for c in completions]
            return (
                ids,
                completions,
                logprobs,
                [tokenizer.decode(c, skip_special_tokens=True) for c in completions],
            )

        if self.explore and trainer.use_vllm:
            raise NotImplementedError(
                "explore replaces sampled moves, so vLLM's sampling logprobs would not match them"
            )
        greedy = None
        if self.play_on in ("greedy", "expected") or self.branch_at in ("mistake", "adversary"):
            greedy = _greedy_policy(trainer, template_kwargs)
        specs = [spec_of(p) for p in prompts]
        found = None
        if self.branch_at in ("mistake", "adversary"):
            group_specs = specs[:: trainer.num_generations]
            mistakes = mistake_positions(self.env, group_specs, greedy, trainer.num_generations)
            # TRL averages `_metrics` into each logged step: how often a group found a mistake, and its cost.
            metrics = trainer._metrics["train"]
            if self.losing_lines is not None:
                # The lines that beat the model first, one group at each of its mistakes there, costliest first;
                # the other groups keep the mistakes of their own games.
                on_lines = self.losing_lines(greedy)[: len(mistakes)]
                mistakes[: len(on_lines)] = on_lines
                metrics["branch/losing_line_share"].append(len(on_lines) / len(mistakes))
            found = [at for at, _ in mistakes]
            metrics["branch/mistake_share"].append(sum(at is not None for at in found) / len(found))
            metrics["branch/mistake_loss"].append(sum(loss for _, loss in mistakes) / len(mistakes))
        expect = None  # the capability checked in __init__
        if self.play_on == "expected":
            expect = functools.partial(self.env.expected_outcomes, policy=greedy)
        elif self.play_on == "best":
            expect = self.env.best_outcomes
        samples = play_decisions(
            self.env,
            specs,
            trainer.num_generations,
            turn,
            self.max_depth,
            play_on=_texts_of(greedy) if self.play_on == "greedy" else None,
            expect=expect,
            explore=untried_moves(self.env, tokenizer, self.explore) if self.explore else None,
            found=found,
        )
        episodes = [s["episode"] for s in samples]
        return {
            "prompt_ids": [s["prompt_ids"] for s in samples],
            "completion_ids": [s["completion_ids"] for s in samples],
            "logprobs": [s["logprobs"] for s in samples] if trainer.use_vllm else None,
            "env_mask": [[1] * len(s["completion_ids"]) for s in samples],
            "episode_reward": [ep.reward for ep in episodes],
            "episode_values": [ep.values for ep in episodes],
            "episode_error": [ep.error for ep in episodes],
        }


def collective_generation(trainer: Any) -> bool:
    """Whether every process of the trainer must join each generation call: vLLM (its prompts gathered to one
    engine or server) or DeepSpeed ZeRO-3 (each process holds a shard of the weights)."""
    plugin = getattr(trainer.accelerator.state, "deepspeed_plugin", None)
    return bool(trainer.use_vllm) or (plugin is not None and plugin.zero_stage == 3)


def _greedy_policy(trainer: Any, template_kwargs: dict) -> Policy:
    """The trainer's current model as a greedy policy (turns after the branch carry no loss)."""
    from wander.policies.transformers_policy import TransformersPolicy

    model = trainer.accelerator.unwrap_model(trainer.model)
    return TransformersPolicy(
        model,
        trainer.processing_class,
        greedy=True,
        max_new_tokens=trainer.max_completion_length or 16,
        chat_template_kwargs=template_kwargs,
        bf16=trainer.args.bf16,
    )


def _texts_of(policy: Policy) -> TurnFn:
    """A turn function of a policy: reply texts only, no ids."""

    def turn(conversations: list[list[Message]]):
        return [], [], None, [reply.content for reply in policy(conversations)]

    return turn
