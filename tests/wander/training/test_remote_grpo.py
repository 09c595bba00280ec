"""GRPO on a remote environment: episodes on a `wander env serve` server, generation and training here."""

from __future__ import annotations

import pytest
import torch

from wander import load_environment
from wander.serve.server import serve_env_in_thread
from wander.training import trainer_spec
from wander.training.decision_rollout import DecisionRollout
from wander.training.grpo import EpisodeRollout

from .conftest import cpu_args

SETTINGS = dict(rendering="compact", num_groups=2, num_train=256, num_eval=16, num_test=16)


def train_remote(model: str, tmp_path, history: str):
    from trl import GRPOConfig, GRPOTrainer

    with serve_env_in_thread(load_environment("tictactoe", history=history, **SETTINGS)) as url:
        remote = load_environment(f"openenv:{url}")
        args = cpu_args(
            GRPOConfig,
            str(tmp_path),
            max_steps=2,
            per_device_train_batch_size=8,
            num_generations=4,
            max_completion_length=16,
            learning_rate=1e-3,
            temperature=1.5,  # the short SFT start is sharp; groups need some spread
        )
        trainer = remote >> trainer_spec(GRPOTrainer, model=model, args=args)
        before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
        trainer.train()
        after = remote.evaluate(_greedy(trainer), n=4)
    return trainer, before, after


def _greedy(trainer):
    from wander.policies.transformers_policy import TransformersPolicy

    return TransformersPolicy(trainer.model, trainer.processing_class, greedy=True, max_new_tokens=16)


@pytest.mark.slow
@pytest.mark.parametrize("history", ["full", "current"])
def test_grpo_trains_on_a_remote_tictactoe(sft_model, tmp_path, history):
    trainer, before, result = train_remote(sft_model, tmp_path, history)
    expected = EpisodeRollout if history == "full" else DecisionRollout
    assert isinstance(trainer.rollout_func, expected)
    assert any(not torch.equal(v, before[k]) for k, v in trainer.model.state_dict().items())
    logged = [h for h in trainer.state.log_history if "rewards/episode/mean" in h]
    assert len(logged) == 2 and all("rewards/outcome/mean" in h for h in logged)
    assert len(result.trajectories) == 4 and result.metrics["errored"]["mean"] == 0.0
