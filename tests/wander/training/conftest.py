"""Shared fixtures: a tiny scratch model and a tic-tac-toe env small enough for two busy cores."""

from __future__ import annotations

import os
import re

import pytest
import torch

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

# hidden 64, 2 layers: ~60k parameters; trains a step in well under a second.
TINY = dict(
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=2,
    intermediate_size=128,
    vocab_size=512,
)


def cpu_args(config_cls: type, output_dir: str, **kwargs: object) -> object:
    """A TRL config for CPU tests: no bf16, no checkpointing, no reporting, seeded."""
    defaults = dict(
        bf16=False,
        activation_checkpointing=False,
        use_cpu=True,
        report_to=[],
        seed=0,
        logging_steps=1,
        save_strategy="no",
        disable_tqdm=True,
    )
    return config_cls(output_dir=output_dir, **{**defaults, **kwargs})


SEGMENT = re.compile(r"<\|im_start\|>(user|tool)\n(.*?)<\|im_end\|>", re.DOTALL)


def scripted_generation(tokenizer, teacher):
    """A stand-in for GRPOTrainer._generate_single_turn: the teacher's next message for each rendered
    conversation (rebuilt from its user and tool segments), tool calls in the chat template's format."""

    def generate(prompt_ids, *args, **kwargs):
        out = []
        for ids in prompt_ids:
            conversation = [{"role": r, "content": c} for r, c in SEGMENT.findall(tokenizer.decode(ids))]
            reply = teacher([conversation])[0].content
            reply = reply.replace("<tool_call>", "<tool_call>\n").replace("</tool_call>", "\n</tool_call>")
            out.append(tokenizer.encode(reply) + [tokenizer.eos_token_id])
        return out, None

    return generate


@pytest.fixture(scope="session", autouse=True)
def one_thread():
    """Tiny models run best on one thread; two threads crawl when other processes share the cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def env():
    """Tic-tac-toe with two difficulty strata and small splits."""
    from wander import load_environment

    return load_environment(
        "tictactoe",
        rendering="compact",
        history="full",
        num_groups=2,
        num_train=256,
        num_eval=16,
        num_test=16,
    )


@pytest.fixture(scope="session")
def tiny_model(env, tmp_path_factory) -> str:
    """An untrained tiny scratch model whose tokenizer knows the env's texts."""
    from wander.policies.scratch_model import build_scratch_model
    from wander.policies.scratch_model_config import ScratchModelConfig

    path = tmp_path_factory.mktemp("tiny") / "model"
    return str(build_scratch_model(env.corpus(), path, ScratchModelConfig(**TINY)))


@pytest.fixture(scope="session")
def sft_model(env, tiny_model, tmp_path_factory) -> str:
    """The tiny model after a short SFT on filtered minimax games (through env >> SFTTrainer).

    Minimax answers with a bare `<move>N</move>`, which a tiny model learns in seconds; sampled at T=1 it then
    plays some valid games and some invalid ones, so GRPO groups have reward variance to learn from.
    """
    from trl import SFTConfig, SFTTrainer

    from wander.training import trainer_spec
    from wander.training.sft_data_config import SFTDataConfig

    out = tmp_path_factory.mktemp("sft")
    args = cpu_args(
        SFTConfig, str(out), num_train_epochs=4, per_device_train_batch_size=16, learning_rate=1e-2
    )
    data = SFTDataConfig(teacher="minimax-0.2", num_episodes=256)
    trainer = env >> trainer_spec(SFTTrainer, model=tiny_model, args=args, data=data)
    trainer.train()
    trainer.save_model(str(out / "final"))
    trainer.processing_class.save_pretrained(str(out / "final"))
    return str(out / "final")
