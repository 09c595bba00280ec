"""Resumable training: resume only the run that wrote a checkpoint, and only from a checkpoint that is whole.

A Trainer resumes from the newest `checkpoint-N` in its output folder whatever produced it, so a folder that
outlives its run makes a changed run "resume" a finished one (and write its stale weights). With a
`fingerprint` (a hash of everything the run reads), `train_resumable` keeps the run's checkpoints in
`<output_dir>/<fingerprint>/`: a run with other inputs never sees them, older runs' folders are removed, and the
folder stays until the caller saved the final model and calls `drop_checkpoints`: a stop during that save (a LoRA
merge, a model-sized write) resumes from the last checkpoint (the Trainer saves one at the last step), not from
step 0. A `kill -9` during a save
leaves a torn `checkpoint-N` (empty, or without its weights or trainer state); it is skipped and deleted in
favour of the newest whole one.

It imports only the leaf wander.training.args, so any trainer builder may import it without a cycle.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from pathlib import Path
from typing import Any

from wander.training.args import replace_args

logger = logging.getLogger(__name__)

CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
RUN_FILE = "run.json"  # marks a fingerprint folder as ours, so cleanup never deletes anything else
TRAINER_STATE = "trainer_state.json"
# One of these is the model's weights: whole, sharded (its index), or a PEFT adapter.
WEIGHTS = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
    "adapter_model.safetensors",
    "adapter_model.bin",
)


def is_complete(path: str | os.PathLike) -> bool:
    """Whether a checkpoint folder has its weights and a readable trainer state (written last by the Trainer)."""
    path = Path(path)
    if not any((path / name).is_file() and (path / name).stat().st_size > 0 for name in WEIGHTS):
        return False
    try:
        state = json.loads((path / TRAINER_STATE).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(state, dict) and "global_step" in state


def checkpoints(output_dir: str | os.PathLike) -> list[Path]:
    """Every `checkpoint-N` folder in `output_dir`, oldest step first, whole or not."""
    root = Path(output_dir)
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if p.is_dir() and (m := CHECKPOINT.match(p.name))]
    return [p for _, p in sorted(found)]


def last_checkpoint(output_dir: str | os.PathLike) -> str | None:
    """The newest whole `checkpoint-N` folder in `output_dir`, or None."""
    complete = [p for p in checkpoints(output_dir) if is_complete(p)]
    return str(complete[-1]) if complete else None


def drop_torn(output_dir: str | os.PathLike) -> list[Path]:
    """Delete the checkpoints after the last whole one (a save that was killed); return what was deleted."""
    last = last_checkpoint(output_dir)
    last_step = int(CHECKPOINT.match(Path(last).name).group(1)) if last else -1
    # Left in place, the Trainer would save into a half-written folder again, or rotate the whole one away.
    torn = [p for p in checkpoints(output_dir) if int(CHECKPOINT.match(p.name).group(1)) > last_step]
    for path in torn:
        logger.warning("skipping torn checkpoint %s (a run was killed while saving it)", path)
        shutil.rmtree(path, ignore_errors=True)
    return torn


def run_dir(output_dir: str | os.PathLike, fingerprint: str) -> Path:
    """`<output_dir>/<fingerprint>`, created; other runs' folders (and loose checkpoints) in `output_dir` removed."""
    if not re.fullmatch(r"[0-9A-Za-z_.-]+", fingerprint):
        raise ValueError(f"a fingerprint must be a plain folder name, got {fingerprint!r}")
    root = Path(output_dir)
    root.mkdir(parents=True, exist_ok=True)
    for entry in root.iterdir():
        if entry.name == fingerprint or not entry.is_dir():
            continue
        if (entry / RUN_FILE).is_file() or CHECKPOINT.match(entry.name):
            logger.info("removing %s: checkpoints of a run with other inputs", entry)
            shutil.rmtree(entry, ignore_errors=True)
    path = root / fingerprint
    path.mkdir(exist_ok=True)
    marker = path / RUN_FILE
    if not marker.exists():
        tmp = path / f".{RUN_FILE}.tmp"
        tmp.write_text(json.dumps({"fingerprint": fingerprint}) + "\n")
        os.replace(tmp, marker)
    return path


def train_resumable(trainer: Any, fingerprint: str | None = None) -> Any:
    """`trainer.train()`, resuming a killed run of the same inputs from its last whole checkpoint.

    Without a fingerprint, checkpoints are those directly in `trainer.args.output_dir` and stay after training
    (for callers that manage the folder themselves, such as `Curriculum.train`).
    """
    from wander.training.processes import (  # transformers: imported late
        add_process_callbacks,
        wait_for_everyone,
    )

    add_process_callbacks(trainer)
    if fingerprint is None:
        folder = Path(trainer.args.output_dir)
    else:
        folder = Path(trainer.args.output_dir) / fingerprint
        # A copy of the args: the caller's config keeps its own output_dir.
        trainer.args = replace_args(trainer.args, output_dir=str(folder))
    # On several processes the main one tidies the folder and the others wait, then all resume from one checkpoint.
    if trainer.accelerator.is_main_process:
        if fingerprint is not None:
            run_dir(folder.parent, fingerprint)
        drop_torn(folder)
    wait_for_everyone(trainer)
    resume = last_checkpoint(folder)
    if resume and fingerprint is not None:
        logger.info("resuming from %s (same inputs as the run that saved it)", resume)
    # With a fingerprint, the checkpoints stay until the caller saved the trained model (`drop_checkpoints`).
    return trainer.train(resume_from_checkpoint=resume)


def drop_checkpoints(run_folder: str | os.PathLike) -> bool:
    """Remove the run folder `train_resumable` kept (the trainer's `args.output_dir` after it) once the final model
    is saved: a later run with these inputs has nothing to resume. True if it was one; any other folder stays."""
    folder = Path(run_folder)
    if not (folder / RUN_FILE).is_file():  # not a fingerprint folder: the caller's own output_dir
        return False
    shutil.rmtree(folder, ignore_errors=True)
    return True
