"""Checkpoints served by vLLM (the CPU build from `make vllm`): greedy games equal transformers', the evaluate and
synthesize stages serve a checkpoint themselves, and GRPO generates through the server with its weights reloaded
after every step.

Two vLLM startups (50-75 s each on two cores): the evaluate stage's own for its `vllm_rows` row, and the module's
shared server, which the synthesize stage's teacher, the transformers comparison and GRPO use in that order (GRPO
last: it changes the served weights). The tests without the `slow` mark fail fast on purpose.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import torch

from tasks import generate, synthesize
from tasks.params.data_sections import Synthesize
from tasks.params.load import load_params, read_params, restrict
from tasks.synthesize import teacher_endpoint
from wander import load_environment
from wander.cli import main
from wander.core.atomic_io import read_jsonl
from wander.eval import matrix
from wander.eval.config import EvaluateConfig
from wander.eval.matrix import run_matrix
from wander.policies.loading import make_policy
from wander.policies.openai_policy import OpenAIPolicy
from wander.policies.vllm_server import VLLMServer, free_port
from wander.policies.vllm_server_config import VLLMServerConfig
from wander.training.vllm_server_generation import training_server, use_vllm_server

from .conftest import TINY, cpu_args
from .test_decision_rollout import decision_trainer

REPO = Path(__file__).resolve().parents[3]
OPPONENTS = ["random", "minimax-0"]
GAMES = 24  # per opponent and side: 96 games per row
STAGE_GAMES = 6  # the stages' runs: per opponent and side for evaluate, episodes for synthesize
MAX_TOKENS = 16  # a reply's budget, the same for the served model and transformers


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


def test_a_vllm_row_without_vllm_fails_with_the_servers_own_error(tmp_path):
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


def test_vllm_rows_must_be_model_rows():
    with pytest.raises(ValueError, match="not a model folder"):
        EvaluateConfig(policies={"m": "minimax"}, vllm_rows=["m"], baseline=None)
    with pytest.raises(ValueError, match="not a policy row"):
        EvaluateConfig(policies={"m": "minimax"}, vllm_rows=["other"], baseline=None)


def test_a_vllm_teacher_without_vllm_fails_with_the_servers_own_error(tmp_path):
    config = Synthesize(teacher_model=str(tmp_path), vllm={"python": sys.executable})
    with (
        pytest.raises(RuntimeError, match="No module named 'vllm'"),
        teacher_endpoint(config, load_environment("tictactoe")),
    ):
        pass


def test_a_teacher_is_a_served_model_or_an_endpoint_not_both(tmp_path):
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


def contents(messages: list[dict]) -> list[str]:
    return [m["content"] for m in messages]


@pytest.mark.slow
def test_the_evaluate_stage_serves_vllm_rows_itself(checkpoint, monkeypatch):
    # Before the module's server starts (the first test using `server`): one vLLM at a time on two cores.
    made = []

    def recording_make_policy(spec, **kwargs):
        made.append((spec, kwargs["model"], make_policy(spec, **kwargs)))
        return made[-1][2]

    monkeypatch.setattr(matrix, "make_policy", recording_make_policy)
    config = EvaluateConfig(
        policies={"transformers": checkpoint, "served": checkpoint},
        references=[],
        vllm_rows=["served"],
        opponents=OPPONENTS,
        games=STAGE_GAMES,
        max_new_tokens=MAX_TOKENS,
        baseline=None,
        progress=False,
    )
    result = run_matrix(config)
    (spec, _, local), (url, model, served) = made
    assert spec == checkpoint and not isinstance(local, OpenAIPolicy)
    # The served row: a client of the loopback vLLM the stage started under the row's name, asked for every move,
    # and stopped once the row was played.
    assert url.startswith("http://127.0.0.1:") and model == "served" and isinstance(served, OpenAIPolicy)
    assert served.stats.requests >= len(result.episodes["served"]) == 2 * len(OPPONENTS) * STAGE_GAMES
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/models", timeout=10)
    for a, b in zip(result.episodes["transformers"], result.episodes["served"], strict=True):
        assert contents(a.messages) == contents(b.messages), a.spec
        assert a.values == b.values
    assert len({tuple(contents(ep.messages)) for ep in result.episodes["served"]}) > 1


@pytest.mark.slow
def test_the_synthesize_stage_serves_teacher_model_through_vllm(checkpoint, server, tmp_path, monkeypatch):
    # The stage's vLLM startup is the module's: the stage asks for the checkpoint and gets the running server.
    asked = []

    @contextlib.contextmanager
    def module_server(model, config, name=None):
        asked.append((model, config, name))
        yield server

    monkeypatch.setattr(synthesize, "VLLMServer", module_server)
    raw = read_params(REPO / "params.yaml", profile="smoke")
    raw["layout"] = {key: str(tmp_path / value) for key, value in raw["layout"].items()}
    raw["synthesize"].update(teacher_model=checkpoint, num_episodes=STAGE_GAMES, batch_size=STAGE_GAMES)
    raw["synthesize"]["teacher"].update(temperature=0.0, max_tokens=MAX_TOKENS)
    params = load_params(params=raw)
    generate.run(restrict(params, "generate"))
    metrics = synthesize.run(restrict(params, "synthesize"))
    assert asked == [(checkpoint, params.synthesize.vllm, None)]  # served under its folder's name
    records = read_jsonl(Path(params.layout.episodes) / "episodes.jsonl")
    assert metrics["episodes"] == metrics["played"] == len(records) == STAGE_GAMES
    assert metrics["requests"] >= STAGE_GAMES and metrics["teacher"]["errored"] == 0.0
    # The served checkpoint played them: greedy, move for move the games the checkpoint plays here.
    env = load_environment(**params.env.kwargs())
    local = make_policy(checkpoint, temperature=0.0, max_new_tokens=MAX_TOKENS, env=env)
    expected = env.rollout(local, [r["spec"] for r in records])
    assert [contents(r["messages"]) for r in records] == [contents(ep.messages) for ep in expected]


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
