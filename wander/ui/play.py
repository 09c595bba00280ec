"""Games a person plays in `wander ui`: against a policy on a board game, or typing a policy's turns in any env.

A board game is an env that opts in (`BoardGame`): its episode state holds the board as a string of cells ('.'
empty) and the model's `mark`, and its opponent's replies can be forced through the state's `forced_replies` (as
exact evaluation forces them; tic-tac-toe has all three). The person is that opponent: the policy's reply is held
until the person picks a cell, then the env plays both moves with the person's forced, so the episode is the env's
own (same messages, rubric, reward). Every raw reply is kept with whether the env accepted it.
"""

from __future__ import annotations

import copy
import random
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from wander.core.environment import Environment
from wander.core.episode import Episode
from wander.core.policy import Policy, Reply

MAX_GAMES = 64  # games kept in memory; the oldest goes first


class PlayError(ValueError):
    """Input a game cannot take (a bad move text, a taken cell, a finished game): the message says what to do."""


@runtime_checkable
class BoardGame(Protocol):
    """An env whose episodes a person can play as the opponent (see the module docstring)."""

    def move_of(self, reply: str, board: str) -> int | None:
        """The cell `reply` plays at `board`; None for no move, an off-board or a taken cell."""
        ...

    def reply_for(self, board: str, cell: int) -> str:
        """The reply that plays `cell` at `board`."""
        ...


@dataclass
class Turn:
    """One reply of the policy (or of the person typing the policy's turn), as the env took it."""

    who: str
    raw: str
    valid: bool


@dataclass
class Game:
    """One game in progress: the env's episode, whose turn it is and every reply so far."""

    id: str
    env: Environment
    policy_name: str
    policy: Policy | None
    person_mark: str | None  # board games: the person's mark; None: the person types the policy's turns
    episode: Episode | None
    spec: dict
    pending: str | None = None  # the policy's move, held until the person answers it
    turns: list[Turn] = field(default_factory=list)
    empty_board: str = ""

    @property
    def board_game(self) -> bool:
        """Whether the person plays the opponent on a board."""
        return self.person_mark is not None

    @property
    def done(self) -> bool:
        """Whether the episode is over."""
        return self.episode is not None and self.episode.done

    def board(self) -> str:
        """The board the person sees: after the policy's held move, if any."""
        if self.episode is None:
            return self.empty_board
        cells = self.episode.state["board"]
        if self.pending is not None:
            cell = self.env.move_of(self.pending, cells)
            assert cell is not None  # only valid moves are held
            cells = cells[:cell] + self.episode.state["mark"] + cells[cell + 1 :]
        return cells

    def open_cells(self) -> list[int]:
        """The cells the person may pick now (none once the game is over)."""
        return [] if self.done else [i for i, c in enumerate(self.board()) if c == "."]


class Games:
    """The games of one `wander ui` server, by id; new game seeds come from the server's seed."""

    def __init__(self, seed: int = 0):
        self._rng = random.Random(seed)
        self._games: OrderedDict[str, Game] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """How many games are kept."""
        with self._lock:
            return len(self._games)

    def add(self, game: Game) -> Game:
        """Keep `game` (dropping the oldest beyond MAX_GAMES)."""
        with self._lock:
            self._games[game.id] = game
            while len(self._games) > MAX_GAMES:
                self._games.popitem(last=False)
        return game

    def get(self, game_id: str) -> Game:
        """A game by id; a PlayError when it is unknown (or was dropped)."""
        with self._lock:
            game = self._games.get(game_id)
        if game is None:
            raise PlayError(
                f"no game {game_id!r} (games are kept in memory while the server runs): start a new one"
            )
        return game

    def draw(self) -> tuple[str, int]:
        """A new game's id and episode seed."""
        with self._lock:
            return f"g{len(self._games)}-{self._rng.randrange(16**8):08x}", self._rng.randrange(10**9)


def new_game(
    games: Games, env: Environment, policy_name: str, policy: Policy, person_side: str | None
) -> Game:
    """Start a game: on a board game the person plays `person_side` ('first' or 'second'); else the person types
    the policy's turns or lets it play them. A policy that moves first moves now."""
    game_id, seed = games.draw()
    spec = env.make_spec(seed)
    if person_side is None or not isinstance(env, BoardGame):
        game = Game(game_id, env, policy_name, policy, None, env.start(spec), spec)
        return games.add(game)
    if person_side not in ("first", "second"):
        raise PlayError(f"side {person_side!r}: choose 'first' or 'second'")
    policy_first = person_side == "second"
    spec = {**spec, "model_starts": policy_first, "start_moves": [], "forced_replies": []}
    # The empty board and each side's mark, read from the env: the mover's mark when it starts, and when it answers.
    opening = env.start({**spec, "model_starts": True})
    answering = env.start(
        {**spec, "model_starts": False, "forced_replies": [opening.state["board"].index(".")]}
    )
    person_mark = answering.state["mark"] if policy_first else opening.state["mark"]
    game = Game(
        game_id, env, policy_name, policy, person_mark, None, spec, empty_board=opening.state["board"]
    )
    if policy_first:
        game.episode = env.start(spec)
        policy_turn(game)
    return games.add(game)


def person_move(game: Game, text: str) -> None:
    """The person's move: a cell number; then the policy answers."""
    if not game.board_game:  # a form posted to the wrong game's page: no board to move on
        raise PlayError("this game has no board: type the policy's turn, or let the policy play it")
    if game.done:
        raise PlayError("this game is over: start a new one")
    try:
        cell = int(str(text).strip())
    except ValueError:
        raise PlayError(f"bad move {text!r}: give a cell number from 0 to {len(game.board()) - 1}") from None
    if cell not in game.open_cells():
        raise PlayError(f"cell {cell} is not free on this board: pick one of {game.open_cells()}")
    if game.episode is None:  # the person opens: the env plays it as its opponent's first move
        game.episode = game.env.start({**game.spec, "model_starts": False, "forced_replies": [cell]})
    else:
        assert game.pending is not None
        game.episode.state["forced_replies"] = [cell]
        _advance(game, game.pending)
        game.pending = None
    game.turns.append(Turn("person", str(cell), True))
    if not game.done:
        policy_turn(game)


def policy_turn(game: Game) -> None:
    """The policy replies until it makes a move the person must answer, or the game ends; every reply is kept.

    An invalid reply is played at once (the env counts it and asks again, or ends the game at its turn limit); a
    valid one that ends the game is played; any other is held for the person's answer.
    """
    assert game.policy is not None and game.episode is not None
    while not game.done:
        raw = game.policy([game.env.observation(game.episode)])[0].content
        cells = game.episode.state["board"]
        if game.env.move_of(raw, cells) is None:
            game.turns.append(Turn(game.policy_name, raw, False))
            _advance(game, raw)
            continue
        game.turns.append(Turn(game.policy_name, raw, True))
        cell, mark = game.env.move_of(raw, cells), game.episode.state["mark"]
        after = cells[:cell] + mark + cells[cell + 1 :]
        # Probe a copy with any free cell forced as the answer: if the board stays as the policy left it, its move
        # ended the game (a win, a draw, the turn limit) and the copy is the episode; else the person answers.
        trial = copy.deepcopy(game.episode)
        trial.state["forced_replies"] = [i for i, c in enumerate(after) if c == "."][:1]
        game.env.advance(trial, Reply(raw))
        if trial.state["board"] == after:
            trial.state["forced_replies"] = []  # the probe was never played
            game.episode = trial
            if trial.done:
                game.env.score([trial])
            continue
        game.pending = raw
        return


def typed_turn(game: Game, text: str | None) -> None:
    """Any env: the person's text as the policy's turn, or (None) the policy's own reply."""
    if game.board_game:  # typed text would bypass the held move and the person's forced reply
        raise PlayError("in a board game you play the opponent: pick a free cell")
    if game.done:
        raise PlayError("this episode is over: start a new one")
    assert game.episode is not None
    if text is None:
        if game.policy is None:
            raise PlayError("no policy chosen for this game: type the turn instead")
        text, who = game.policy([game.env.observation(game.episode)])[0].content, game.policy_name
    else:
        who = "person"
    game.turns.append(Turn(who, text, True))
    _advance(game, text)


def _advance(game: Game, raw: str) -> None:
    assert game.episode is not None
    game.env.advance(game.episode, Reply(raw))
    if game.episode.done:
        game.env.score([game.episode])
