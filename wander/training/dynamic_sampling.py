"""Dynamic sampling: a GRPO group whose samples all got the same reward carries no gradient (its advantages are all
0), so it is replaced by a group of a fresh episode spec and played again, up to a bound of rounds (DAPO's idea).

    rollout = FlatGroupResampling(EpisodeRollout(env), env, rounds=2, split="train", seed=0)

It wraps any of wander's rollout functions (whole episodes, decisions, token branches): the replacement groups are
played by the same rollout, their samples put where the flat group's were, so TRL sees a batch of the same size
whose rewards, prompt ids and completions are the new group's. The fresh specs come from the split in a seeded
stratified order of their own, skipping the specs of the batch. Each generation batch logs, through TRL's
metrics, the share of its groups that came out flat (`dynamic/flat_share`), the share replaced by a group with
spread (`dynamic/replaced_share`) and the share still flat after the last round (`dynamic/still_flat_share`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from wander.core.environment import Environment
from wander.core.policy import Message
from wander.training.episode_data import dump_spec, episode_prompt, spec_of, spec_order

RolloutFn = Callable[[list[list[Message]], Any], dict[str, list]]
SPREAD = 1e-9  # rewards closer than this count as equal


def groups_of(prompts: list[list[Message]]) -> list[range]:
    """The sample indices of each group: consecutive prompts of the same spec (TRL repeats each prompt
    `num_generations` times in a row)."""
    specs = [dump_spec(spec_of(p)) for p in prompts]
    groups, start = [], 0
    for i in range(1, len(specs) + 1):
        if i == len(specs) or specs[i] != specs[start]:
            groups.append(range(start, i))
            start = i
    return groups


def is_flat(rewards: list[float]) -> bool:
    """Whether every reward of a group is the same (a group of one is flat)."""
    return max(rewards) - min(rewards) < SPREAD


class FlatGroupResampling:
    """A rollout_func that replaces each flat group of `rollout`'s batch by a group of a fresh spec of `split`, up
    to `rounds` times."""

    def __init__(
        self, rollout: RolloutFn, env: Environment, rounds: int, split: str = "train", seed: int = 0
    ):
        if rounds < 1:
            raise ValueError(
                f"rounds must be at least 1, got {rounds}: 0 means no resampling, so do not wrap"
            )
        self.rollout, self.env, self.rounds = rollout, env, rounds
        self.split, self.seed = split, seed
        self._fresh: Iterator[dict] | None = None

    def __call__(self, prompts: list[list[Message]], trainer: Any) -> dict[str, list]:
        """Play the batch, then replace its flat groups round by round; log the shares."""
        if trainer.accelerator.num_processes > 1:
            raise ValueError(
                "resampling flat groups runs on one process: each process would replay a different number of "
                "groups, and generation is a collective call there; set grpo resample_flat to 0"
            )
        output = self.rollout(prompts, trainer)
        groups = groups_of(prompts)
        flat = [g for g in groups if is_flat([output["episode_reward"][i] for i in g])]
        first_flat = len(flat)
        in_batch = {dump_spec(spec_of(prompts[g[0]])) for g in groups}
        for _ in range(self.rounds):
            if not flat:
                break
            fresh = [self._next_spec(in_batch) for _ in flat]
            replay = [
                episode_prompt(self.env, spec, spec_in_prompt=True)
                for spec, g in zip(fresh, flat, strict=True)
                for _ in g
            ]
            played = self.rollout(replay, trainer)
            still, offset = [], 0
            for g in flat:
                rewards = played["episode_reward"][offset : offset + len(g)]
                if is_flat(rewards):
                    still.append(g)
                else:
                    _put(output, played, g, offset)
                offset += len(g)
            flat = still
        metrics = trainer._metrics["train"]  # TRL averages these into the step's logged metrics
        metrics["dynamic/flat_share"].append(first_flat / len(groups))
        metrics["dynamic/replaced_share"].append((first_flat - len(flat)) / len(groups))
        metrics["dynamic/still_flat_share"].append(len(flat) / len(groups))
        return output

    def _next_spec(self, skip: set[str]) -> dict:
        """The next spec of the split's fresh-spec order not in the batch (the order restarts, reseeded, at its end)."""
        for _ in range(2):
            if self._fresh is None:
                self._fresh = iter(spec_order(self.env, self.split, None, self.seed))
                self.seed += 1
            for spec in self._fresh:
                if dump_spec(spec) not in skip:
                    skip.add(dump_spec(spec))
                    return spec
            self._fresh = None
        raise ValueError(
            f"{self.env.name} split {self.split!r} has no spec left outside the batch to replace a flat group with; "
            "give the split more specs or set grpo resample_flat to 0"
        )


def _put(output: dict[str, list], played: dict[str, list], group: range, offset: int) -> None:
    """Write a replayed group's samples (from `offset` in `played`) over the samples of `group` in `output`."""
    for key, values in output.items():
        if values is None:
            continue
        for k, i in enumerate(group):
            values[i] = played[key][offset + k]
