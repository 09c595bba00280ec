"""Curriculum: stages change opponents, temperature, steps and batch; an adaptive hook can end a stage early."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from wander.training import trainer_spec
from wander.training.curriculum import DONE_FILE, Curriculum
from wander.training.curriculum_config import CurriculumStage

from .conftest import cpu_args


def grpo_args(output_dir, **kwargs):
    from trl import GRPOConfig

    defaults = dict(
        per_device_train_batch_size=4, num_generations=2, max_completion_length=16, learning_rate=1e-3
    )
    return cpu_args(GRPOConfig, str(output_dir), **{**defaults, **kwargs})


def test_stage_env_and_args_follow_the_stage(env, tmp_path):
    stages = [
        CurriculumStage("wide", random_move_prob=(0.2, 0.7), temperature=1.2, max_steps=7, batch_size=16),
        CurriculumStage("strong", random_move_prob=(0.0, 0.25), batch_size=8, num_generations=4, beta=0.1),
    ]
    curriculum = Curriculum(stages)
    wide = curriculum.stage_env(env, 0)
    probs = [s["random_move_prob"] for s in wide.get_dataset("train")]
    assert 0.2 <= min(probs) and max(probs) <= 0.7 and env.config.random_move_prob == (0.0, 1.0)
    args = curriculum.stage_args(grpo_args(tmp_path), 0)
    assert (args.temperature, args.max_steps, args.generation_batch_size) == (1.2, 7, 16)
    assert args.gradient_accumulation_steps == args.steps_per_generation == 4  # one generation per step
    assert args.output_dir == str(tmp_path / "00-wide")
    strong = curriculum.stage_args(grpo_args(tmp_path), 1)
    assert (strong.num_generations, strong.beta, args.beta) == (4, 0.1, grpo_args(tmp_path).beta)
    with pytest.raises(ValueError, match="beta must be at least 0"):
        CurriculumStage("bad", beta=-0.1)
    with pytest.raises(ValueError, match="must divide"):
        Curriculum([CurriculumStage("odd", batch_size=6)]).stage_args(grpo_args(tmp_path), 0)


def test_next_stage_fires_when_recent_metrics_cross_the_thresholds():
    curriculum = Curriculum([CurriculumStage("a", advance_when={"rewards/win/mean": 0.6})], window=2)
    state = SimpleNamespace(log_history=[{"rewards/win/mean": 0.9}])
    assert not curriculum.next_stage(state, {})  # fewer logs than the window
    expected = {0.4: True, 0.2: False, 0.9: False, 0.7: True}  # the mean of the last two logs reaches 0.6
    for win, advance in expected.items():
        state.log_history += [{"loss": 0.1}, {"rewards/win/mean": win}]  # logs without the metric are skipped
        assert curriculum.next_stage(state, {}) is advance
    custom = Curriculum([CurriculumStage("a")], next_stage=lambda s, m: m.get("reward", 0) > 1)
    assert custom.next_stage(state, {"reward": 2}) and not custom.next_stage(state, {"reward": 0})


@pytest.mark.slow
def test_curriculum_runs_its_stages_in_order_and_an_adaptive_hook_ends_one_early(env, sft_model, tmp_path):
    from trl import GRPOTrainer

    stages = [
        # Any logged episode reward passes -1: the hook ends this stage after its first step.
        CurriculumStage(
            "wide", random_move_prob=(0.5, 1.0), max_steps=3, batch_size=4, advance_when={"reward": -1.0}
        ),
        CurriculumStage("strong", random_move_prob=(0.0, 0.2), max_steps=1, batch_size=4, temperature=0.8),
    ]
    curriculum = Curriculum(stages, window=1)
    final = curriculum.train(env, trainer_spec(GRPOTrainer, model=sft_model, args=grpo_args(tmp_path)))
    done = [json.loads((Path(curriculum.stage_dir(tmp_path, i)) / DONE_FILE).read_text()) for i in range(2)]
    assert [d["global_step"] for d in done] == [1, 1]
    assert Path(final, "model.safetensors").exists() and final.startswith(str(tmp_path / "01-strong"))
    assert (
        curriculum.train(env, trainer_spec(GRPOTrainer, model=sft_model, args=grpo_args(tmp_path))) == final
    )
