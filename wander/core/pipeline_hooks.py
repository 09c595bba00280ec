"""The pipeline-facing hooks of `Environment`: what the pipeline asks an env instead of knowing it (evaluation
suite, spec checks, reply budgets, games per cell, curation, teacher), as the `PipelineHooks` base class.

`Environment` inherits these defaults, which fit any rubric-scored environment whose specs carry a `stratum`:
the evaluation suite (`evaluation_suite()`, data: wander/core/evaluation_suite.py) is every difficulty stratum of
the eval and test splits, scored by the rubric's means with 95% intervals. A game against opponents (tic-tac-toe)
returns its opponent matrix instead. Powers only some envs have (exact evaluation, worst case, decision branching,
augmentation) are not hooks here: they are protocols an env opts into (wander/core/capabilities.py).

Reply budgets: `reply_tokens()` is the most tokens one model turn needs, `completion_tokens()` the most a whole
episode's completion needs where one cap covers every turn (TRL's tool-calling loop). The pipeline's budget keys
(`grpo.max_completion_length`, `evaluate.max_new_tokens`, `register.max_new_tokens`) and `wander eval` use them when
left null, through `reply_budget`. An env derives its answer from its texts in UTF-8 bytes (`text_tokens`), a bound
that holds for any tokenizer the pipeline may train.

Games per cell: `suite_games()` is the most episodes every cell of the suite can play, at most
`DEFAULT_SUITE_GAMES`; `evaluate.games` and `wander eval --games` use it when left null, through `games_per_cell`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from wander.core.episode import Episode
from wander.core.evaluation_suite import EvaluationSuite, rubric_suite
from wander.core.policy import Policy
from wander.core.rubric import Rubric

DEFAULT_REPLY_TOKENS = 256
"""An env's reply budget per model turn when it does not say (a long paragraph): too long only costs a rambling
model time, too short cuts good replies silently."""
DEFAULT_SUITE_GAMES = 200
"""Games per cell when the env's splits hold more: a rate's 95% interval is then at most about +-0.07 (+-0.14 at 50
games)."""
FRAME_TOKENS = 16
"""Tokens a chat template may add around one message it renders between model turns: a role header, an
end-of-message and the next turn's header (ChatML's, around a tool result, are a handful)."""


def text_tokens(text: str) -> int:
    """At most how many tokens any tokenizer makes of `text` as a reply: its UTF-8 bytes (every token of a byte-level
    or character vocabulary decodes to at least one byte), a possible word-start token and the end-of-turn token."""
    return len(text.encode()) + 2


@dataclass(frozen=True)
class SpecChecks:
    """What every episode spec of an env holds, for the pipeline's validation (generate, synthesize, curate)."""

    columns: tuple[str, ...] = ("seed", "stratum")
    """Every spec column, in order: what the generate stage writes."""
    strata: int = 1
    """Difficulty strata `0..strata-1`, balanced in every split."""
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Numeric columns and their bounds."""
    sets: dict[str, list] = field(default_factory=dict)
    """Columns whose values come from a fixed set."""
    kept: tuple[str, ...] = ()
    """Spec columns an SFT row keeps besides seed and stratum (what its checks read)."""
    means: dict[str, str] = field(default_factory=dict)
    """Generate's per-split summary: reported name -> spec column whose mean it is."""


class PipelineHooks:
    """The pipeline's questions to an environment, with defaults for a rubric-scored env with strata.

    The defaults read what every `Environment` has (declared here; the environment sets them): its `name`, `rubric`,
    `max_turns` and its splits through `get_dataset`."""

    name: str
    """The environment's name (`Environment.__init__` sets it)."""
    rubric: Rubric
    """The rubric that scores its episodes (`Environment.__init__` sets it)."""
    max_turns: int = 1
    """The most model turns an episode takes (`Environment.__init__` sets it; 1 where nothing does)."""
    outcomes: tuple[str, ...] = ()
    """Labels `state["outcome"]` takes at the end of an episode; () when episodes have none."""
    teacher_skill = 0.5
    """The embedded teacher's default slip rate."""
    reference_policies: tuple[str, ...] = ("expert",)
    """Scripted rows `wander eval` plays when given no policy (`expert`: the teacher without slips)."""

    def get_dataset(self, split: str = "train") -> Any:
        """The episode specs of a split (`Environment.get_dataset`); a class with hooks alone has none."""
        raise NotImplementedError(f"{type(self).__name__} has no episode specs: it is not an Environment")

    def reply_tokens(self) -> int:
        """The most tokens one model turn needs: its longest good reply and the end-of-turn token, for any tokenizer
        (`text_tokens`); by default `DEFAULT_REPLY_TOKENS`. An env whose replies are longer, or much shorter, says."""
        return DEFAULT_REPLY_TOKENS

    def completion_tokens(self) -> int:
        """The most tokens a whole episode's completion needs where one cap covers all its turns (TRL's tool loop):
        by default `max_turns` replies at `reply_tokens()`; an env that answers between turns adds its messages."""
        return self.max_turns * self.reply_tokens()

    def suite_games(self) -> int:
        """The most games every cell of the suite can play, at most `DEFAULT_SUITE_GAMES`: by default the fewest
        episodes of any (stratum, split) cell that `suite_specs` slices; an env with its own `suite_specs` says."""
        suite = self.evaluation_suite()
        fewest = DEFAULT_SUITE_GAMES
        for side in suite.sides:
            strata = [int(r.get("stratum", 0)) for r in self.get_dataset(side)]
            fewest = min([fewest, *(strata.count(stratum) for stratum in range(len(suite.groups)))])
        return fewest

    @property
    def teacher_model(self) -> str:
        """The model name the embedded teacher answers to."""
        return f"{self.name}-teacher"

    def evaluation_suite(self) -> EvaluationSuite:
        """The suite's columns, metrics, headline and report: by default each rubric metric's mean (reward first)
        per difficulty stratum of the eval and test splits."""
        return rubric_suite(("reward", *self.rubric.names), self.spec_checks().strata)

    def check_suite_groups(self, names: Sequence[str]) -> None:
        """Raise ValueError naming the accepted groups when one of `names` is not a column group of this env."""
        known = list(self.evaluation_suite().groups)
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ValueError(f"{self.name} has no suite column(s) {unknown}; its columns are {known}")

    def suite_specs(self, groups: Sequence[str], games: int, seed: int) -> list[dict]:
        """`games` specs per (group, side), cell after cell: the first of the split's specs in that stratum."""
        self.check_suite_groups(groups)
        suite = self.evaluation_suite()
        specs = []
        for group in groups:
            stratum = suite.groups.index(group)
            for side in suite.sides:
                # The splits are frozen by the env's own seed: the suite seed has nothing left to choose.
                rows = [r for r in self.get_dataset(side) if r.get("stratum", 0) == stratum][:games]
                if len(rows) < games:
                    raise ValueError(
                        f"{self.name}: the {side} split has {len(rows)} episodes in {group}, fewer than the "
                        f"{games} games per cell asked; lower evaluate.games or grow the split"
                    )
                specs += [{**r, "opponent": group, "side": side} for r in rows]
        return specs

    def render_episode(self, episode: Episode) -> str:
        """An episode as plain text for a report: every message, role first."""
        return "\n".join(f"[{m['role']}] {m.get('content') or ''}" for m in episode.messages).replace(
            "`", "'"
        )

    def spec_checks(self) -> SpecChecks:
        """What this env's episode specs hold: by default the columns and strata of its train split."""
        first = self.get_dataset("train")[0]
        strata = {int(r.get("stratum", 0)) for s in ("train", "eval", "test") for r in self.get_dataset(s)}
        return SpecChecks(columns=tuple(first), strata=max(strata) + 1)

    def curation_defaults(self) -> dict[str, Any]:
        """Curate's filters when params leave them null: allowed outcomes and rubric floors."""
        return {"allowed_outcomes": list(self.outcomes), "min_values": {}}

    def teacher_policy(self, skill: float, seed: int) -> Policy:
        """The scripted teacher the embedded server plays with, at a slip rate, seeded per request."""
        raise ValueError(
            f"{self.name} has no embedded teacher; set synthesize.teacher_url to a real endpoint"
        )

    def scripted_policy(self, name: str, seed: int = 0) -> Policy | None:
        """A scripted player of this env by name (`teacher`, `expert-<slip>`: the teacher), or None for others."""
        if name == "teacher":
            return self.teacher_policy(self.teacher_skill, seed)
        kind, _, slip = name.partition("-")
        if kind != "expert":
            return None
        try:
            skill = float(slip) if slip else 0.0
        except ValueError:
            raise ValueError(f"bad slip rate in {name!r}; write e.g. expert-0.25") from None
        return self.teacher_policy(skill, seed)


def reply_budget(env: PipelineHooks, tokens: int | None, per: Literal["turn", "completion"] = "turn") -> int:
    """A reply budget in tokens: `tokens` when given (an explicit number wins), else the env's, per model turn
    (`reply_tokens`) or per whole completion (`completion_tokens`, for a trainer that caps all turns together)."""
    if tokens is not None:
        return tokens
    return env.reply_tokens() if per == "turn" else env.completion_tokens()


def games_per_cell(env: PipelineHooks, games: int | None) -> int:
    """Games per cell of the suite: `games` when given (an explicit number wins; `suite_specs` refuses one the
    splits cannot fill), else the env's `suite_games()`; raises ValueError when the env's splits leave a cell empty."""
    if games is not None:
        return games
    resolved = env.suite_games()
    if resolved < 1:
        raise ValueError(
            f"{env.name}: a cell of its suite has no eval or test episode; grow the split (generate.num_eval, "
            "generate.num_test) or lower the env's num_groups"
        )
    return resolved
