"""The TRL trainer configs of the training stages (sft, grpo): a params section's keys, fitted to this machine."""

from __future__ import annotations

import dataclasses
import sys

from tasks.params.section_base import Section


def trainer_args(config_cls: type, section: Section, **fixed: object) -> object:
    """A TRL config from a params section: every key named like one of its fields, plus `fixed`, for this device."""
    names = {f.name for f in dataclasses.fields(config_cls)}
    return device_args(config_cls, **{k: v for k, v in section.model_dump().items() if k in names}, **fixed)


def device_args(config_cls: type, bf16: bool | None = False, **kwargs: object) -> object:
    """A TRL config for this machine, logging to the active MLflow run: bf16 autocast when `bf16` says so (None:
    where the hardware computes bf16, `resolve_bf16`: a CUDA GPU that has it, a CPU with AVX-512 BF16 or AMX; TRL
    defaults to bf16 everywhere); never gradient checkpointing (small models, memory to spare). On the CPU
    TRL's fused LM head then scores only labelled positions (`score_labelled_positions_only`)."""
    import torch

    from wander.policies.precision import resolve_bf16
    from wander.training.fused_head import score_labelled_positions_only

    score_labelled_positions_only()

    report_to = ["mlflow"] if "mlflow" in sys.modules and sys.modules["mlflow"].active_run() else []
    cuda = torch.cuda.is_available()
    return config_cls(
        bf16=resolve_bf16(bf16),
        activation_checkpointing=False,
        ddp_find_unused_parameters=False,  # every parameter takes part in the forward: no extra graph traversal
        use_cpu=not cuda,
        report_to=report_to,
        disable_tqdm=True,
        **kwargs,
    )
