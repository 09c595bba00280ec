"""Checkpoints served by vLLM (the CPU build from `make vllm`): greedy games equal transformers', and GRPO
generates through the server with its weights reloaded after every step.

One vLLM startup for the module (50-75 s on two cores), shared by the slow tests; the other tests fail fast on
purpose.
"""

from __future__ import annotations

import os
import subprocess
import sys

import httpx
import pytest
import torch

from tasks.plumbing.sections import EvaluateConfig, Synthesize
from tasks.synthesize import teacher_endpoint
from wander import load_environment
from wander.cli import main
from wander.eval.matrix import run_matrix
from wander.policies.vllm_server import VLLMServer, free_port
from wander.policies.vllm_server_config import VLLMServerConfig
from wander.training.vllm_server_generation import training_server, use_vllm_server

from .conftest import TINY, cpu_args
from .test_decision_rollout import decision_trainer

OPPONENTS = ["random", "minimax-0"]
GAMES = 24  # per opponent and side: 96 games per row


def test_a_missing_vllm_venv_is_named_with_the_command_that_makes_it(tmp_path):
    config = VLLMServerConfig(python=str(tmp_path / "nowhere" / "python"))
    with pytest.raises(FileNotFoundError, match="make vllm"):
        VLLMServer(tmp_path, config).start()


def test_a_server_that_dies_at_startup_shows_its_log_and_leaves_nothing(tmp_path):
    # A python without vLLM: the child exits at once, and its own error reaches the message.
    server = VLLMServer(tmp_path, VLLMServerConfig(python=sys.executable))
    with pytest.raises(RuntimeError, match="exited with code 1 before it was ready") as failure:
        server.start()
    assert "No module named 'vllm'" in str(failure.value)
    assert server.process is None


def test_the_evaluate_stage_serves_vllm_rows_itself(tmp_path):
    config = EvaluateConfig(
        policies={"served": str(tmp_path)},
        references=[],
        vllm_rows=["served"],
        vllm={"python": sys.executable},
        games=1,
        baseline=None,
        progress=False,
    )
    with pytest.raises(RuntimeError, match="No module named 'vllm'"):
        run_matrix(config)
    with pytest.raises(ValueError, match="not a model folder"):
        EvaluateConfig(policies={"m": "minimax"}, vllm_rows=["m"], baseline=None)


def test_the_synthesize_stage_serves_teacher_model_through_vllm(tmp_path):
    config = Synthesize(teacher_model=str(tmp_path), vllm={"python": sys.executable})
    with (
        pytest.raises(RuntimeError, match="No module named 'vllm'"),
        teacher_endpoint(config, load_environment("tictactoe")),
    ):
        pass
    with pytest.raises(ValueError, match="not both"):
        Synthesize(teacher_model=str(tmp_path), teacher_url="http://127.0.0.1:1/v1")


def test_serve_model_reports_a_server_that_cannot_start(tmp_path, capsys):
    code = main(["serve-model", str(tmp_path), "--port", "0", "--python", sys.executable, "--quiet"])
    assert code == 1
    assert "No module named 'vllm'" in capsys.readouterr().err


@pytest.fixture(scope="module")
def board_env():
    """Tic-tac-toe as the pipeline plays it (board text, one move per reply, the current board each turn)."""
    return load_environment("tictactoe", num_groups=2, num_train=256, num_eval=16, num_test=16)


@pytest.fixture(scope="module")
def checkpoint(board_env, tmp_path_factory) -> str:
    """A tiny scratch model after a short SFT on minimax moves in `board_env`'s format.

    Trained on the format it is evaluated in, its greedy games vary and its replies are decided by clear margins,
    as a real checkpoint's are (the session's `sft_model` learned another format: greedy, it repeats one game).
    """
    from trl import SFTConfig, SFTTrainer

    from wander.policies.scratch_model import build_scratch_model
    from wander.policies.scratch_model_config import ScratchModelConfig
    from wander.training import trainer_spec
    from wander.training.sft_data_config import SFTDataConfig

    root = tmp_path_factory.mktemp("vllm")
    base = build_scratch_model(board_env.corpus(), root / "base", ScratchModelConfig(**TINY))
    args = cpu_args(
        SFTConfig, str(root / "run"), num_train_epochs=3, per_device_train_batch_size=16, learning_rate=1e-2
    )
    data = SFTDataConfig(teacher="minimax-0.2", num_episodes=256)
    trainer = board_env >> trainer_spec(SFTTrainer, model=str(base), args=args, data=data)
    trainer.train()
    trainer.model.config.use_cache = True
    trainer.save_model(str(root / "sft"))
    trainer.processing_class.save_pretrained(str(root / "sft"))
    return str(root / "sft")


@pytest.fixture(scope="module")
def server(checkpoint, tmp_path_factory):
    """The checkpoint served by vLLM for the module, ready to reload weights (an untied copy: the same numbers)."""
    work = tmp_path_factory.mktemp("served")
    with training_server(checkpoint, work, VLLMServerConfig(port=free_port()), name="sft") as server:
        yield server
    # Stopped with its whole process group: nothing listens on its port, no process serves the checkpoint.
    listening = subprocess.run(["ss", "-ltn", f"sport = :{server.port}"], capture_output=True, text=True)
    assert f":{server.port}" not in listening.stdout, listening.stdout
    assert not any(server.model in _cmdline(pid) for pid in os.listdir("/proc") if pid.isdigit())


@pytest.mark.slow
def test_greedy_games_through_vllm_equal_transformers_game_for_game(checkpoint, server):
    config = EvaluateConfig(
        policies={"transformers": checkpoint, "vllm": server.base_url},
        references=[],
        api_model=server.name,
        opponents=OPPONENTS,
        games=GAMES,
        baseline=None,
        progress=False,
    )
    result = run_matrix(config)  # the env's defaults: board_env's format
    local, served = result.episodes["transformers"], result.episodes["vllm"]
    assert len(local) == len(served) == 2 * len(OPPONENTS) * GAMES
    for a, b in zip(local, served, strict=True):
        assert [m["content"] for m in a.messages] == [m["content"] for m in b.messages], a.spec
        assert a.values == b.values
    # Many different games, not one transcript repeated: every position asked is a comparison.
    assert len({tuple(m["content"] for m in ep.messages) for ep in local}) > len(local) // 4


@pytest.mark.slow
def test_grpo_generates_through_vllm_and_reloads_the_weights_every_step(
    board_env, checkpoint, server, tmp_path
):
    # Two steps of 16 decisions in groups of 4, in board_env's format: the decision-rollout tests' own trainer.
    # No exploration: its forced moves have no vLLM sampling logprobs. This checkpoint's groups spread anyway.
    _, trainer = decision_trainer(checkpoint, tmp_path, explore=0.0)
    trainer = use_vllm_server(trainer, server)
    start = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
    trainer.train()
    generation = trainer.vllm_generation
    assert generation.syncs == 2 and generation.calls >= 2  # before step 1 and before step 2
    assert all("reward" in entry for entry in trainer.state.log_history[:2])
    assert any(not torch.equal(v, start[k]) for k, v in trainer.model.state_dict().items())
    # Sync once more: the server now answers with the trained weights, token for token as the trainer computes.
    generation.sync_weights()
    tokenizer = trainer.processing_class
    prompt = tokenizer.apply_chat_template(
        board_env.start(board_env.make_spec(7)).messages, add_generation_prompt=True, return_dict=False
    )
    prompt = list(prompt["input_ids"] if hasattr(prompt, "keys") else prompt)
    body = {"model": server.name, "prompt": prompt, "max_tokens": 1, "temperature": 1.0, "logprobs": 5}
    body["return_tokens_as_token_ids"] = True  # top tokens as "token_id:N"
    top = httpx.post(f"{server.base_url}/completions", json=body, timeout=60).json()["choices"][0]
    top = top["logprobs"]["top_logprobs"][0]
    with torch.no_grad():
        logits = trainer.model(torch.tensor([prompt], device=trainer.model.device)).logits
        trained = torch.log_softmax(logits[0, -1].float().cpu(), -1)
    for token, logprob in top.items():
        assert logprob == pytest.approx(trained[int(token.split(":")[1])].item(), abs=1e-3)
    # A reply that stops by itself ends on the end-of-turn token, as the rollouts need (else TRL sees truncation).
    _, completions, logprobs, _ = generation.generate([prompt] * 4)
    assert any(ids[-1] == tokenizer.eos_token_id for ids in completions)
    assert [len(lp) for lp in logprobs] == [len(ids) for ids in completions]


def _cmdline(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
