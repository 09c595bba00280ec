"""bf16 where the hardware computes it: a CUDA GPU that supports it, or a CPU with bf16 instructions.

Training and generation compute in bf16 autocast there (the weights and the optimizer stay float32), float32
elsewhere: on a CPU without bf16 instructions autocast emulates it, slower than float32. Measured with 2 threads on
an AMD EPYC with AVX-512 BF16: the chat model's (SmolLM2-135M) SFT step 1.2-1.6x faster than float32, its greedy
generation 1.35x; the scratch model gains nothing in the pipeline's shapes (`bench/precision_speed.py`;
docs/experiments/chat-model.md#bf16-on-the-cpu-by-default-and-grpo-on-the-lines-that-beat-it).
Every stage's `bf16` key (null = detected, true/false forces it) goes through `resolve_bf16`.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from pathlib import Path

import torch

CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
"""/proc/cpuinfo flags of CPUs that compute bf16 matrix products in hardware (AVX-512 BF16, AMX)."""


@functools.cache
def cpu_bf16_flags(cpuinfo: str = "/proc/cpuinfo") -> tuple[str, ...]:
    """The bf16 instruction sets this CPU has (empty where it has none or does not say)."""
    try:
        text = Path(cpuinfo).read_text(errors="replace")
    except OSError:
        return ()
    flags = next(
        (line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), []
    )
    return tuple(f for f in CPU_BF16_FLAGS if f in flags)


def bf16_support(device: torch.device | str | None = None) -> str | None:
    """What computes bf16 on `device` (default: CUDA if any, else the CPU), in words; None where nothing does."""
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda":
        return "CUDA" if torch.cuda.is_bf16_supported() else None
    flags = cpu_bf16_flags()
    return "CPU " + "+".join(flags) if flags else None


def resolve_bf16(setting: bool | None, device: torch.device | str | None = None) -> bool:
    """A `bf16` key's meaning on this machine: true/false as given, null = where the hardware computes bf16."""
    return bf16_support(device) is not None if setting is None else setting


def precision_line(settings: dict[str, bool | None]) -> str:
    """The run summary's line: each stage's precision as its `bf16` key resolves here, and why."""
    support = bf16_support()
    stages = ", ".join(f"{name} {'bf16' if resolve_bf16(s) else 'fp32'}" for name, s in settings.items())
    found = f"this machine computes bf16 ({support})" if support else "this machine has no bf16 hardware"
    return f"precision: {stages} (null = detected: {found}; the stages' bf16 keys force either)"


@contextlib.contextmanager
def autocast(enabled: bool, device: torch.device) -> Iterator[None]:
    """bf16 autocast on `device` when `enabled` (float32 weights stay as they are), else nothing."""
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=enabled):
        yield
