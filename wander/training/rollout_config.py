"""Settings of online training on an environment: which episodes a trainer plays, and in what order."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from wander.core.pipeline_hooks import PipelineHooks, reply_budget
from wander.core.tool_env import ToolEnv

# What follows a decision rollout's branch move (`RolloutConfig.play_on`, `DecisionRollout`).
PLAY_ON = ("sample", "greedy", "expected", "best")
# Where a group branches (`RolloutConfig.branch_at`): a decision rollout's (`DecisionRollout`) or, for a single-turn
# env, at a token (`TokenBranchRollout`).
BRANCH_AT = ("depth", "mistake", "adversary", "token")


@dataclass
class RolloutConfig:
    r"""
    Configuration of the episodes that `GRPOTrainer` and `RLOOTrainer` play when composed with an environment
    (`env >> trainer_spec(GRPOTrainer, ...)`).

    The trainer's dataset is built from the environment's episode specs: one row per episode group, ordered so that
    every generation batch covers every difficulty stratum (see `wander.core.sampling.stratified_order`). The trainer's own
    shuffling is switched off, since the order already is a seeded shuffle.

    Parameters:
        split (`str`, *optional*, defaults to `"train"`):
            Split of the environment's episode specs to train on.
        num_rows (`int` or `None`, *optional*, defaults to `None`):
            Rows (episode groups) in the trainer's dataset. `None` covers `max_steps` exactly when it is set (cycling
            through the split in fresh stratified orders), else one pass over the split.
        seed (`int` or `None`, *optional*, defaults to `None`):
            Seed of the stratified order. `None` uses the trainer's `args.seed`.
        stratified (`bool`, *optional*, defaults to `True`):
            Interleave strata round-robin so that each batch of `num_strata` consecutive rows holds one episode of
            each. Otherwise rows come in a plain seeded shuffle.
        max_episode_tokens (`int` or `None`, *optional*, defaults to `None`):
            GRPO only: an episode whose tokens (model and environment) exceed this is stopped before its next model
            turn and scored as it stands. `None` uses the model's `max_position_embeddings`. Each model turn is capped
            by the trainer's `max_completion_length`.
        tool_protocol (`str`, *optional*, defaults to `"environment_factory"`):
            GRPO with a `ToolEnv` only. `"environment_factory"`: TRL runs the tool-calling loop through the chat
            template's tool support and the env's tools become methods of a TRL environment. `"rollout_func"`: the
            env's own text protocol (`<tool_call>` JSON, tool schemas in the system prompt), exactly as
            `env.evaluate` plays it.
        play_on (`str`, *optional*, defaults to `"sample"`):
            GRPO decision rollouts only (an env whose turns read the current observation, e.g. tic-tac-toe with
            `history="current"`): what follows the sampled branch move. `"sample"`: the game goes on with the
            trainer's sampling; `"greedy"`: the model plays on greedily; `"expected"`: no play-on, the reward is the
            move's expected episode reward over every outcome of the env's randomness with the model greedy after it
            (`env.expected_outcomes`; tic-tac-toe sums over its opponent's answers), the same objective as greedy
            play-on without the luck of one sampled game; `"best"`: the same sum with the env's own best play after
            the move instead of the model's (`env.best_outcomes`; tic-tac-toe's solver keeps the minimax value and
            picks the move with the highest expected outcome against the episode's opponent), so a move is valued by
            itself, not by how well the current model follows it up.
        explore (`float`, *optional*, defaults to `0.0`):
            GRPO decision rollouts only: the share of each group's samples whose branch move is one the group's
            sampled moves did not try (from `env.candidate_replies`), so a confident model still measures its other
            moves. Off-policy: the loss treats them as sampled. Not with vLLM generation.
        branch_at (`str`, *optional*, defaults to `"depth"`):
            GRPO decision rollouts only: the position each group's samples answer. `"depth"`: after a prefix of
            sampled model turns whose length is drawn from the spec's seed. `"mistake"`: where the current model,
            greedy, loses the most reward by its own reply: each group plays `num_generations` greedy games against
            its spec's opponent (opponent seeds drawn from the spec's), every reply valued against the env's best
            candidate (`env.best_outcomes` over `env.candidate_replies`); a group whose games hold no such reply
            branches as with `"depth"`. The positions evaluation finds the greedy model wrong are the ones trained.
            `"adversary"`: as `"mistake"`, but groups first take the positions on the lines that beat the model (an
            opponent that knows its every move: `env.losing_positions`, the `LosingLines` capability) where its own
            reply gives up value, one group each, costliest first.
            `"token"`, a single-turn env only (`SingleTurnEnv`, e.g. reverse_text): each group's samples share the
            greedy reply's prefix up to the token the model is least sure of, sample that token, and go on greedily;
            only that token carries the loss (`wander.training.token_branch`). Not with vLLM generation.
        resample_flat (`int`, *optional*, defaults to `0`):
            GRPO with wander's rollouts only: rounds of dynamic sampling. A group whose samples all got the same
            reward (no advantage, no gradient) is replaced by a group of a fresh spec of `split` and played again,
            up to this many rounds; the shares of flat, replaced and still-flat groups are logged
            (`wander.training.dynamic_sampling`). `0`: off. One process only; not with `branch_at` "mistake" or
            "adversary", whose groups are found, not drawn.
    """

    split: str = "train"
    num_rows: int | None = None
    seed: int | None = None
    stratified: bool = True
    max_episode_tokens: int | None = None
    tool_protocol: str = "environment_factory"
    play_on: str = "sample"
    explore: float = 0.0
    branch_at: str = "depth"
    resample_flat: int = 0

    def __post_init__(self) -> None:
        if self.num_rows is not None and self.num_rows < 1:
            raise ValueError(f"num_rows must be at least 1 or None, got {self.num_rows}")
        if self.tool_protocol not in ("environment_factory", "rollout_func"):
            raise ValueError(
                f"tool_protocol must be 'environment_factory' or 'rollout_func', got {self.tool_protocol!r}"
            )
        if self.play_on not in PLAY_ON:
            raise ValueError(f"play_on must be one of {PLAY_ON}, got {self.play_on!r}")
        if not 0.0 <= self.explore < 1.0:
            raise ValueError(f"explore must be in [0, 1), got {self.explore}")
        if self.resample_flat < 0:
            raise ValueError(f"resample_flat must be 0 (off) or a number of rounds, got {self.resample_flat}")
        if self.resample_flat and self.branch_at in ("mistake", "adversary"):
            raise ValueError(
                f"resample_flat with branch_at={self.branch_at!r}: those groups are found where the model errs, not "
                "drawn from the split, so a fresh spec would not replace one; use branch_at 'depth' or resample_flat 0"
            )
        if self.branch_at not in BRANCH_AT:
            raise ValueError(f"branch_at must be one of {BRANCH_AT}, got {self.branch_at!r}")

    def to_dict(self) -> dict:
        """The config as a plain dict (for params files and MLflow)."""
        return asdict(self)

    def completion_budget(self, env: PipelineHooks, tokens: int | None) -> int:
        """A GRPO `max_completion_length` resolved (`reply_budget`): per model turn, except where TRL's tool loop
        caps a tool env's whole completion (tool results included), there per completion."""
        whole = isinstance(env, ToolEnv) and self.tool_protocol == "environment_factory"
        return reply_budget(env, tokens, "completion" if whole else "turn")
