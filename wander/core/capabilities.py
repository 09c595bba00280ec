"""Powers only some environments have, as small protocols an env opts into by defining their members.

The base `Environment` has none of them. Code that needs one checks `isinstance(env, Protocol)`: where the power is
required (decision rollouts that play on by expected outcomes) `require` raises `MissingCapability`, naming the
protocol and what to do instead; where it is optional (exact results in a report) the code skips it. Tic-tac-toe
has them all (envs/tictactoe/pipeline.py and env.py): its opponent's randomness can be enumerated and it can
solve itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from wander.core.episode import Episode
from wander.core.policy import Policy, Reply

Branches = Sequence[tuple[Episode, Reply]]


@runtime_checkable
class ExactEvaluation(Protocol):
    """Exact expected metrics of a deterministic policy per column group, with no sampling noise."""

    exact_note: str
    """How the exact results are computed, for the report."""
    exact_columns: tuple[tuple[str, str], ...]
    """(result key, column label): what the report's table of exact results shows."""

    def exact_suite(self, policy: Policy, groups: Sequence[str]) -> dict[str, dict[str, float]]:
        """Per column group, the policy's expected metrics (keys as `exact_columns` names them; a key named as a
        suite metric is that metric's exact value, which the promotion gate compares instead of sampled cells)."""
        ...


@runtime_checkable
class WorstCase(Protocol):
    """The outcome a deterministic policy is held to by an opponent that knows its every move (a best response)."""

    def worst_case(self, policy: Policy) -> dict[str, dict]:
        """Per side, the policy's worst outcome and the line to it."""
        ...

    def worst_case_lines(self, worst: Mapping[str, Mapping[str, dict]]) -> list[str]:
        """Markdown: the report's section on the worst cases of every row (policy -> `worst_case` result)."""
        ...

    def worst_case_summary(self, worst: Mapping[str, dict]) -> list[str]:
        """Plain text: the run summary's lines on one row's worst case (a `worst_case` result)."""
        ...


@runtime_checkable
class LosingLines(Protocol):
    """Where a deterministic policy can be beaten: the lines an opponent that knows its every move wins by."""

    def losing_positions(self, policy: Policy) -> list[Episode]:
        """Every position on those lines where the policy is to move, as an episode against that opponent's best
        play from there (so `best_outcomes` values a reply as that opponent would answer it); empty when no line
        beats the policy (its worst case is no loss on any side)."""
        ...


@runtime_checkable
class DecisionTree(Protocol):
    """The games a teacher plays against every reply its opponents can make: every position a student that plays
    like it meets, each asked once (synthesize's `mode: tree`)."""

    def decision_tree(self, policy: Policy, votes: int) -> list[Episode]:
        """One finished episode per leaf of that tree, as each side, replayable from its spec; at each position
        `policy` is asked `votes` times and the env's verifier chooses among its replies (the tree is then one
        consistent player's)."""
        ...


@runtime_checkable
class CandidateReplies(Protocol):
    """An enumerable action space: every distinct reply worth trying at a turn (GRPO's exploration)."""

    def candidate_replies(self, episode: Episode) -> list[str]:
        """Every distinct reply worth trying at the episode's current turn."""
        ...


@runtime_checkable
class ExpectedOutcomes(Protocol):
    """Randomness that can be enumerated: a reply's expected outcome over every outcome of the env's own chance."""

    def expected_outcomes(self, branches: Branches, policy: Policy) -> list[dict[str, float]]:
        """Expected reward and rubric values of each episode after its reply, `policy` (greedy) playing on."""
        ...


@runtime_checkable
class BestOutcomes(Protocol):
    """A solver: a reply's expected outcome with the env's own best play after it."""

    def best_outcomes(self, branches: Branches) -> list[dict[str, float]]:
        """Expected reward and rubric values of each episode after its reply, the env's best play after it."""
        ...


@runtime_checkable
class Augmentation(Protocol):
    """Equivalent games: other conversations that teach the same moves (tic-tac-toe: the board's symmetries)."""

    def equivalent_games(self, messages: list[dict]) -> list[list[dict]]:
        """The other games equivalent to this one (not itself)."""
        ...


@dataclass(frozen=True)
class Position:
    """What the person sees: the board's squares row by row (a label each, '' empty) and the moves they may play,
    as they type them; `square_moves` maps a square to the move a click on it plays (tic-tac-toe's free cells)."""

    squares: tuple[str, ...]
    moves: tuple[str, ...]
    square_moves: dict[int, str] = field(default_factory=dict)
    # What a move is, for the person: "a free cell's number", "a move in UCI (e2e4)".
    move_hint: str = "a move"


@runtime_checkable
class BoardGame(Protocol):
    """An env whose episodes a person can play as its opponent in `wander ui` (wander/ui/play.py): the policy's move is
    held until the person answers, then the env plays both, the person's move forced as its opponent's reply."""

    def play_spec(self, spec: dict, policy_first: bool) -> dict:
        """`spec` as a game from the start position, the policy moving first or second, no opponent move forced."""
        ...

    def person_side(self, policy_first: bool) -> str:
        """The person's side (mark or colour) when the policy moves first or second."""
        ...

    def position(self, state: dict, reply: str | None = None) -> Position:
        """The position at an episode's `state` after the policy's `reply` (None: as it stands); a ValueError when
        the env would not take `reply` as a move there."""
        ...

    def force_reply(self, target: dict, move: str) -> None:
        """Force the opponent's next move to the person's `move` (a `Position`'s): in a spec, or an episode state,
        whose `forced_replies` list holds the moves still to force."""
        ...


class MissingCapability(ValueError):
    """An environment lacks a capability the caller needs; the message names the protocol and the way out."""


def require(env: Any, capability: type, purpose: str, instead: str) -> None:
    """Raise MissingCapability when `env` does not implement `capability`, saying `purpose` needs it and `instead`."""
    if isinstance(env, capability):
        return
    members = ", ".join(f"`{m}`" for m in _members(capability))
    raise MissingCapability(
        f"{purpose} needs an environment with the {capability.__name__} capability "
        f"(wander.core.capabilities.{capability.__name__}: {members}); {getattr(env, 'name', env)!r} does not "
        f"have it: {instead}"
    )


def _members(capability: type) -> list[str]:
    """The names a protocol asks for, in the order it declares them."""
    declared = [*capability.__dict__.get("__annotations__", {}), *vars(capability)]
    return [n for n in dict.fromkeys(declared) if not n.startswith("_")]
