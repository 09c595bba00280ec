"""GRPO on whole episodes: a multi-turn `rollout_func` for TRL's GRPOTrainer.

Each generation batch plays complete episodes of the environment with the trainer's current model, through the
same `Environment.start / advance / score` code that `env.evaluate` runs. All live episodes of the batch go to the
model together, turn after turn. Token ids are built by concatenation, never by re-tokenising decoded text: a
model turn keeps exactly the ids that were sampled, and the environment's answer is the chat template's rendering
of its messages, appended as environment tokens (`env_mask` 0) that carry no loss. A completion ends on the
model's last turn, so its final token is the model's end-of-turn token whenever that turn stopped by itself.

Generation goes through the trainer's own single-turn backend (`GRPOTrainer._generate_single_turn`, the one
TRL's tool-calling loop uses), so the same rollout runs with `transformers.generate` on CPU and, with
`GRPOConfig(use_vllm=True)`, with vLLM on a GPU machine (colocated or `trl vllm-serve`): then sampling logprobs
come back for the model's tokens (environment tokens get 0.0 and are masked out of TRL's importance-sampling
correction). vLLM cannot be installed on CPU machines, so that path is untested here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from wander.core.environment import Environment
from wander.core.episode import Episode
from wander.core.policy import Message, Reply
from wander.training.chat_tokens import render_ids, trainer_template_kwargs
from wander.training.episode_data import dump_spec, rollout_dataset, spec_of
from wander.training.rewards import rubric_args, rubric_reward_funcs
from wander.training.rollout_config import RolloutConfig

logger = logging.getLogger(__name__)
FRESH_SEED_OFFSET = (
    10**6
)  # resampled flat groups draw their specs from seed + this (wander.training.dynamic_sampling)

# generate(token prompts) -> (completion ids, sampling logprobs or None), one per prompt
GenerateFn = Callable[[list[list[int]]], tuple[list[list[int]], list[list[float]] | None]]


@dataclass
class TokenEpisode:
    """An episode with its exact tokens: the first prompt, then model and environment tokens."""

    episode: Episode
    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)  # 1 model token, 0 environment token
    logprobs: list[float] = field(default_factory=list)

    @property
    def context(self) -> list[int]:
        """Every token so far: what the model reads before its next turn."""
        return self.prompt_ids + self.completion_ids

    def drop_env_tail(self) -> None:
        """Remove environment tokens after the last model turn: a completion ends on the model's tokens."""
        while self.env_mask and self.env_mask[-1] == 0:
            self.completion_ids.pop()
            self.env_mask.pop()
            self.logprobs.pop()

    def extend(self, ids: list[int], from_model: bool, logprobs: list[float] | None = None) -> None:
        """Append model or environment tokens."""
        self.completion_ids += ids
        self.env_mask += [int(from_model)] * len(ids)
        self.logprobs += logprobs if logprobs is not None else [0.0] * len(ids)


def env_turn_ids(
    tokenizer: Any, messages: list[Message], reply_index: int, closed: bool, **template_kwargs: Any
) -> list[int]:
    """Tokens after a model turn up to the next assistant header: the environment's answer as the template renders it.

    `closed` says whether the model ended its turn itself; if it was cut off at the token limit, the template's
    end-of-turn token opens the environment's tokens so the conversation stays well formed.
    """
    eos = tokenizer.eos_token_id
    before = render_ids(tokenizer, messages[: reply_index + 1], False, **template_kwargs)
    full = render_ids(tokenizer, messages, True, **template_kwargs)
    # The template may write more after the end-of-turn token (ChatML writes "\n"); that belongs to the env.
    ends = [i for i, t in enumerate(before) if t == eos]
    if not ends:
        raise ValueError(
            "the chat template renders an assistant turn without the tokenizer's eos (end-of-turn) token"
        )
    cut = ends[-1] + 1
    if full[:cut] != before[:cut]:
        raise ValueError(
            "the chat template is not prefix-preserving: rendering later messages changed an earlier turn, so "
            "multi-turn token ids cannot be built by concatenation; use a template that renders each message the "
            "same whatever follows it"
        )
    return ([] if closed else [eos]) + full[cut:]


def play_episodes(
    env: Environment,
    specs: Sequence[dict],
    tokenizer: Any,
    generate: GenerateFn,
    *,
    max_episode_tokens: int | None = None,
    max_turn_tokens: int = 0,
    any_live: Callable[[bool], bool] = bool,
    template_kwargs: dict | None = None,
) -> list[TokenEpisode]:
    """Play one episode per spec, all live episodes batched each turn; return them scored, with exact tokens.

    `any_live(local)` tells whether any process still has live episodes: generation is a collective call under
    vLLM server mode or DeepSpeed ZeRO-3, so a process whose episodes are over keeps calling it until all are.
    """
    kwargs = template_kwargs or {}
    runs = []
    for spec in specs:
        episode = env.start(spec)
        runs.append(TokenEpisode(episode, render_ids(tokenizer, episode.messages, True, **kwargs)))
    stop_ids = {tokenizer.eos_token_id}
    while True:
        if max_episode_tokens is not None:
            for run in runs:
                # Out of room for another turn: stop here and score the episode as it stands.
                if not run.episode.done and len(run.context) + max_turn_tokens > max_episode_tokens:
                    run.episode.done = True
                    run.episode.state["truncated"] = True
                    run.drop_env_tail()
        live = [r for r in runs if not r.episode.done]
        if not any_live(bool(live)):
            break
        batch = live or runs[:1]  # a finished process still joins the collective call; its output is dropped
        completions, logprobs = generate([r.context for r in batch])
        replies, turns = [], []
        for i, run in enumerate(live):
            ids = list(completions[i])
            sampled = list(logprobs[i]) if logprobs is not None else None
            context = run.context
            turns.append((len(run.episode.messages), bool(ids) and ids[-1] in stop_ids))
            run.extend(ids, from_model=True, logprobs=sampled)
            content = tokenizer.decode(ids, skip_special_tokens=True)
            replies.append(Reply(content, prompt_ids=context, completion_ids=ids, logprobs=sampled))
        env.advance_all([(run.episode, reply) for run, reply in zip(live, replies, strict=True)])
        for run, (reply_index, closed) in zip(live, turns, strict=True):
            if not run.episode.done:
                run.extend(
                    env_turn_ids(tokenizer, run.episode.messages, reply_index, closed, **kwargs), False
                )
    env.score([r.episode for r in runs])
    return runs


class EpisodeRollout:
    """TRL `rollout_func(prompts, trainer)`: whole episodes of `env` for a generation batch."""

    def __init__(self, env: Environment, max_episode_tokens: int | None = None):
        self.env = env
        self.max_episode_tokens = max_episode_tokens

    def __call__(self, prompts: list[list[Message]], trainer: Any) -> dict[str, list]:
        """One rollout per prompt (TRL already repeats each prompt num_generations times)."""
        specs = [spec_of(p) for p in prompts]
        model = trainer.accelerator.unwrap_model(trainer.model)
        cap = self.max_episode_tokens or getattr(model.config, "max_position_embeddings", None)
        template_kwargs = trainer_template_kwargs(trainer)

        def generate(ids: list[list[int]]) -> tuple[list[list[int]], list[list[float]] | None]:
            # TRL's own backend: transformers.generate here, vLLM when use_vllm (weights synced by TRL).
            return trainer._generate_single_turn(ids, None, {}, num_generations=1)

        runs = play_episodes(
            self.env,
            specs,
            trainer.processing_class,
            generate,
            max_episode_tokens=cap,
            max_turn_tokens=trainer.max_completion_length or 0,
            any_live=_any_live(trainer),
            template_kwargs=template_kwargs,
        )
        has_logprobs = trainer.use_vllm
        return {
            "prompt_ids": [r.prompt_ids for r in runs],
            "completion_ids": [r.completion_ids for r in runs],
            "logprobs": [r.logprobs for r in runs] if has_logprobs else None,
            "env_mask": [r.env_mask for r in runs],
            "episode_reward": [r.episode.reward for r in runs],
            "episode_values": [r.episode.values for r in runs],
            "episode_error": [r.episode.error for r in runs],
        }


def rollout_func(env: Environment, rollout: RolloutConfig) -> Any:
    """GRPO's rollout_func for `env`: whole episodes as one sequence, or one decision per sample when turns read a
    fresh observation (its play_on, explore and branch_at options checked against the env's capabilities), or one
    token per group of a single-turn env's reply (branch_at "token")."""
    if rollout.branch_at == "token":
        from wander.training.token_branch import TokenBranchRollout

        return TokenBranchRollout(env)
    if getattr(env, "full_history", True):
        refuse_decision_options(env, rollout)
        return EpisodeRollout(env, rollout.max_episode_tokens)
    from wander.training.decision_rollout import DecisionRollout

    return DecisionRollout(env, play_on=rollout.play_on, explore=rollout.explore, branch_at=rollout.branch_at)


def refuse_decision_options(env: Environment, rollout: RolloutConfig) -> None:
    """ValueError naming each decision-rollout option (play_on, explore, branch_at) set away from its default for an
    env whose turns read the whole conversation: its GRPO trains whole sampled episodes and would ignore them."""
    defaults = RolloutConfig()
    ignored = [k for k in ("play_on", "explore", "branch_at") if getattr(rollout, k) != getattr(defaults, k)]
    if ignored:
        raise ValueError(
            ", ".join(f"{k}={getattr(rollout, k)!r}" for k in ignored)
            + f" would be ignored by {env.name}: its turns read the whole conversation (full_history), so GRPO "
            "trains whole sampled episodes, not decisions; use "
            + ", ".join(f"{k}={getattr(defaults, k)!r}" for k in ignored)
        )


def _any_live(trainer: Any) -> Callable[[bool], bool]:
    if trainer.accelerator.num_processes == 1:
        return bool
    from accelerate.utils import gather_object

    return lambda local: any(gather_object([local]))


def grpo_trainer(
    env: Environment,
    trainer_cls: type,
    *,
    model: Any,
    args: Any = None,
    rollout: RolloutConfig | None = None,
    **kwargs: Any,
) -> Any:
    """A GRPOTrainer (or subclass) whose rollouts are whole episodes of `env`, rewarded by its rubric."""
    from trl import GRPOConfig

    from wander.core.tool_env import ToolEnv

    rollout = rollout or RolloutConfig()
    args = args if args is not None else GRPOConfig(output_dir=f"{env.name}-grpo")
    for reserved in ("reward_funcs", "train_dataset", "rollout_func", "environment_factory"):
        if kwargs.get(reserved) is not None:
            raise ValueError(
                f"{reserved} is built from the environment when composing {env.name} with GRPO; do not pass it "
                "(change the env's rubric, splits or tools instead)"
            )
    if isinstance(env, ToolEnv) and rollout.tool_protocol == "environment_factory":
        refuse_decision_options(env, rollout)  # TRL's tool loop plays whole episodes
        from wander.training.tools import tool_env_trainer

        return tool_env_trainer(env, trainer_cls, model=model, args=args, rollout=rollout, **kwargs)
    funcs, weights = rubric_reward_funcs(env)
    args = rubric_args(args, weights)
    dataset = rollout_dataset(env, rollout, args, spec_in_prompt=True)
    func = rollout_func(env, rollout)
    if rollout.resample_flat:
        from wander.training.dynamic_sampling import FlatGroupResampling

        # Fresh specs in an order of their own: the dataset's order (its seed) would hand out the next rows.
        seed = (args.seed if rollout.seed is None else rollout.seed) + FRESH_SEED_OFFSET
        func = FlatGroupResampling(func, env, rollout.resample_flat, rollout.split, seed)
    trainer = trainer_cls(
        model=model,
        args=args,
        reward_funcs=funcs,
        train_dataset=dataset,
        rollout_func=func,
        **kwargs,
    )
    if trainer.accelerator.num_processes > 1:
        trainer.rollout_func = RankShare(trainer.rollout_func)
    return trainer


class RankShare:
    """A rollout_func that logs, on each of several processes, the groups (episode specs) that process plays at each
    step: TRL gives every rank a distinct slice of each generation batch, and these lines show which."""

    def __init__(self, rollout: Any):
        self.rollout = rollout

    def __call__(self, prompts: list[list[Message]], trainer: Any) -> dict[str, list]:
        """Log this rank's groups, then play them."""
        groups = list(dict.fromkeys(dump_spec(spec_of(p)) for p in prompts))
        logger.info(
            "rank %d, step %d: %d groups %s",
            trainer.accelerator.process_index,
            trainer.state.global_step,
            len(groups),
            " ".join(groups),
        )
        return self.rollout(prompts, trainer)
