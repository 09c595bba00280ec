"""The chat model's speed (SmolLM2-135M-Instruct, the `llm` profile): generation through transformers and vLLM,
SFT rows per second, GRPO seconds per step; one run, so the ratios compare like with like.

- generation: the first prompts of `batch` games, as the profile's env settings render them through the model's
  chat template, decoded greedily for exactly `new_tokens` tokens each (end-of-turn ignored): transformers
  `generate` with torch at `threads` threads, and vLLM's CPU build (`.venv-vllm`) once per CPU binding of its
  engine in `vllm_binds` ("auto": vLLM's own, which keeps a core for its API server; "all": the engine on every
  core of this process). The best of `repeats` timed passes after a warm-up (bench/vllm_speed.py's helpers).
- SFT: TRL SFTTrainer as tasks/sft.py configures it (the profile's sft section, assistant-only loss, bf16 where the
  hardware has it, no checkpointing) on the env teacher's decision rows, `sft_batch` rows per step, `sft_steps`
  timed steps after one warm-up step; full fine-tuning and LoRA (`lora_config({})`).
- GRPO: one curriculum stage built as tasks/grpo.py builds it (`env >> trainer_spec(GRPOTrainer, ...)`, the
  profile's grpo section, its first stage's opponents), `groups` x `group_size` samples per step, `play_on: best`,
  `grpo_steps` timed steps after a warm-up step; no learning-curve evaluation.

The defaults are the measured sizes; small ones check the code end to end (`run(batch=4, new_tokens=4, ...)`).
"""

from __future__ import annotations

import dataclasses
import os
import re
import tempfile
import time
from pathlib import Path

import torch
from transformers import TrainerCallback

from bench.vllm_speed import prompts, transformers_seconds, vllm_seconds
from tasks.params.load import load_params
from tasks.params.sections import Params
from tasks.runtime.trainer_args import trainer_args
from wander import load_environment
from wander.policies.packaged_models import load_packaged
from wander.policies.vllm_server import VLLMServer
from wander.policies.vllm_server_config import VLLMServerConfig

MODEL = "smollm2-135m-instruct"
PROFILE = "llm"
VLLM_BINDS = ("auto", "all")
PARAMS = Path(__file__).resolve().parents[1] / "params.yaml"  # the profile is merged onto it


class StepClock(TrainerCallback):
    """The time at the end of every optimizer step."""

    def __init__(self) -> None:
        self.ends: list[float] = []

    def on_step_end(self, args: object, state: object, control: object, **kwargs: object) -> None:
        """Record the step's end."""
        self.ends.append(time.perf_counter())

    def seconds_per_step(self) -> float:
        """Mean seconds of the steps after the first (the warm-up)."""
        if len(self.ends) < 2:
            raise RuntimeError(
                f"training ran {len(self.ends)} step(s); a warm-up and a timed step are needed"
            )
        return (self.ends[-1] - self.ends[0]) / (len(self.ends) - 1)


def convert_model(folder: Path) -> str:
    """The packaged chat model as a plain checkpoint folder (model and tokenizer), as build_model writes it."""
    tokenizer, model = load_packaged(MODEL)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def engine_cores(log: Path) -> list[int] | None:
    """The CPU ids vLLM's engine bound its threads to, read from the server's log (None when it does not say)."""
    found = re.findall(r"local_rank=0, core ids=\[([\d, ]*)\]", log.read_text(errors="replace"))
    return [int(c) for c in found[-1].split(",") if c.strip()] if found else None


def generation_speed(
    path: str, params: Params, batch: int, new_tokens: int, repeats: int, vllm_binds: tuple, work: Path
) -> dict:
    """Tokens per second of transformers and of vLLM (once per engine binding), and their ratios."""
    from transformers import AutoTokenizer

    env = load_environment(**params.env.kwargs(), num_eval=batch)
    tokenizer = AutoTokenizer.from_pretrained(path)
    token_ids = prompts(env, tokenizer, batch)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    hf = transformers_seconds(path, token_ids, pad, new_tokens, repeats)
    tokens = batch * new_tokens
    out = {
        "prompt_tokens_mean": round(sum(map(len, token_ids)) / batch, 1),
        "transformers_tokens_per_s": round(tokens / hf, 1),
        "transformers_threads": torch.get_num_threads(),
        "vllm": {},
    }
    cpus = ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))
    for bind in vllm_binds:
        # vLLM logs to stdout, block-buffered into a file: unbuffered, the log holds its binding when read.
        env_vars = {"PYTHONUNBUFFERED": "1"}
        if bind == "all":
            env_vars["VLLM_CPU_OMP_THREADS_BIND"] = cpus
        log = work / f"vllm-{bind}.log"
        start = time.perf_counter()
        with VLLMServer(path, VLLMServerConfig(env_vars=env_vars), name=MODEL, log=log) as server:
            startup = time.perf_counter() - start
            seconds = vllm_seconds(server, token_ids, new_tokens, repeats)
        cores = engine_cores(log)
        out["vllm"][bind] = {
            "tokens_per_s": round(tokens / seconds, 1),
            "over_transformers": round(hf / seconds, 2),
            "engine_cores": cores,
            "engine_threads": len(cores) if cores is not None else None,
            "startup_s": round(startup, 1),
        }
    return out


def sft_speed(path: str, params: Params, rows: int, batch: int, steps: int, work: Path) -> dict:
    """Rows per second of SFTTrainer on the env teacher's decision rows, full fine-tuning and LoRA."""
    from datasets import Dataset

    from wander.training.lora import lora_config
    from wander.training.sft_data import play_teacher, sft_rows
    from wander.training.sft_data_config import SFTDataConfig

    env = load_environment(**params.env.kwargs())
    data = SFTDataConfig(teacher="teacher", num_episodes=rows)  # a game has one decision row at least
    kept = sft_rows(play_teacher(env, data), data.filters, env)[:rows]
    dataset = Dataset.from_list(kept)
    section = params.sft.model_copy(update={"per_device_train_batch_size": batch, "logging_steps": 1})
    out: dict = {"rows": len(kept), "batch": batch, "timed_steps": steps}
    for name, lora in (("full", None), ("lora", lora_config({}))):
        trainer, seconds = sft_step_seconds(path, dataset, section, steps, work / f"sft-{name}", lora)
        rows_per_step = trainer.args.per_device_train_batch_size * trainer.args.gradient_accumulation_steps
        out[name] = {"seconds_per_step": round(seconds, 2), "rows_per_s": round(rows_per_step / seconds, 2)}
    out["gradient_accumulation_steps"] = params.sft.gradient_accumulation_steps
    out["tokens_per_row_mean"] = round(
        sum(len(ids) for ids in trainer.train_dataset["input_ids"]) / len(trainer.train_dataset), 1
    )
    return out


def sft_step_seconds(
    path: str, dataset: object, section: object, steps: int, out: Path, peft_config: object = None
) -> tuple[object, float]:
    """The trainer and its mean seconds per SFT step over `steps` timed steps after a warm-up, configured as the
    sft stage configures it (`trainer_args` on `section`, assistant-only loss)."""
    from trl import SFTConfig, SFTTrainer

    args = trainer_args(
        SFTConfig,
        section,
        output_dir=str(out),
        assistant_only_loss=True,
        max_steps=1 + steps,
        save_strategy="no",
    )
    clock = StepClock()
    trainer = SFTTrainer(
        model=path, args=args, train_dataset=dataset, peft_config=peft_config, callbacks=[clock]
    )
    trainer.train()
    return trainer, clock.seconds_per_step()


def grpo_speed(path: str, params: Params, groups: int, group_size: int, steps: int, work: Path) -> dict:
    """Seconds per GRPO step of `groups` x `group_size` samples, decision rollouts with `play_on: best`."""
    from trl import GRPOConfig, GRPOTrainer

    from wander.training import RolloutConfig, trainer_spec
    from wander.training.curriculum import Curriculum

    config, name = params.grpo, params.env.name
    first = next(iter(config.curriculum(config.env.get(name, {})).values()))
    samples = groups * group_size
    stage = dataclasses.replace(first, batch_size=samples, num_generations=group_size, max_steps=1 + steps)
    env = load_environment(**params.env.kwargs())
    args = trainer_args(GRPOConfig, config, output_dir=str(work / "grpo"), save_strategy="no")
    spec = trainer_spec(GRPOTrainer, args=args, rollout=RolloutConfig(play_on="best", explore=config.explore))
    trainer = Curriculum([stage]).trainer(env, spec, 0, model=path)
    clock = StepClock()
    trainer.add_callback(clock)
    trainer.train()
    return {
        "samples_per_step": samples,
        "groups": groups,
        "group_size": group_size,
        "per_device_train_batch_size": trainer.args.per_device_train_batch_size,
        "gradient_accumulation_steps": trainer.args.gradient_accumulation_steps,
        "timed_steps": steps,
        "play_on": "best",
        "seconds_per_step": round(clock.seconds_per_step(), 2),
    }


def run(
    batch: int = 64,
    new_tokens: int = 32,
    repeats: int = 3,
    vllm_binds: tuple = VLLM_BINDS,
    sft_rows: int = 100,
    sft_batch: int = 16,
    sft_steps: int = 3,
    groups: int = 8,
    group_size: int = 8,
    grpo_steps: int = 2,
    threads: int = 2,
    profile: str = PROFILE,
) -> dict:
    """The chat model's generation tokens/s (transformers, vLLM, ratio), SFT rows/s and GRPO s/step, one run."""
    if min(batch, new_tokens, repeats, sft_rows, sft_batch, sft_steps, groups, grpo_steps, threads) < 1:
        raise ValueError("every size of the chat-model bench must be at least 1")
    if group_size < 2:
        raise ValueError(
            f"group_size must be at least 2 (a GRPO group compares its samples), got {group_size}"
        )
    if sft_rows < (1 + sft_steps) * sft_batch:
        raise ValueError(
            f"sft_rows {sft_rows} < (1 + sft_steps) x sft_batch: a timed step would repeat rows; raise sft_rows"
        )
    unknown = [b for b in vllm_binds if b not in VLLM_BINDS]
    if unknown:
        raise ValueError(f"vllm_binds: unknown binding(s) {unknown}; use some of {VLLM_BINDS}")
    from wander.training.episode_data import num_strata

    params = load_params(PARAMS, profile=profile)
    strata = num_strata(load_environment(**params.env.kwargs()))
    if groups % strata:  # before the model is converted: GRPO refuses it only minutes later
        raise ValueError(
            f"groups {groups} must divide by the env's {strata} difficulty strata (every batch covers each)"
        )
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    start = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="bench-chat-") as tmp:
            path = convert_model(Path(tmp) / "model")
            convert = time.perf_counter() - start
            generation = generation_speed(
                path, params, batch, new_tokens, repeats, tuple(vllm_binds), Path(tmp)
            )
            sft = sft_speed(path, params, sft_rows, sft_batch, sft_steps, Path(tmp))
            grpo = grpo_speed(path, params, groups, group_size, grpo_steps, Path(tmp))
    finally:
        torch.set_num_threads(before)
    return {
        "model": MODEL,
        "profile": profile,
        "env": params.env.kwargs(),
        "torch_threads": threads,
        "convert_s": round(convert, 1),
        "generation": {
            "batch": batch,
            "new_tokens_per_sequence": new_tokens,
            "repeats": repeats,
            **generation,
        },
        "sft": sft,
        "grpo": grpo,
        "setup": "generation float32; SFT and GRPO as the profile's sections resolve bf16 here (precision_speed "
        "compares both); vllm-cpu 0.32.0 with --enforce-eager; TRL on CPU, no checkpointing",
    }
