"""GRPO on a single-turn env, one token at a time: each group branches where the greedy reply is least sure.

A whole-reply group of samples differs at many tokens at once, and the reward of each sample is shared by all of its
tokens, so the few tokens that decide the reward get little of the signal. `TokenBranchRollout` (`branch_at="token"`)
asks the model for its greedy reply to the group's prompt, finds the token the model was least sure of (the lowest
top-1 probability), and lets the group's samples differ there only: each sample takes the greedy prefix, a token
sampled at that position (at the trainer's temperature), then the greedy continuation. Only the sampled token carries
the loss (the prefix joins the prompt; the continuation is masked like an environment's tokens), and the reward is the
env's score of the whole reply, so the group compares the model's candidate tokens at the position it is unsure of,
each followed up the way evaluation plays it (docs/experiments/environments.md, reverse_text).
"""

from __future__ import annotations

from typing import Any

import torch

from wander.core.environment import Environment, SingleTurnEnv
from wander.core.policy import Message, Reply
from wander.training.chat_tokens import render_ids, trainer_template_kwargs
from wander.training.episode_data import dump_spec, spec_of


def least_sure_position(step_logits: list[torch.Tensor]) -> int:
    """The index of the greedy step whose top-1 probability is lowest (the first of equals)."""
    top = [torch.softmax(logits.float(), -1).max().item() for logits in step_logits]
    return min(range(len(top)), key=top.__getitem__)


def _greedy(
    model: Any, rows: list[list[int]], max_new_tokens: int, pad: int, eos: int, **options: Any
) -> Any:
    """`model.generate`, greedy, on rows of one length (no padding: every position attended)."""
    ids = torch.tensor(rows, device=model.device)
    return model.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        do_sample=False,
        max_new_tokens=max_new_tokens,
        pad_token_id=pad,
        eos_token_id=eos,
        **options,
    )


def _reply_ids(sequence: list[int], eos: int) -> list[int]:
    """Generated ids up to and including the first eos (generate pads a finished row after it)."""
    return sequence[: sequence.index(eos) + 1] if eos in sequence else sequence


class TokenBranchRollout:
    """TRL `rollout_func(prompts, trainer)` for a single-turn env: each group's samples differ at one token only."""

    def __init__(self, env: Environment):
        if not isinstance(env, SingleTurnEnv):
            raise ValueError(
                f"branch_at='token' trains one token of a single reply; {type(env).__name__} plays several turns "
                "(use branch_at='depth', or history='current' and branch_at='mistake' where the env has them)"
            )
        self.env = env

    def __call__(self, prompts: list[list[Message]], trainer: Any) -> dict[str, list]:
        """One sample per prompt; a group is the prompts of one spec (TRL repeats each num_generations times)."""
        if trainer.use_vllm:
            raise NotImplementedError("branch_at='token' generates with transformers; set use_vllm false")
        tokenizer = trainer.processing_class
        template_kwargs = trainer_template_kwargs(trainer)
        model = trainer.accelerator.unwrap_model(trainer.model)
        budget = trainer.max_completion_length
        eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
        pad = eos if pad is None else pad
        specs = [spec_of(p) for p in prompts]
        groups: dict[str, list[int]] = {}
        for i, spec in enumerate(specs):
            groups.setdefault(dump_spec(spec), []).append(i)
        samples: list[dict] = [{} for _ in specs]
        sureness = []
        training = model.training
        model.eval()  # dropout off: the greedy reply and its continuations are what evaluation would play
        try:
            with torch.no_grad():
                for members in groups.values():
                    episode = self.env.start(specs[members[0]])
                    prompt = render_ids(tokenizer, episode.messages, True, **template_kwargs)
                    out = _greedy(
                        model, [prompt], budget, pad, eos, output_scores=True, return_dict_in_generate=True
                    )
                    greedy = _reply_ids(out.sequences[0, len(prompt) :].tolist(), eos)
                    at = least_sure_position([s[0] for s in out.scores[: len(greedy)]])
                    probs = torch.softmax(out.scores[at][0].float() / trainer.temperature, -1)
                    sureness.append(torch.softmax(out.scores[at][0].float(), -1).max().item())
                    tokens = torch.multinomial(probs, len(members), replacement=True).tolist()
                    followups = {}
                    left = budget - at - 1
                    distinct = sorted({t for t in tokens if t != eos})
                    if distinct and left > 0:
                        start = len(prompt) + at + 1
                        rest = _greedy(model, [prompt + greedy[:at] + [t] for t in distinct], left, pad, eos)
                        for t, row in zip(distinct, rest[:, start:].tolist(), strict=True):
                            followups[t] = _reply_ids(row, eos)
                    for i, token in zip(members, tokens, strict=True):
                        samples[i] = {
                            "prompt_ids": prompt + greedy[:at],
                            "token": token,
                            "rest": followups.get(token, []),
                            "reply": greedy[:at] + [token] + followups.get(token, []),
                        }
        finally:
            model.train(training)
        episodes = [self.env.start(spec) for spec in specs]
        for episode, sample in zip(episodes, samples, strict=True):
            self.env.advance(episode, Reply(tokenizer.decode(sample["reply"], skip_special_tokens=True)))
        self.env.score(episodes)
        # TRL averages `_metrics` into each logged step: how sure the greedy model was where the groups branched.
        trainer._metrics["train"]["branch/top_probability"].append(sum(sureness) / len(sureness))
        return {
            "prompt_ids": [s["prompt_ids"] for s in samples],
            "completion_ids": [[s["token"], *s["rest"]] for s in samples],
            "logprobs": None,
            "env_mask": [[1] + [0] * len(s["rest"]) for s in samples],
            "episode_reward": [ep.reward for ep in episodes],
            "episode_values": [ep.values for ep in episodes],
            "episode_error": [ep.error for ep in episodes],
        }
