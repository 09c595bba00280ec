"""TRL's fused LM head on the CPU scores only the labelled positions once told to, with the same loss."""

from __future__ import annotations

import pytest
import trl.trainer.utils as trl_utils
from trl.kernels import chunked_logprob

from wander.training import trainer_spec
from wander.training.fused_head import score_labelled_positions_only
from wander.training.sft_data_config import SFTDataConfig

from .conftest import cpu_args


def sft_losses(env, model: str, out: str) -> list[float]:
    """Two SFT steps' losses on the same teacher games."""
    from trl import SFTConfig, SFTTrainer

    args = cpu_args(SFTConfig, out, max_steps=2, per_device_train_batch_size=8, assistant_only_loss=True)
    data = SFTDataConfig(teacher="minimax-0.2", num_episodes=16)
    trainer = env >> trainer_spec(SFTTrainer, model=model, args=args, data=data)
    trainer.train()
    return [h["loss"] for h in trainer.state.log_history if "loss" in h]


def test_the_cpu_scores_only_labelled_positions_once_told_to_with_the_same_loss(
    env, tiny_model, tmp_path, monkeypatch
):
    monkeypatch.setattr(trl_utils, "_use_triton", chunked_logprob._use_triton)  # TRL's own choice
    scored, apply = [], trl_utils._ChunkedLogProbFunction.apply

    def counted(hidden, *rest):
        scored.append(hidden.shape[0])
        return apply(hidden, *rest)

    monkeypatch.setattr(trl_utils._ChunkedLogProbFunction, "apply", counted)
    every_position = sft_losses(env, tiny_model, str(tmp_path / "a"))
    # TRL on the CPU: every position of the batch projected through the vocabulary, the prompt's included.
    full, scored[:] = list(scored), []
    assert score_labelled_positions_only() and score_labelled_positions_only()  # idempotent
    labelled_only = sft_losses(env, tiny_model, str(tmp_path / "b"))
    # The assistant's tokens alone (the games' prompts and the env's turns are most of a row), the same loss.
    assert len(scored) == len(full) == 2 and all(
        0 < rows < whole / 2 for rows, whole in zip(scored, full, strict=True)
    )
    assert labelled_only == pytest.approx(every_position, rel=1e-4)
