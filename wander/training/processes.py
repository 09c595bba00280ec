"""A trainer on several processes (torch.distributed, as `torchrun` or `accelerate launch` start it): which process
writes, how the processes keep step, and a check that DDP keeps every replica's weights identical.

TRL's trainers run unchanged on N processes; what is ours is the code around them. One process, the main one (rank
0), writes what a stage leaves behind (its model, checkpoint folders' housekeeping, metrics, MLflow); the others
train and wait for it where they read what it wrote (`wait_for_everyone`). Each process samples from its own seed
(`ProcessSeeds`); the data order stays the one seed all share, so each rank reads a distinct slice of each batch.
"""

from __future__ import annotations

import logging
from typing import Any

from transformers import TrainerCallback

logger = logging.getLogger(__name__)


def wait_for_everyone(trainer: Any) -> None:
    """A barrier across the trainer's processes (nothing when it trains alone)."""
    if trainer.accelerator.num_processes > 1:
        trainer.accelerator.wait_for_everyone()


def process_seed(seed: int, rank: int) -> int:
    """The sampling seed of process `rank` in a run seeded `seed`: rank 0 keeps the run's own."""
    return seed + 7919 * rank  # a prime stride: no two ranks of nearby seeds share one


class ProcessSeeds(TrainerCallback):
    """Seeds each process's sampling (generation, dropout) from the run's seed and its rank as training starts; a
    resumed run restores each rank's saved RNG state instead. The data sampler keeps the shared seed it was built
    with, so the ranks still split one data order between them."""

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        """A fresh run: each rank's own seed."""
        if state.global_step == 0:
            from transformers import set_seed

            set_seed(process_seed(args.seed, args.process_index))
        return control


class ReplicaCheck(TrainerCallback):
    """After every optimizer step, the processes compare a float64 checksum of their weights and stop training with
    an error naming the step when they differ: DDP keeps replicas identical by construction, so a difference is a
    bug (a rank that loaded other weights, or changed them outside the optimizer). `steps` counts the checks."""

    def __init__(self, trainer: Any):
        self.trainer = trainer
        self.steps = 0

    def checksum(self) -> list[float]:
        """Two sums over every parameter (values and absolute values), in float64."""
        import torch

        model = self.trainer.accelerator.unwrap_model(self.trainer.model)
        with torch.no_grad():
            total = torch.zeros(2, dtype=torch.float64)
            for p in model.parameters():
                flat = p.detach().to(device="cpu", dtype=torch.float64)
                total += torch.stack([flat.sum(), flat.abs().sum()])
        return total.tolist()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        """Gather every rank's checksum; raise on a difference."""
        from accelerate.utils import gather_object

        sums = gather_object([self.checksum()])
        if any(s != sums[0] for s in sums[1:]):
            shown = ", ".join(f"rank {r}: {s[0]:.17g}" for r, s in enumerate(sums))
            raise RuntimeError(
                f"the training processes' weights differ after optimizer step {state.global_step} ({shown}): "
                "their replicas must stay identical; check that every process starts from the same model"
            )
        self.steps += 1
        return control

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        """Say how many steps were checked (the main process)."""
        if args.process_index == 0:
            logger.info(
                "weights identical on %d processes after each of %d optimizer steps",
                args.world_size,
                self.steps,
            )
        return control


def add_process_callbacks(trainer: Any) -> None:
    """On several processes, each rank's sampling seed and the replica check (nothing for one process)."""
    if trainer.accelerator.num_processes > 1:
        trainer.add_callback(ProcessSeeds())
        trainer.add_callback(ReplicaCheck(trainer))
