"""Re-scoring a stored evaluation with the env's current rubric, without generating: `wander rescore`.

An evaluation's folder holds every episode it played (episodes.jsonl.gz: spec, messages, values) and how it was
played (matrix.json: games per cell, seed, samples, exact results). Each episode's model replies are played again
through a fresh episode of its spec (`wander.core.replay.replay`) and scored; the cells, the report and every
output are rebuilt from those episodes, as the evaluation built them, into a new folder beside the old. Nothing
here loads a model or TRL: a rescore takes seconds. Where the env's own answers now differ from the stored ones
(another feedback text, a changed opponent), the replies no longer answer what the env says: such episodes are
counted as diverged and scored as far as they replay. What the env measures on the machine (`measured_keys`: the
seconds code ran) is kept as recorded. An env whose scoring runs code (coding) runs it again, in its sandbox.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from wander.core.environment import Environment
from wander.core.replay import replay
from wander.eval.episodes_file import read_episodes
from wander.eval.evaluation import check_out_dir, write_report
from wander.eval.matrix import matrix_row, report_env_parts
from wander.eval.matrix_result import MatrixResult
from wander.eval.outputs import OUTPUTS
from wander.eval.pass_at_k import pass_rule


@dataclass
class Rescored:
    """A rescored evaluation: its rebuilt result, and the episodes whose reward changed or whose replay diverged."""

    result: MatrixResult
    changed: list[dict] = field(default_factory=list)
    diverged: list[dict] = field(default_factory=list)


def _same(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def evaluation_files(source: str | Path) -> tuple[Path, Path]:
    """The episodes file and matrix.json of an evaluation folder (or of the folder of an episodes file)."""
    path = Path(source)
    folder = path if path.is_dir() else path.parent
    episodes = path if path.is_file() else folder / OUTPUTS["episodes"]
    matrix = folder / OUTPUTS["matrix"]
    for needed in (episodes, matrix):
        if not needed.is_file():
            raise ValueError(
                f"{source} is not an evaluation: {needed} is missing; name the folder `wander eval --out` or the "
                "evaluate stage (data/eval) wrote"
            )
    return episodes, matrix


def _baseline(played: dict, rows: list[str]) -> str:
    """The row the stored report compared the others against (a rubric report's paired keys say `B - A`)."""
    paired = next(iter(played.get("paired") or {}), None)
    found = paired.rsplit(" - ", 1)[-1] if paired else None
    return found if found in rows else rows[0]


def rescore(source: str | Path, env: Environment) -> Rescored:
    """Every stored episode of the evaluation at `source` replayed and scored by `env`, its cells rebuilt."""
    episodes_path, matrix_path = evaluation_files(source)
    records = read_episodes(episodes_path)
    played = json.loads(matrix_path.read_text())
    with (matrix_path.parent / OUTPUTS["csv"]).open(newline="") as f:
        decoding = {row["policy"]: row["decoding"] for row in csv.DictReader(f)}
    suite = env.evaluation_suite()
    cells: dict[str, dict[tuple[str, str], list]] = {}
    changed: list[dict] = []
    diverged: list[dict] = []
    for index, record in enumerate(records):
        episode, problems = replay(env, record)
        if episode is None:
            raise ValueError(f"episode {index} of {episodes_path} cannot be replayed: {problems[0]}")
        # What the machine measured (seconds) is the record's, not this replay's.
        for key in env.measured_keys:
            for stored, now in (
                (record.get("values") or {}, episode.values),
                (record.get("state") or {}, episode.state),
            ):
                if key in stored:
                    now[key] = stored[key]
        where = {k: record.get(k) for k in ("policy", "opponent", "side", "sample", "seed")}
        if problems:
            diverged.append({**where, "index": index, "problem": problems[0]})
        if not _same(float(record.get("reward", 0.0)), episode.reward):
            changed.append({**where, "index": index, "was": record.get("reward"), "now": episode.reward})
        cells.setdefault(record["policy"], {}).setdefault((record["opponent"], record["side"]), []).append(
            episode
        )
    samples, games = played.get("samples", 1), played["games_per_cell"]
    opponents = list(dict.fromkeys(o for row in cells.values() for o, _ in row))
    result = MatrixResult(
        rows=[],
        episodes={},
        policies={name: name for name in cells},
        opponents=opponents,
        games=games,
        decoding=next((d for d in decoding.values() if d != "scripted"), "greedy"),
        seed=played["seed"],
        baseline=_baseline(played, list(cells)),
        suite=suite,
        render=env.render_episode,
        samples=samples,
        pass_threshold=played.get("pass_threshold"),
        exact=played.get("exact") or {},
        worst=played.get("worst_case") or {},
    )
    report_env_parts(result, env)
    rule = pass_rule(suite, result.pass_threshold) if samples > 1 else None
    for name, by_cell in cells.items():
        result.episodes[name] = []
        for group in opponents:
            for side in suite.sides:
                cell = by_cell[(group, side)]
                result.rows.append(matrix_row(result, name, group, side, decoding[name], cell, rule))
                result.episodes[name] += cell
    return Rescored(result, changed, diverged)


def rescore_to(source: str | Path, env: Environment, out_dir: str | Path) -> Rescored:
    """`rescore`, its outputs written under `out_dir` (checked before any episode is replayed)."""
    check_out_dir(out_dir)
    done = rescore(source, env)
    write_report(done.result, out_dir)
    return done
