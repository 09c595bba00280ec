"""The sft stage: TRL SFTTrainer warm-up of the base model on the curated teacher games.

python -m tasks.sft [--params params.yaml] [--profile smoke]
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from tasks.params.sections import Params
from tasks.runtime.fingerprint import fingerprint, stage_code
from tasks.runtime.launch import process_index
from tasks.runtime.tracking import set_tags, write_metrics
from tasks.runtime.trainer_args import trainer_args
from tasks.runtime.validation import InputError
from wander.core.atomic_io import atomic_dir, clean_leftovers, read_jsonl

if TYPE_CHECKING:
    from datasets import Dataset

logger = logging.getLogger(__name__)
SFT_ROLES = ("system", "user", "assistant", "tool")  # tool: results of a tool env's calls
SFT_FIX = "fix those rows, or rebuild the file with the curate stage (dvc repro curate)"


def read_sft_rows(path: Path) -> list[dict]:
    """The rows of an SFT file, each checked against the schema the trainer reads; InputError names every bad row."""
    if not path.exists():
        raise FileNotFoundError(f"no SFT data at {path}; run the curate stage first (dvc repro curate)")
    try:
        rows = read_jsonl(path)
    except ValueError as e:
        raise InputError(f"{e}\n{SFT_FIX}") from e
    if not rows:
        raise InputError(f"{path} has no games\n{SFT_FIX}")
    problems = [(n, p) for n, row in enumerate(rows, 1) if (p := sft_row_problem(row)) is not None]
    if problems:
        shown = [f"  - row {n}: {p}" for n, p in problems[:10]]
        more = [f"  ... and {len(problems) - 10} more"] if len(problems) > 10 else []
        raise InputError(
            "\n".join(
                [
                    f"{path}: {len(problems)} of {len(rows)} rows do not fit the SFT schema",
                    *shown,
                    *more,
                    SFT_FIX,
                ]
            )
        )
    return rows


def sft_row_problem(row: object) -> str | None:
    """What is wrong with one SFT row (a JSON object with `messages`: [{role, content}, ...]), or None."""
    if not isinstance(row, dict):
        return f"is a JSON {type(row).__name__}, not an object with a 'messages' list"
    if "messages" not in row:
        return (
            f"has no 'messages' key (it has {sorted(row)}); each row is one game as a list of chat messages"
        )
    messages = row["messages"]
    if not isinstance(messages, list) or not messages:
        return f"'messages' must be a non-empty list of {{role, content}} objects, got {_shown(messages)}"
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            return f"messages[{i}] must be an object {{role, content}}, got {_shown(m)}"
        for key in ("role", "content"):
            if not isinstance(m.get(key), str):
                got = "nothing" if key not in m else _shown(m[key])
                return f"messages[{i}].{key} must be a string, got {got}"
        if m["role"] not in SFT_ROLES:
            return f"messages[{i}].role is {m['role']!r}; one of {', '.join(SFT_ROLES)} is expected"
    if not any(m["role"] == "assistant" for m in messages):
        return "has no assistant message: nothing to learn from"
    return None


def _shown(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def distinct_rows(items: list) -> tuple[list, list[int]]:
    """The distinct items (JSON-equal ones are one) in first-seen order, and each item's position among them."""
    positions: dict[str, int] = {}
    distinct, index = [], []
    for item in items:
        key = json.dumps(item, sort_keys=True)
        if key not in positions:
            positions[key] = len(distinct)
            distinct.append(item)
        index.append(positions[key])
    return distinct, index


def repeated_index(index: list[int], floor: int | None) -> list[int]:
    """`index` with each distinct row at least `floor` times (`sft.min_example_repeats`): as often as the data holds
    it, the missing copies after the rest (the trainer's seeded sampler shuffles them); null: `index` as it is."""
    counts = Counter(index)
    return index + [row for row, n in counts.items() for _ in range((floor or 0) - n)]


def repeat_rows(prepared: Dataset, index: list[int]) -> Dataset:
    """Prepared (tokenized) distinct rows, each carrying its `row`, laid out as `index` says; rows TRL dropped
    (e.g. left without a loss token by truncation) stay dropped, as they would in the full data."""
    where = {row: n for n, row in enumerate(prepared["row"])}
    return prepared.select([where[i] for i in index if i in where]).remove_columns("row")


def run(params: Params) -> dict:
    """Train, save the final model atomically under <models>/sft, write and return metrics."""
    config, layout = params.sft, params.layout
    rows = read_sft_rows(Path(layout.sft) / "train.jsonl")  # before anything heavy: bad input fails at once

    import torch
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from wander import load_environment
    from wander.training import drop_checkpoints, train_resumable
    from wander.training.lora import lora_config, save_trained

    out = Path(layout.models) / "sft"
    main = process_index() == 0  # on several processes, rank 0 writes the outputs
    if main:  # a model-sized temporary of a save that was killed: gone before hours of training
        clean_leftovers(out)
    if config.torch_threads:
        torch.set_num_threads(config.torch_threads)
    # One conversation per game, or per model turn when the env's turns read only the current position.
    env = load_environment(**params.env.kwargs())
    conversations = [c for r in rows for c in env.training_conversations(r["messages"])]
    # TRL tokenizes row by row (~0.6 ms each); symmetric copies and common openings repeat, so each distinct
    # conversation is tokenized once and the prepared rows are repeated as in the data (the same dataset).
    distinct, index = distinct_rows(conversations)
    index = repeated_index(index, config.min_example_repeats)
    dataset = Dataset.from_list([{"messages": c, "row": i} for i, c in enumerate(distinct)])
    args = trainer_args(
        SFTConfig,
        config,
        output_dir=str(Path(layout.work) / "sft"),
        save_total_limit=1,
        assistant_only_loss=True,  # learn the model's turns (end-of-turn token included), read the env's
    )
    start = time.monotonic()
    trainer = SFTTrainer(
        model=layout.base_model, args=args, train_dataset=dataset, peft_config=lora_config(config.lora)
    )
    trainer.train_dataset = repeat_rows(trainer.train_dataset, index)
    code = stage_code("tasks.sft", params.env.name)  # checkpoints of other code are never resumed
    inputs = fingerprint((config, params.env.kwargs()), layout.base_model, layout.sft, code=code)
    result = train_resumable(trainer, fingerprint=inputs)
    if main:
        with atomic_dir(out) as tmp:
            save_trained(trainer, tmp)  # LoRA adapters merged: every later stage loads a plain model
        # Only now: a stop during the merge or the save resumes from the last checkpoint, not from step 0.
        drop_checkpoints(trainer.args.output_dir)
    metrics = {
        "games": len(rows),
        "examples": len(index),
        "distinct_examples": len(distinct),
        "steps": trainer.state.global_step,
        "train_loss": result.training_loss,
        "seconds": round(time.monotonic() - start, 1),
    }
    if main:
        write_metrics(Path(layout.metrics) / "sft.json", metrics)
        set_tags({"wander.parent": layout.base_model, "wander.model.dir": str(out)})
    logger.info("sft: %d games, %d steps, loss %.4f", len(rows), metrics["steps"], metrics["train_loss"])
    return metrics


if __name__ == "__main__":
    from tasks.runtime.stage import stage_main

    sys.exit(stage_main("sft", run))
