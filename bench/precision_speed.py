"""bf16 autocast against float32 on this machine, for the chat model and the scratch model, as ratios of one run.

- SFT: TRL SFTTrainer as the sft stage configures it (`trainer_args`: assistant-only loss, TRL's fused LM head scoring
  labelled positions only) on the env teacher's decision rows of the model's profile, `sft_batch` rows a step,
  `sft_steps` timed steps after a warm-up step, with `bf16` false and true.
- Greedy generation: `TransformersPolicy` (the evaluation's and GRPO's greedy player) answering the first positions
  of `batch` eval games, `repeats` timed calls after a warm-up, with `bf16` false and true.

Where the CPU has no bf16 instructions (`precision.bf16_support()` None) autocast emulates bf16 and the ratio says
how much slower that is; the stages' null `bf16` keys stay in float32 there.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import torch

from bench.chat_model_speed import PARAMS, convert_model, sft_step_seconds
from tasks.params.load import load_params
from wander import load_environment
from wander.policies.precision import bf16_support
from wander.policies.scratch_model import load_model, load_tokenizer
from wander.policies.transformers_policy import TransformersPolicy

PROFILES = {"chat": "llm", "scratch": None}  # model -> the params profile it trains with


def sft_seconds(path: str, profile: str | None, rows: int, batch: int, steps: int, work: Path) -> dict:
    """Seconds per SFT step in float32 and in bf16 autocast, and their ratio."""
    from datasets import Dataset

    from wander.training.sft_data import play_teacher, sft_rows
    from wander.training.sft_data_config import SFTDataConfig

    params = load_params(PARAMS, profile=profile)
    env = load_environment(**params.env.kwargs())
    data = SFTDataConfig(teacher="teacher", num_episodes=rows)  # a game has one decision row at least
    dataset = Dataset.from_list(sft_rows(play_teacher(env, data), data.filters, env)[:rows])
    out = {}
    for name, bf16 in (("fp32", False), ("bf16", True)):
        update = {"per_device_train_batch_size": batch, "logging_steps": 1, "bf16": bf16, "lora": None}
        _, seconds = sft_step_seconds(path, dataset, params.sft.model_copy(update=update), steps, work / name)
        out[f"{name}_s_per_step"] = round(seconds, 3)
    out["bf16_speedup"] = round(out["fp32_s_per_step"] / out["bf16_s_per_step"], 2)
    return out


def greedy_seconds(path: str, profile: str | None, batch: int, repeats: int) -> dict:
    """Seconds per greedy call over `batch` first positions, float32 and bf16 autocast, and their ratio."""
    params = load_params(PARAMS, profile=profile)
    env = load_environment(**params.env.kwargs(), num_eval=batch)
    conversations = [env.observation(env.start(s)) for s in env.get_dataset("eval").to_list()[:batch]]
    model, tokenizer = load_model(path, device="cpu"), load_tokenizer(path)
    out = {}
    for name, bf16 in (("fp32", False), ("bf16", True)):
        policy = TransformersPolicy(
            model, tokenizer, greedy=True, max_new_tokens=env.reply_tokens(), bf16=bf16
        )
        policy(conversations)  # warm-up
        start = time.perf_counter()
        for _ in range(repeats):
            policy(conversations)
        out[f"{name}_s_per_call"] = round((time.perf_counter() - start) / repeats, 3)
    out["bf16_speedup"] = round(out["fp32_s_per_call"] / out["bf16_s_per_call"], 2)
    return out


def scratch_model(folder: Path) -> str:
    """The scratch model of params.yaml, built by the build_model stage's code (random weights: speed only)."""
    from tasks import build_model

    params = load_params(PARAMS)
    layout = params.layout.model_copy(update={"base_model": str(folder), "metrics": str(folder.parent)})
    build_model.run(params.model_copy(update={"layout": layout}))
    return str(folder)


def run(
    sft_rows: int = 96,
    sft_batch: int = 16,
    sft_steps: int = 3,
    batch: int = 64,
    repeats: int = 3,
    threads: int = 2,
) -> dict:
    """SFT seconds per step and greedy seconds per call, fp32 and bf16, for the chat and the scratch model."""
    if min(sft_batch, sft_steps, batch, repeats, threads) < 1:
        raise ValueError("every size of the precision bench must be at least 1")
    if sft_rows < (1 + sft_steps) * sft_batch:
        raise ValueError(f"sft_rows {sft_rows} < (1 + sft_steps) x sft_batch: a timed step would repeat rows")
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    out: dict = {"bf16_hardware": bf16_support("cpu"), "torch_threads": threads}
    try:
        with tempfile.TemporaryDirectory(prefix="bench-precision-") as tmp:
            work = Path(tmp)
            paths = {"chat": convert_model(work / "chat"), "scratch": scratch_model(work / "scratch")}
            for model, path in paths.items():
                profile = PROFILES[model]
                out[model] = {
                    "sft": sft_seconds(path, profile, sft_rows, sft_batch, sft_steps, work / model),
                    "greedy": greedy_seconds(path, profile, batch, repeats),
                }
    finally:
        torch.set_num_threads(before)
    out["setup"] = (
        "TRL SFT as the sft stage runs it (labelled positions only); greedy TransformersPolicy calls"
    )
    return out
