"""Learning demonstration: SFT on filtered expert-teacher games, then GRPO, evaluated before and after.

Against minimax(p=0) on the frozen eval split (200 games), greedy and sampled at the GRPO temperature (seeded),
with 95% confidence intervals: the non-loss rate and the share of games with an invalid move. Seconds per GRPO
step are measured from the trainer's own runtime. `python -m bench.learning [OUT_DIR]` runs it alone (a rerun on
the same OUT_DIR reuses the base model and SFT checkpoint and resumes GRPO); `run()` is the bench suite entry.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

from tasks.sections import GRPO as GRPOSection

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

SEED = 0
# ExpertPlayer(0.5) games before filtering (losses, invalid moves and format failures are dropped).
SFT_EPISODES = 4000
SFT_EPOCHS = 3
# GRPO stages: name, opponent random-move range, steps, sampling temperature. Strong opponents and a low
# temperature keep what GRPO improves close to the greedy policy. Measured from the same SFT start: at T=1 greedy
# non-loss vs minimax fell (0.055 -> 0.015); at T=0.3 it rose to 0.535 and greedy invalid games fell to 0.02.
GRPO_STAGES = (("strong", (0.0, 0.2), 300, 0.3),)
# The GRPO trainer settings besides the stages are the pipeline's (tasks/sections.py): the demo measures what
# `make run` trains with. The invalid-move penalty is for the training reward only; evaluation counts invalid games.
GRPO = GRPOSection()
GRPO_INVALID_PENALTY = GRPO.invalid_penalty  # training reward only (the env's default is -0.1)
GAMES_PER_STEP = GRPO.batch_size  # 4 episode groups of NUM_GENERATIONS, one per difficulty stratum
NUM_GENERATIONS = GRPO.num_generations
EVAL_GAMES = 200  # the whole frozen eval split


def _cpu(config_cls: type, **kwargs: object) -> object:
    """A TRL config for CPU: no bf16, no gradient checkpointing, no reporting (field notes)."""
    return config_cls(
        bf16=False, activation_checkpointing=False, use_cpu=True, report_to=[], seed=SEED, **kwargs
    )


def evaluate(model_dir: str, games: int | None = None) -> dict:
    """Versus minimax(p=0) on the frozen eval split: non-loss and invalid rates, greedy and at the GRPO temperature."""
    from envs import load_environment
    from envs.policies.transformers_policy import TransformersPolicy

    env = load_environment("tictactoe", random_move_prob=(0.0, 0.0))
    temperature = GRPO_STAGES[-1][3]
    out = {}
    for mode, kwargs in (
        ("greedy", {"greedy": True}),
        (f"T={temperature}", {"temperature": temperature, "seed": SEED}),
    ):
        policy = TransformersPolicy.from_pretrained(model_dir, max_new_tokens=48, **kwargs)
        metrics = env.evaluate(policy, n=games or EVAL_GAMES).metrics
        loss, invalid = metrics["loss"], metrics["any_invalid"]
        out[mode] = {
            "non_loss": {
                "mean": 1 - loss["mean"],
                "ci_low": 1 - loss["ci_high"],
                "ci_high": 1 - loss["ci_low"],
                "n": loss["n"],
            },
            "invalid_game_rate": invalid,
            "invalid_moves_per_game": metrics["invalid_moves"]["mean"],
            "win": metrics["win"]["mean"],
            "draw": metrics["draw"]["mean"],
        }
    return out


def run(out_dir: str | None = None, threads: int = 1) -> dict:
    """SFT, evaluate, GRPO curriculum, evaluate; return the numbers (CIs, seconds per step)."""
    from trl import GRPOConfig, GRPOTrainer, SFTConfig, SFTTrainer

    from envs import load_environment
    from envs.policies.scratch_model import build_scratch_model
    from envs.training import trainer_spec
    from envs.training.curriculum import DONE_FILE, Curriculum
    from envs.training.curriculum_config import CurriculumStage
    from envs.training.sft_data_config import SFTDataConfig

    torch.set_num_threads(threads)
    tmp = None
    if out_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="wander-learning-")
        out_dir = tmp.name
    out = Path(out_dir)
    result: dict = {
        "config": {
            "sft_episodes": SFT_EPISODES,
            "sft_epochs": SFT_EPOCHS,
            "stages": GRPO_STAGES,
            "grpo_invalid_penalty": GRPO_INVALID_PENALTY,
        }
    }

    env = load_environment("tictactoe", num_train=SFT_EPISODES)
    base = out / "base"
    if not base.exists():
        build_scratch_model(env.corpus(), base)

    sft_final = out / "sft" / "final"
    if not sft_final.exists():  # a rerun on the same folder reuses the SFT start
        start = time.perf_counter()
        sft_args = _cpu(
            SFTConfig,
            output_dir=str(out / "sft"),
            num_train_epochs=SFT_EPOCHS,
            per_device_train_batch_size=16,
            learning_rate=2e-3,
            lr_scheduler_type="cosine",
            warmup_steps=30,
            logging_steps=50,
            save_strategy="no",
            max_length=1024,
        )
        data = SFTDataConfig(teacher="expert-0.5", num_episodes=SFT_EPISODES, seed=SEED)
        sft = env >> trainer_spec(SFTTrainer, model=str(base), args=sft_args, data=data)
        sft.train()
        sft.save_model(str(sft_final))
        sft.processing_class.save_pretrained(str(sft_final))
        result["sft"] = {
            "kept_games": len(sft.train_dataset),
            "seconds": round(time.perf_counter() - start, 1),
            "final_loss": sft.state.log_history[-1].get("train_loss"),
        }
        del sft
    result["before"] = evaluate(str(sft_final))
    print("after SFT:", json.dumps(result["before"]), flush=True)

    stages = [
        CurriculumStage(
            name=name,
            random_move_prob=rng,
            max_steps=steps,
            temperature=temperature,
            batch_size=GAMES_PER_STEP,
            num_generations=NUM_GENERATIONS,
        )
        for name, rng, steps, temperature in GRPO_STAGES
    ]
    grpo_args = _cpu(
        GRPOConfig,
        output_dir=str(out / "grpo"),
        per_device_train_batch_size=GRPO.per_device_train_batch_size,
        num_generations=NUM_GENERATIONS,
        max_completion_length=GRPO.max_completion_length,
        learning_rate=GRPO.learning_rate,
        lr_scheduler_type=GRPO.lr_scheduler_type,
        warmup_steps=GRPO.warmup_steps,
        num_iterations=GRPO.num_iterations,
        logging_steps=10,
        save_steps=50,
        save_total_limit=1,
    )
    curriculum = Curriculum(stages)
    grpo_env = load_environment("tictactoe", num_train=SFT_EPISODES, invalid_penalty=GRPO_INVALID_PENALTY)
    final = curriculum.train(grpo_env, trainer_spec(GRPOTrainer, model=str(sft_final), args=grpo_args))
    done = [
        json.loads((Path(curriculum.stage_dir(grpo_args.output_dir, i)) / DONE_FILE).read_text())
        for i in range(len(stages))
    ]
    seconds = sum(d["metrics"]["train_runtime"] for d in done)
    steps = sum(d["global_step"] for d in done)
    result["grpo"] = {
        "steps": steps,
        "games_per_step": GAMES_PER_STEP,
        "seconds": round(seconds, 1),
        "seconds_per_step": round(seconds / steps, 3),
    }
    result["after"] = evaluate(final)
    print("after GRPO:", json.dumps(result["after"]), flush=True)
    if tmp is not None:
        tmp.cleanup()
    return result


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1] if len(sys.argv) > 1 else None), indent=2))
