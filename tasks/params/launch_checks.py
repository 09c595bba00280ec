"""What a training stage on several processes needs, checked before anything starts: batches that split into whole
groups per process, a launcher this machine can run, vLLM's server mode only where CUDA is (tasks/runtime/launch.py
starts the processes; the flow's preflight and the stage itself ask these questions)."""

from __future__ import annotations

from pathlib import Path

from tasks.params.sections import Params

ACCELERATE_CONFIGS = "configs/accelerate"
LAUNCHED = ("sft", "grpo")  # the stages whose sections say how many processes train


def launched(params: Params, stage: str) -> bool:
    """Whether the stage starts processes of its own (several, or through an accelerate config)."""
    section = getattr(params, stage)
    return stage in LAUNCHED and (section.processes > 1 or section.accelerate_config is not None)


def launch_problems(params: Params, stage: str) -> list[str]:
    """What keeps the stage from training on its processes, one line each naming the key and the fix."""
    # GRPO's batches must split on one process too: found here, not when the grpo stage starts after SFT.
    found = vllm_problems(params) + grpo_batch_problems(params) if stage == "grpo" else []
    if not launched(params, stage):
        return found
    import torch

    section = getattr(params, stage)
    cuda = torch.cuda.is_available()
    config = section.accelerate_config
    if config is not None and not cuda:
        found.append(
            f"{stage}.accelerate_config: accelerate's launcher starts one process on a machine without CUDA "
            f"(accelerate issue 2741); on CPU set {stage}.processes alone (torchrun, gloo) and accelerate_config null"
        )
    elif config is not None and not Path(config).is_file():
        found.append(
            f"{stage}.accelerate_config: no file {config}; {ACCELERATE_CONFIGS}/ has the shipped ones"
        )
    if cuda and config is None and section.processes > torch.cuda.device_count():
        found.append(
            f"{stage}.processes {section.processes}: this machine has {torch.cuda.device_count()} CUDA device(s), "
            f"one per process; several machines: an accelerate config ({ACCELERATE_CONFIGS}/multi-node.yaml)"
        )
    return found


def vllm_problems(params: Params) -> list[str]:
    """GRPO's generation through TRL's vLLM modes needs CUDA and vllm importable in the trainer's venv."""
    mode = params.grpo.vllm_mode
    if mode is None:
        return []
    import importlib.util

    import torch

    if not torch.cuda.is_available():
        why = "sends the weights to the server over NCCL only" if mode == "server" else "runs vLLM on a GPU"
        return [
            f"grpo.vllm_mode: {mode} needs CUDA: TRL's vLLM client {why}; on CPU leave it null (each process "
            "generates with transformers)"
        ]
    if importlib.util.find_spec("vllm") is None:
        return [f"grpo.vllm_mode: {mode} needs vllm importable in this venv (TRL's client): pip install vllm"]
    return []


def grpo_batch_problems(params: Params) -> list[str]:
    """Each curriculum stage's batch must split into whole groups per process and whole micro-batches."""
    grpo, found = params.grpo, []
    n = grpo.processes
    # TRL's GRPOConfig checks its own generation batch (a micro-batch on every process) before any stage's batch
    # replaces it: found only when the grpo stage starts, after SFT, unless found here.
    if (grpo.per_device_train_batch_size * n) % grpo.num_generations:
        found.append(
            f"grpo.per_device_train_batch_size {grpo.per_device_train_batch_size} x {n} processes is not a multiple "
            f"of grpo.num_generations {grpo.num_generations} (TRL's GRPOConfig refuses it): use a multiple of "
            f"{grpo.num_generations}"
        )
    for name, stage in grpo.curriculum(grpo.env.get(params.env.name, {})).items():
        group = stage.num_generations or grpo.num_generations
        per_device = min(grpo.per_device_train_batch_size, stage.batch_size)
        if stage.batch_size % (per_device * n) or (stage.batch_size // n) % group:
            found.append(
                f"grpo.stages.{name}.batch_size {stage.batch_size}: on {n} processes each plays a share of whole "
                f"groups of {group} in micro-batches of {per_device}: use a multiple of {group * n} that "
                f"per_device_train_batch_size x {n} divides"
            )
    return found
