"""TRL's fused LM head on the CPU: score only the positions that carry a label, as TRL does on a GPU.

TRL (1.16) computes the log-probabilities of SFT and GRPO with a fused LM head (`add_fused_lm_head` in
trl/trainer/utils.py). On devices with Triton it projects only the positions whose label is not -100; elsewhere it
projects every position through the whole vocabulary and masks the result afterwards, so that compiled backends
(Neuron) see the same tile shapes on every batch. On the CPU nothing is compiled, and a chat model's prompt is most
of a row (tic-tac-toe decisions: ~63 of 71 tokens), so nearly all of that work is thrown away. Measured on the chat
model, SFT steps of 16 rows x 71 tokens, 2 threads: 11.3 -> 8.0 s in float32, 9.5 -> 4.9 s in bf16 autocast, the
same loss (docs/experiments/chat-model.md#bf16-on-the-cpu-by-default-and-grpo-on-the-lines-that-beat-it).
"""

from __future__ import annotations

from typing import Any


def score_labelled_positions_only() -> bool:
    """Make TRL's fused LM head project only labelled positions on the CPU too; True once it does (idempotent),
    False where this TRL has no such switch (its own behaviour is kept)."""
    import trl.trainer.utils as trl_utils

    on_triton = getattr(trl_utils, "_use_triton", None)
    if on_triton is None:
        return False
    if getattr(on_triton, "labelled_only_on_cpu", False):
        return True

    def compact(device: Any) -> bool:
        # Only the choice of positions: the log-probability kernel keeps its own torch fallback on the CPU.
        return device.type == "cpu" or on_triton(device)

    compact.labelled_only_on_cpu = True  # type: ignore[attr-defined]
    trl_utils._use_triton = compact
    return True
