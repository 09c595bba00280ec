"""The calculator env under GRPO through TRL's environment_factory: its four tools become TRL tools, TRL runs the
tool loop, and the env's rubric scores the episodes (the model is scripted: the env's own teacher)."""

from __future__ import annotations

import pytest

from envs import load_environment
from envs.calculator import SYSTEM_PROMPT, CalculatorTeacher

from .conftest import TINY, cpu_args, scripted_generation


@pytest.mark.slow
def test_calculator_composes_through_environment_factory_and_trains_a_step(tmp_path):
    from trl import GRPOConfig, GRPOTrainer

    from envs.policies.scratch_model import build_scratch_model
    from envs.policies.scratch_model_config import ScratchModelConfig
    from envs.training import trainer_spec

    env = load_environment("calculator", num_train=16, num_eval=4, num_test=4, num_groups=2)
    model = str(build_scratch_model(env.corpus(), tmp_path / "model", ScratchModelConfig(**TINY)))
    # In TRL's tool loop max_completion_length caps the whole completion, tool results included.
    args = cpu_args(
        GRPOConfig,
        str(tmp_path / "out"),
        max_steps=1,
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=256,
    )
    trainer = env >> trainer_spec(GRPOTrainer, model=model, args=args)
    assert sorted(t.__name__ for t in trainer.tools) == ["add", "divide", "multiply", "subtract"]
    assert trainer.train_dataset[0]["prompt"][0] == {"role": "system", "content": SYSTEM_PROMPT}
    trainer._generate_single_turn = scripted_generation(trainer.processing_class, CalculatorTeacher())
    trainer.train()
    logged = trainer.state.log_history[0]
    assert logged["tools/call_frequency"] > 0 and logged["tools/failure_frequency"] == 0.0
    assert logged["rewards/correct/mean"] == 1.0 and logged["rewards/tool_errors/mean"] == 0.0
    assert logged["rewards/tool_calls/mean"] >= 1.0
