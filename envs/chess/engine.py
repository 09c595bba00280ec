"""Stockfish for the chess env: a pool of UCI processes giving the same answer to the same question, none of them
outliving the env that started it.

Determinism: one search thread, a node budget per call and a cleared hash before each search (`ucinewgame`: the
table a previous search left would change the next one), so an answer is a function of (position, budget) alone and
is cached as such. Every call is also bounded in time (`TIME_BOUND`), a backstop the node budgets never reach.
Lifetime: each process gets SIGTERM when the thread that started it ends (`die_with_parent_in_child`: the engine's
own I/O thread, which ends when the env closes the engine or the process dies, SIGKILL included) and quits on
its stdin closing; `EnginePool.close` (also run when the env is collected or Python exits) quits them at once.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path

import chess
import chess.engine

from wander.core.process_tree import die_with_parent_in_child

MATE_CP = 10_000
"""A mate as centipawns (mate in n: 10,000 - n), so every score is one number."""
TIME_BOUND = 10.0
"""Seconds a single search may take at most: a backstop against a hung engine, never reached at our budgets."""
CACHE_SIZE = 200_000
"""Answers kept (a few hundred bytes each); the cache starts over past this."""
DEBIAN_PATH = "/usr/games/stockfish"


def find_stockfish(path: str | None = None) -> str:
    """The Stockfish binary: `path` when given, else `stockfish` on PATH or Debian's /usr/games/stockfish; raises
    FileNotFoundError saying how to install it."""
    found = path if path and Path(path).is_file() else shutil.which(path or "stockfish")
    if found is None and path is None and os.access(DEBIAN_PATH, os.X_OK):
        found = DEBIAN_PATH
    if found is None:
        raise FileNotFoundError(
            f"Stockfish not found ({path or 'stockfish on PATH or ' + DEBIAN_PATH}): the chess env needs it as "
            "opponent, teacher and judge; install Debian's package with `make stockfish` (apt-get install "
            "stockfish), or set env.chess.engine_path to a UCI Stockfish binary"
        )
    return found


# One cache for every pool of the process: an answer depends on the binary, the position, the budget and the root
# move alone. The budget is in the key, so the judge (`judge_nodes`) never reads an answer the opponent or the
# teacher searched at their smaller budget, though the three share the pool's processes (each search starts from a
# cleared hash: nothing of one search reaches the next).
_cache: dict[tuple, tuple[str | None, int]] = {}
_cache_lock = threading.Lock()


def _close_all(engines: list[chess.engine.SimpleEngine]) -> None:
    while engines:
        engine = engines.pop()
        try:
            engine.quit()
        except Exception:  # noqa: BLE001 - a dead or stuck engine is killed instead
            with contextlib.suppress(Exception):
                engine.close()


class EnginePool:
    """Up to `size` Stockfish processes at `path`, started on first need; thread-safe; answers cached."""

    def __init__(self, path: str | None = None, size: int = 2):
        if size < 1:
            raise ValueError(f"an engine pool needs at least one engine, got {size}")
        self.path, self.size = path, size
        self.calls = 0  # searches run (cache misses): what `make bench` counts
        self._engines: list[chess.engine.SimpleEngine] = []  # every engine started
        self._free: list[chess.engine.SimpleEngine] = []
        self._cond = threading.Condition()
        self._finalizer = weakref.finalize(self, _close_all, self._engines)
        # python-chess runs each engine's I/O on a non-daemon thread, which Python joins at exit before any atexit
        # hook runs: quit the engines first (the hook concurrent.futures uses), or a process that never called
        # `close` would wait for them forever.
        threading._register_atexit(self._finalizer)

    @property
    def pids(self) -> list[int]:
        """The process ids of the engines running now."""
        with self._cond:
            return [e.transport.get_pid() for e in self._engines]

    def close(self) -> None:
        """Quit every engine; a later search starts new ones."""
        with self._cond:
            self._free.clear()
            _close_all(self._engines)

    @contextlib.contextmanager
    def _engine(self) -> Iterator[chess.engine.SimpleEngine]:
        with self._cond:
            while not self._free and len(self._engines) >= self.size:
                self._cond.wait()
            engine = self._free.pop() if self._free else None
            if engine is None:
                engine = chess.engine.SimpleEngine.popen_uci(
                    [find_stockfish(self.path)], preexec_fn=die_with_parent_in_child
                )
                engine.configure({"Threads": 1, "Hash": 1})  # MiB: cleared before each search
                self._engines.append(engine)
        try:
            yield engine
        finally:
            with self._cond:
                if engine in self._engines:  # not closed meanwhile
                    self._free.append(engine)
                self._cond.notify()

    def _search(self, fen: str, nodes: int, move: str | None) -> tuple[str | None, int]:
        key = (self.path, fen, nodes, move)
        with _cache_lock:
            cached = _cache.get(key)
        if cached is not None:
            return cached
        board = chess.Board(fen)
        limit = chess.engine.Limit(nodes=nodes, time=TIME_BOUND)
        root = [chess.Move.from_uci(move)] if move else None
        with self._engine() as engine:
            # A new `game` object makes python-chess send ucinewgame: the hash starts empty, as determinism needs.
            info = engine.analyse(
                board,
                limit,
                game=object(),
                root_moves=root,
                info=chess.engine.INFO_SCORE | chess.engine.INFO_PV,
            )
        pv = info.get("pv") or []
        answer = (pv[0].uci() if pv else None, info["score"].relative.score(mate_score=MATE_CP))
        with _cache_lock:
            self.calls += 1
            if len(_cache) >= CACHE_SIZE:
                _cache.clear()
            _cache[key] = answer
        return answer

    def best(self, fen: str, nodes: int) -> tuple[str, int]:
        """The engine's move at a position with legal moves (UCI) and its score in centipawns for the side to move."""
        move, score = self._search(fen, nodes, None)
        if move is None:
            raise ValueError(f"the engine found no move at {fen} (a finished position has none)")
        return move, score

    def score_of(self, fen: str, move: str, nodes: int) -> int:
        """The score in centipawns, for the side to move, of playing `move` (UCI) at the position."""
        return self._search(fen, nodes, move)[1]
