"""Games a person plays in `wander ui`: against a policy on a board game, or typing a policy's turns in any env.

A board game is an env that opts in (`BoardGame`, wander/core/capabilities.py): it says what the person sees at a
position (`Position`: the board's squares and the moves the person may play) and lets the opponent's next move be
forced (as exact evaluation forces it; tic-tac-toe and chess do both). The person is that opponent: the policy's
reply is held until the person picks a move, then the env plays both moves with the person's forced, so the episode
is the env's own (same messages, rubric, reward). Every raw reply is kept with whether the env accepted it.
"""

from __future__ import annotations

import copy
import random
import threading
from collections import OrderedDict
from dataclasses import dataclass, field, replace

from wander.core.capabilities import BoardGame, Position
from wander.core.environment import Environment
from wander.core.episode import Episode
from wander.core.policy import Policy, Reply

MAX_GAMES = 64  # games kept in memory; the oldest goes first


class PlayError(ValueError):
    """Input a game cannot take (a bad move text, a taken cell, a finished game): the message says what to do."""


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
    person_mark: str | None  # board games: the person's side; None: the person types the policy's turns
    episode: Episode | None
    spec: dict
    pending: str | None = None  # the policy's move, held until the person answers it
    turns: list[Turn] = field(default_factory=list)
    start: Position | None = None  # board games: the position before the first move

    @property
    def board_game(self) -> bool:
        """Whether the person plays the opponent on a board."""
        return self.person_mark is not None

    @property
    def done(self) -> bool:
        """Whether the episode is over."""
        return self.episode is not None and self.episode.done

    def position(self) -> Position:
        """The position the person sees: after the policy's held move, if any; no moves once the game is over."""
        if self.episode is None:
            assert self.start is not None
            return self.start
        seen = self.env.position(self.episode.state, self.pending)
        return replace(seen, moves=(), square_moves={}) if self.done else seen


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
    spec = env.play_spec(spec, policy_first)
    # Before the first move: the start position as the policy would face it, the person's moves the same ones.
    start = env.position(env.start(env.play_spec(spec, True)).state)
    game = Game(game_id, env, policy_name, policy, env.person_side(policy_first), None, spec, start=start)
    if policy_first:
        game.episode = env.start(spec)
        policy_turn(game)
    return games.add(game)


def person_move(game: Game, text: str) -> None:
    """The person's move; then the policy answers."""
    if not game.board_game:  # a form posted to the wrong game's page: no board to move on
        raise PlayError("this game has no board: type the policy's turn, or let the policy play it")
    if game.done:
        raise PlayError("this game is over: start a new one")
    move, seen = str(text).strip(), game.position()
    if move not in seen.moves:
        shown = ", ".join(seen.moves[:40]) + (" ..." if len(seen.moves) > 40 else "")
        raise PlayError(f"{move[:20]!r} is not a move here: give {seen.move_hint}, one of {shown}")
    env = game.env
    assert isinstance(env, BoardGame)
    if game.episode is None:  # the person opens: the env plays it as its opponent's first move
        spec = dict(game.spec)
        env.force_reply(spec, move)
        game.episode = env.start(spec)
    else:
        assert game.pending is not None
        env.force_reply(game.episode.state, move)
        _advance(game, game.pending)
        game.pending = None
    game.turns.append(Turn("person", move, True))
    if not game.done:
        policy_turn(game)


def policy_turn(game: Game) -> None:
    """The policy replies until it makes a move the person must answer, or the game ends; every reply is kept.

    An invalid reply is played at once (the env counts it and asks again, or ends the game at its turn limit); a
    valid one that ends the game is played; any other is held for the person's answer.
    """
    env = game.env
    assert game.policy is not None and game.episode is not None and isinstance(env, BoardGame)
    while not game.done:
        raw = game.policy([env.observation(game.episode)])[0].content
        after = _position_after(game, raw)
        game.turns.append(Turn(game.policy_name, raw, after is not None))
        if after is None:
            _advance(game, raw)
            continue
        # Probe a copy with one of the person's moves forced as the answer: if the board stays as the policy left
        # it, its move ended the game (a win, a draw, the turn limit) and the copy is the episode; else the person
        # answers.
        trial = copy.deepcopy(game.episode)
        if after.moves:
            env.force_reply(trial.state, after.moves[0])
        env.advance(trial, Reply(raw))
        if env.position(trial.state).squares == after.squares:
            trial.state["forced_replies"] = []  # the probe was never played
            game.episode = trial
            if trial.done:
                env.score([trial])
            continue
        game.pending = raw
        return


def _position_after(game: Game, raw: str) -> Position | None:
    """The position after the policy's reply `raw`; None when the env would not take it as a move."""
    assert game.episode is not None
    try:
        return game.env.position(game.episode.state, raw)
    except ValueError:
        return None


def typed_turn(game: Game, text: str | None) -> None:
    """Any env: the person's text as the policy's turn, or (None) the policy's own reply."""
    if game.board_game:  # typed text would bypass the held move and the person's forced reply
        raise PlayError("in a board game you play the opponent: pick your move")
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
