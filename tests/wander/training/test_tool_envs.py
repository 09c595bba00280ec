"""The tool-calling envs under GRPO through TRL's environment_factory: their typed tools become TRL tools acting on
each rollout's own episode state, TRL runs the tool loop, and the env's rubric scores the episodes (the model is
scripted: the env's own teacher, so every episode should score full marks)."""

from __future__ import annotations

import pytest

from envs.calculator import SYSTEM_PROMPT as CALCULATOR_PROMPT
from envs.calculator import CalculatorTeacher
from envs.workplace_assistant import SYSTEM_PROMPT as WORKPLACE_PROMPT
from envs.workplace_assistant.teacher import WorkplaceTeacher
from envs.workplace_assistant.workspace import TOOLS as WORKPLACE_TOOLS
from wander import load_environment

from .conftest import TINY, cpu_args, scripted_generation

# env name: (system prompt, teacher, tool names, completion budget (tool results count), rubric means that must be 1)
CASES = {
    "calculator": (
        CALCULATOR_PROMPT,
        CalculatorTeacher,
        ["add", "divide", "multiply", "subtract"],
        256,
        ["correct"],
    ),
    # Every rollout's tools acted on its own workspace: the state checks hold for all of them.
    "workplace_assistant": (
        WORKPLACE_PROMPT,
        WorkplaceTeacher,
        sorted(WORKPLACE_TOOLS),
        768,
        ["task_reward"],
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_tool_env_composes_through_environment_factory_and_trains_a_step(name, tmp_path):
    from trl import GRPOConfig, GRPOTrainer

    from wander.policies.scratch_model import build_scratch_model
    from wander.policies.scratch_model_config import ScratchModelConfig
    from wander.training import trainer_spec

    prompt, teacher, tools, budget, perfect = CASES[name]
    env = load_environment(name, num_train=16, num_eval=4, num_test=4, num_groups=2)
    model = str(build_scratch_model(env.corpus(), tmp_path / "model", ScratchModelConfig(**TINY)))
    # In TRL's tool loop max_completion_length caps the whole completion, tool results included.
    args = cpu_args(
        GRPOConfig,
        str(tmp_path / "out"),
        max_steps=1,
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=budget,
    )
    trainer = env >> trainer_spec(GRPOTrainer, model=model, args=args)
    assert sorted(t.__name__ for t in trainer.tools) == tools
    assert trainer.train_dataset[0]["prompt"][0] == {"role": "system", "content": prompt}
    trainer._generate_single_turn = scripted_generation(trainer.processing_class, teacher())
    trainer.train()
    logged = trainer.state.log_history[0]
    assert logged["tools/call_frequency"] > 0 and logged["tools/failure_frequency"] == 0.0
    assert all(logged[f"rewards/{metric}/mean"] == 1.0 for metric in perfect), logged
    assert logged["rewards/tool_calls/mean"] >= 1.0 and logged["rewards/tool_errors/mean"] == 0.0
    if name == "workplace_assistant":
        assert logged["rewards/side_effects/mean"] == 0.0
