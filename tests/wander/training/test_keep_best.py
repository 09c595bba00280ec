"""Keep-best writes its weights and its record as one unit: a save killed midway leaves the previous pair, whole."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import torch
from safetensors.torch import load_file

from wander.core.atomic_io import TEMP_NAME
from wander.training.learning_curve import BEST_DIR, BEST_FILE, BEST_WEIGHTS, LearningCurveCallback

from .conftest import cpu_args

ROOT = Path(__file__).resolve().parents[3]


def sft_trainer(env, model: str, out: Path):
    """A 2-step SFT trainer on the env's teacher games."""
    from trl import SFTConfig, SFTTrainer

    from wander.training import trainer_spec
    from wander.training.sft_data_config import SFTDataConfig

    args = cpu_args(SFTConfig, str(out), max_steps=2, per_device_train_batch_size=8, learning_rate=1e-2)
    data = SFTDataConfig(teacher="minimax-0.2", num_episodes=16)
    return env >> trainer_spec(SFTTrainer, model=model, args=args, data=data)


def test_a_keep_best_save_killed_midway_leaves_the_previous_weights_with_their_record(
    env, tiny_model, tmp_path
):
    trainer = sft_trainer(env, tiny_model, tmp_path)
    scores = iter([0.0, 1.0, 0.5])  # step 1 is the best point
    env.curve_score = lambda values: next(scores)
    trainer.add_callback(LearningCurveCallback(env, trainer, every=1, keep_best=True))
    trainer.train()
    best = tmp_path / BEST_DIR
    assert json.loads((best / BEST_FILE).read_text())["step"] == 1
    kept = load_file(best / BEST_WEIGHTS)

    # A later best point's save, SIGKILLed once its weights are written and before its record: the way the
    # record used to be written after the weights were already renamed into place.
    code = f"""
        import os, signal, sys
        import torch
        from safetensors.torch import save_file
        from wander.core.atomic_io import atomic_dir
        with atomic_dir(sys.argv[1]) as tmp:
            save_file({{"x": torch.zeros(2)}}, str(tmp / {BEST_WEIGHTS!r}))
            os.kill(os.getpid(), signal.SIGKILL)
    """
    killed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), str(best)], cwd=ROOT, capture_output=True, text=True
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert [p for p in tmp_path.iterdir() if TEMP_NAME.fullmatch(p.name)]

    resumed = LearningCurveCallback(
        env, trainer, every=1, keep_best=True
    )  # a resumed run reads the pair back
    resumed.on_train_begin(trainer.args, trainer.state, trainer.control)
    assert resumed.best == {"step": 1, "score": 1.0}
    assert sorted(p.name for p in best.iterdir()) == [BEST_FILE, BEST_WEIGHTS]
    assert all(torch.equal(v, kept[k]) for k, v in load_file(best / BEST_WEIGHTS).items())
    assert not [p for p in tmp_path.iterdir() if TEMP_NAME.fullmatch(p.name)]  # the killed save's temporary
