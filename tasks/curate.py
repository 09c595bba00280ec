"""The curate stage: the teacher's games filtered, deduplicated, balanced and augmented into the SFT dataset,
validated.

python -m tasks.curate [--params params.yaml] [--profile smoke]

Output: `<output_dir>/train.jsonl` and `eval.jsonl` (one game per line: `messages` plus seed, stratum, the
spec columns the env keeps (tic-tac-toe: random_move_prob, model_starts), outcome, n_tokens, `copy`: 0 for the
game as played, k for its k-th equivalent game with `augment`) and `validation.json`, replaced as one folder only
after the Great Expectations suite passed; a failure leaves the previous SFT data untouched.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import sys
import time
from collections import Counter
from pathlib import Path

import pandas as pd

from tasks.params.data_sections import Curate
from tasks.params.sections import Params
from tasks.runtime.tracking import log_artifact, log_dict, write_stage_metrics
from tasks.runtime.validation import InputError, gxe, validate
from wander import Environment, load_environment
from wander.core.atomic_io import atomic_dir, read_jsonl, write_json, write_jsonl
from wander.core.capabilities import Augmentation
from wander.core.pipeline_hooks import SpecChecks
from wander.core.replay import replay_problems
from wander.policies.scratch_model import context_length, load_tokenizer

logger = logging.getLogger(__name__)
SHOWN_GAMES = 10  # games a replay failure lists
ROLE_LETTERS = {"system": "s", "user": "u", "assistant": "a", "tool": "t"}


def run(params: Params) -> dict:
    """Filter, dedupe, balance, measure, validate, then write the SFT dataset; return and write the metrics
    (headline: games in, kept, keep rate, mean tokens, seconds; drops per filter, strata and outcomes in the
    details)."""
    config, model_dir, output_dir = params.curate, params.layout.base_model, params.layout.sft
    start = time.monotonic()
    path = Path(params.layout.episodes) / "episodes.jsonl"
    if not path.exists():
        raise FileNotFoundError(f"no teacher episodes at {path}; run the synthesize stage first")
    episodes = read_jsonl(path)
    env = load_environment(**params.env.kwargs())
    config = with_env_defaults(config, env)
    kept, dropped = select(episodes, config)
    if not kept:  # said before any check runs: a data validation on no rows names only missing columns
        filters = ", ".join(f"{name} {n}" for name, n in dropped.items() if n) or "none"
        raise InputError(
            f"{path}: curation kept 0 of {len(episodes)} teacher games (dropped by filter: {filters}); there is "
            "nothing to train on: check the teacher's rewards (data/metrics/synthesize.json) or loosen curate's "
            "filters (curate.min_values, curate.allowed_outcomes, curate.min_format)"
        )
    check_replays(kept, episodes, env, path)
    checks = env.spec_checks()
    rows = [sft_row(r, checks.kept) for r in kept]
    train, held_out = split_eval(rows, config.eval_fraction, config.seed)
    games = len(train)
    if config.augment and isinstance(env, Augmentation):  # an env without equivalent games adds none
        train = with_copies(train, env, unique=config.dedupe)
    max_length = config.max_length or context_length(model_dir)
    written = train + held_out
    # What SFT trains on is each row's `training_conversations` (one per model turn where a turn reads only the
    # current position): its longest is what must fit the context.
    trained = [env.training_conversations(r["messages"]) for r in written]
    counts = iter(count_tokens([c for conversations in trained for c in conversations], model_dir))
    for row, conversations in zip(written, trained, strict=True):
        row["n_tokens"] = max(next(counts) for _ in conversations)
    frame = check_frame(written, {r["seed"] for r in held_out})
    report = validate(frame, sft_expectations(config, len(frame), checks, max_length), "sft data")
    with atomic_dir(output_dir) as tmp:
        write_jsonl(tmp / "train.jsonl", train)
        if held_out:
            write_jsonl(tmp / "eval.jsonl", held_out)
        write_json(tmp / "validation.json", report)
    tokens = [r["n_tokens"] for r in written]
    metrics = {
        "input": len(episodes),
        "kept": len(rows),
        "train": games,
        "eval": len(held_out),
        "copies": len(train) - games,  # the env's equivalent games added to train (`augment`)
        "dropped": dropped,
        "per_stratum": {str(k): v for k, v in sorted(Counter(r["stratum"] for r in rows).items())},
        "outcomes": dict(Counter(r["outcome"] for r in rows)),
        **{  # how much the env's verifier floors raised its metrics
            name: {"input": mean_value(episodes, name), "kept": mean_value(kept, name)}
            for name in config.min_values
        },
        "tokens": {
            "mean": round(sum(tokens) / len(tokens), 1) if tokens else 0,
            "max": max(tokens, default=0),
        },
        "max_length": max_length,
        "seconds": round(time.monotonic() - start, 2),
    }
    headline = {
        "games": len(episodes),
        "kept": len(rows),
        "keep_rate": round(len(rows) / len(episodes), 4) if episodes else 0.0,
        "copies": metrics["copies"],
        "mean_tokens": metrics["tokens"]["mean"],
        "seconds": metrics["seconds"],
    }
    write_stage_metrics(params.layout, "curate", headline, metrics)
    log_artifact(Path(output_dir) / "validation.json", "validation")
    log_dict(train[:3], "samples/sft_rows.json")
    logger.info(
        "kept %d of %d games (train %d and %d copies, eval %d); dropped %s",
        len(rows),
        len(episodes),
        games,
        len(train) - games,
        len(held_out),
        dropped,
    )
    return metrics


def with_env_defaults(config: Curate, env: Environment) -> Curate:
    """The section with its null filters replaced by the env's defaults (allowed outcomes, rubric floors)."""
    defaults = env.curation_defaults()
    unknown = sorted(set(config.allowed_outcomes or ()) - set(env.outcomes))
    if unknown:
        raise ValueError(
            f"curate.allowed_outcomes names {unknown}, not outcomes of {env.name}: {list(env.outcomes)}"
        )
    return config.model_copy(
        update={
            "allowed_outcomes": defaults["allowed_outcomes"]
            if config.allowed_outcomes is None
            else config.allowed_outcomes,
            "min_values": defaults["min_values"] if config.min_values is None else config.min_values,
        }
    )


def select(episodes: list[dict], config: Curate) -> tuple[list[dict], dict[str, int]]:
    """The games to keep, in input order, and how many each filter dropped."""
    dropped: dict[str, int] = {}

    def keep(name: str, rows: list[dict], test) -> list[dict]:
        out = [r for r in rows if test(r)]
        dropped[name] = len(rows) - len(out)
        return out

    rows = keep("errored", episodes, lambda r: r.get("error") is None)
    if config.allowed_outcomes:  # an env without outcomes (reverse_text) filters on its rubric floors only
        rows = keep("outcome", rows, lambda r: r["state"].get("outcome") in config.allowed_outcomes)
    rows = keep("invalid_moves", rows, lambda r: r["state"].get("invalid", 0) == 0)
    rows = keep("format", rows, lambda r: r["values"].get("format", 0.0) >= config.min_format)
    for name, low in config.min_values.items():
        missing = [r["seed"] for r in rows if name not in r["values"]]
        if missing:
            raise ValueError(
                f"curate.min_values names {name!r}, which the teacher's games do not report (seed {missing[0]}); "
                f"use one of the env's rubric metrics: {sorted(rows[0]['values'])}"
            )
        rows = keep(name, rows, lambda r, name=name, low=low: r["values"][name] >= low)
    seen: set = set()

    def first_time(r: dict) -> bool:
        # A seed played twice is one game too many; with dedupe, so is the same conversation under another seed.
        keys = [("seed", r["seed"])] + ([("game", game_key(r["messages"]))] if config.dedupe else [])
        fresh = not any(k in seen for k in keys)
        seen.update(keys)
        return fresh

    rows = keep("duplicates", rows, first_time)
    rows = keep("balance", rows, _balanced(rows, config.balance, config.max_per_stratum, config.seed))
    return rows, dropped


def check_replays(kept: list[dict], episodes: list[dict], env: Environment, path: Path) -> None:
    """Replay every kept game through the environment; refuse them all, naming each bad game, if one differs."""
    line = {id(r): i for i, r in enumerate(episodes, 1)}
    found = env.map_steps(lambda record: replay_problems(env, record), kept)
    bad = [(r, problems) for r, problems in zip(kept, found, strict=True) if problems]
    if not bad:
        return
    lines = [
        f"{path}: {len(bad)} of {len(kept)} kept games do not replay in the {env.name} environment "
        "(their boards, moves, outcome or rewards differ from what it says):"
    ]
    for record, problems in bad[:SHOWN_GAMES]:
        lines.append(f"  - game seed {record.get('seed')} (record {line[id(record)]}): {'; '.join(problems)}")
    if len(bad) > SHOWN_GAMES:
        lines.append(f"  ... and {len(bad) - SHOWN_GAMES} more")
    lines.append(
        "nothing was written; regenerate the games (dvc repro synthesize) or use an env section that matches them"
    )
    raise InputError("\n".join(lines))


def _balanced(rows: list[dict], balance: bool, cap: int | None, seed: int):
    """A filter keeping, per stratum, a seeded sample of the smallest stratum's size (and at most `cap`)."""
    by_stratum: dict = {}
    for r in rows:
        by_stratum.setdefault(r["spec"].get("stratum"), []).append(r["seed"])
    target = min((len(v) for v in by_stratum.values()), default=0) if balance else None
    keep: set = set()
    rng = random.Random(seed)
    for stratum in sorted(by_stratum, key=str):
        seeds = by_stratum[stratum]
        size = min(x for x in (len(seeds), target, cap) if x is not None)
        keep.update(rng.sample(seeds, size))
    return lambda r: r["seed"] in keep


def mean_value(records: list[dict], name: str) -> float | None:
    """Mean of a rubric metric over games that report it (None when none does)."""
    values = [r["values"][name] for r in records if name in r.get("values", {})]
    return round(sum(values) / len(values), 4) if values else None


def game_key(messages: list[dict]) -> str:
    """Hash of a whole conversation: two games with the same key are the same game."""
    text = json.dumps([[m["role"], m["content"]] for m in messages], ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def with_copies(rows: list[dict], env: Augmentation, unique: bool) -> list[dict]:
    """Each row followed by its equivalent games (the env's Augmentation capability), numbered by `copy` from 1,
    with the row's seed and spec columns; with `unique`, a copy equal to a game already in is left out."""
    seen = {game_key(r["messages"]) for r in rows}
    out = []
    for row in rows:
        out.append(row)
        for k, messages in enumerate(env.equivalent_games(row["messages"]), 1):
            key = game_key(messages)
            if unique and key in seen:
                continue
            seen.add(key)
            out.append({**row, "messages": messages, "copy": k})
    return out


def sft_row(record: dict, kept: tuple[str, ...] = ()) -> dict:
    """One SFT row: the game's messages plus what the checks and the trainer's sampler read (`kept`: the env's
    spec columns besides seed and stratum)."""
    spec = record["spec"]
    return {
        "messages": [{"role": m["role"], "content": m["content"]} for m in record["messages"]],
        "seed": record["seed"],
        "stratum": spec.get("stratum"),
        **{column: spec.get(column) for column in kept},
        "outcome": record["state"].get("outcome"),
        "invalid_moves": record["state"].get("invalid", 0),
        "format": record["values"].get("format"),
        "copy": 0,  # the game as played; `with_copies` numbers its equivalent games from 1
    }


def count_tokens(conversations: list[list[dict]], model_dir: str | Path) -> list[int]:
    """Tokens of each whole conversation under the base model's tokenizer and chat template."""
    if not conversations:
        return []
    tokenizer = load_tokenizer(model_dir)
    ids = tokenizer.apply_chat_template(conversations, tokenize=True, return_dict=True)["input_ids"]
    return [len(x) for x in ids]


def split_eval(rows: list[dict], fraction: float, seed: int) -> tuple[list[dict], list[dict]]:
    """Hold out `fraction` of each stratum (seeded) for eval; both parts keep input order."""
    rng = random.Random(f"{seed}:eval")
    held: set = set()
    by_stratum: dict = {}
    for r in rows:
        by_stratum.setdefault(r["stratum"], []).append(r["seed"])
    for stratum in sorted(by_stratum, key=str):
        seeds = by_stratum[stratum]
        held.update(rng.sample(seeds, round(fraction * len(seeds))))
    return [r for r in rows if r["seed"] not in held], [r for r in rows if r["seed"] in held]


def check_frame(rows: list[dict], held_out: set) -> pd.DataFrame:
    """The columns the SFT checks read: metadata, the role pattern, a game hash and stratum sizes."""
    frame = pd.DataFrame([{k: v for k, v in r.items() if k != "messages"} for r in rows])
    if not rows:
        return frame
    frame["roles"] = ["".join(ROLE_LETTERS.get(m["role"], "?") for m in r["messages"]) for r in rows]
    frame["game_key"] = [game_key(r["messages"]) for r in rows]
    frame["split"] = ["eval" if r["seed"] in held_out else "train" for r in rows]
    frame["stratum_count"] = frame.groupby("stratum")["seed"].transform("size")
    return frame


def sft_expectations(config: Curate, rows: int, checks: SpecChecks, max_length: int) -> list:
    """Schema, unique seeds (per copy) and games, allowed outcomes, clean games, the env's spec ranges, balanced
    strata, lengths within context. `config` has the env's defaults in (`with_env_defaults`)."""
    g = gxe()
    groups = checks.strata
    mean = rows / groups
    columns = [
        "seed", "stratum", *checks.kept, "outcome", "invalid_moves", "format", "copy",
        "n_tokens", "roles", "game_key", "split", "stratum_count",
    ]  # fmt: skip
    outcome = (
        [g.ExpectColumnValuesToBeInSet(column="outcome", value_set=list(config.allowed_outcomes))]
        if config.allowed_outcomes
        else []
    )
    expectations = [
        g.ExpectTableRowCountToBeBetween(min_value=1, description="some games survived curation"),
        g.ExpectTableColumnsToMatchSet(column_set=columns, exact_match=True),
        g.ExpectColumnValuesToNotBeNull(column="seed"),
        g.ExpectCompoundColumnsToBeUnique(
            column_list=["seed", "copy"], description="each game and copy once"
        ),
        *outcome,
        g.ExpectColumnValuesToBeBetween(column="invalid_moves", min_value=0, max_value=0),
        g.ExpectColumnValuesToBeBetween(column="format", min_value=config.min_format, max_value=1.0),
        *(
            g.ExpectColumnValuesToBeBetween(column=column, min_value=low, max_value=high)
            for column, (low, high) in checks.ranges.items()
            if column in checks.kept
        ),
        *(
            g.ExpectColumnValuesToBeInSet(column=column, value_set=values)
            for column, values in checks.sets.items()
            if column in checks.kept
        ),
        g.ExpectColumnDistinctValuesToEqualSet(
            column="stratum", value_set=list(range(groups)), description="every difficulty stratum is present"
        ),
        g.ExpectColumnValuesToBeBetween(
            column="stratum_count",
            min_value=mean * (1 - config.max_imbalance),
            max_value=mean * (1 + config.max_imbalance),
            description=f"strata balanced within {config.max_imbalance:.0%} of the mean",
        ),
        g.ExpectColumnValuesToBeBetween(
            column="n_tokens",
            min_value=1,
            max_value=max_length,
            description="every conversation SFT trains on fits the model's context",
        ),
        g.ExpectColumnValuesToMatchRegex(
            # A tool env's assistant turn may call tools: their results come back before its next turn; an episode
            # may end on the results of its last calls (coding: the tests passed), which SFT leaves out.
            column="roles",
            regex=r"^s?(?:ua(?:t+a)*)+t*$",
            description="user/assistant turns (tool results answered by the assistant), ending on the assistant "
            "or on its last tool results",
        ),
    ]
    if config.dedupe:
        expectations.append(g.ExpectColumnValuesToBeUnique(column="game_key", description="no repeated game"))
    return expectations


if __name__ == "__main__":
    from tasks.runtime.stage import stage_main

    sys.exit(stage_main("curate", run))
