"""A small GRPO or SFT run for the kill-and-resume test.

    python resume_job.py {grpo,sft} MODEL OUT [--hang-after STEP]

Resumes from the last checkpoint in OUT if there is one; with --hang-after it stops dead after saving that
step's checkpoint, waiting to be killed. Writes OUT/final.pt (the weights) and OUT/result.json.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
from transformers import TrainerCallback

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
STEPS = 4
SAVE_EVERY = 2


class HangAfterSave(TrainerCallback):
    """Stop making progress once a given step is checkpointed, as a killed machine would."""

    def __init__(self, step: int, out: Path):
        self.step = step
        self.out = out

    def on_save(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            (self.out / "hung").write_text(str(state.global_step))
            time.sleep(600)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["grpo", "sft"])
    parser.add_argument("model")
    parser.add_argument("out", type=Path)
    parser.add_argument("--hang-after", type=int, default=None)
    cli = parser.parse_args()
    torch.set_num_threads(1)

    from trl import GRPOConfig, GRPOTrainer, SFTConfig, SFTTrainer

    from wander import load_environment
    from wander.training import last_checkpoint, train_resumable, trainer_spec
    from wander.training.sft_data_config import SFTDataConfig

    env = load_environment("tictactoe", num_groups=2, num_train=64, num_eval=8, num_test=8)
    common = dict(
        output_dir=str(cli.out),
        max_steps=STEPS,
        save_strategy="steps",
        save_steps=SAVE_EVERY,
        logging_steps=1,
        learning_rate=1e-3,
        bf16=False,
        activation_checkpointing=False,
        use_cpu=True,
        report_to=[],
        seed=0,
        disable_tqdm=True,
    )
    if cli.kind == "grpo":
        args = GRPOConfig(
            per_device_train_batch_size=8, num_generations=4, max_completion_length=16, **common
        )
        trainer = env >> trainer_spec(GRPOTrainer, model=cli.model, args=args)
    else:
        args = SFTConfig(per_device_train_batch_size=8, **common)
        data = SFTDataConfig(teacher="minimax-0.2", num_episodes=48)
        trainer = env >> trainer_spec(SFTTrainer, model=cli.model, args=args, data=data)
    if cli.hang_after is not None:
        trainer.add_callback(HangAfterSave(cli.hang_after, cli.out))
    resumed_from = last_checkpoint(cli.out)
    train_resumable(trainer)
    torch.save(trainer.model.state_dict(), cli.out / "final.pt")
    result = {"resumed_from": resumed_from, "global_step": trainer.state.global_step}
    (cli.out / "result.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main()
