"""bf16 where the hardware computes it: the CPU's flags read from /proc/cpuinfo, null keys resolved by them."""

from __future__ import annotations

import pytest
import torch

from wander.policies import precision


@pytest.mark.parametrize(
    ("flags", "found"),
    [
        ("fpu sse avx2 avx512f avx512_bf16 avx512_vnni", ("avx512_bf16",)),
        ("fpu avx512f amx_bf16 amx_tile avx512_bf16", ("avx512_bf16", "amx_bf16")),
        ("fpu sse avx2 avx512f", ()),
    ],
)
def test_the_cpu_s_bf16_instructions_are_read_from_its_flags(tmp_path, flags, found):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nmodel name\t: some cpu\nflags\t\t: {flags}\n\nprocessor\t: 1\n")
    assert precision.cpu_bf16_flags(str(cpuinfo)) == found
    assert precision.cpu_bf16_flags(str(tmp_path / "missing")) == ()


def test_a_null_key_follows_the_hardware_and_true_or_false_force_it(monkeypatch):
    for flags, detected in (((), False), (("avx512_bf16",), True)):
        monkeypatch.setattr(precision, "cpu_bf16_flags", lambda flags=flags: flags)
        assert precision.resolve_bf16(None, "cpu") is detected
        assert precision.resolve_bf16(True, "cpu") is True and precision.resolve_bf16(False, "cpu") is False
        line = precision.precision_line({"sft": None, "grpo": False, "evaluate": True})
        assert line.startswith(f"precision: sft {'bf16' if detected else 'fp32'}, grpo fp32, evaluate bf16")
        assert ("this machine computes bf16 (CPU avx512_bf16)" in line) is detected


def test_autocast_is_bf16_only_when_enabled():
    x = torch.ones(2, 2)
    for enabled, dtype in ((True, torch.bfloat16), (False, torch.float32)):
        with precision.autocast(enabled, torch.device("cpu")):
            assert (x @ x).dtype == dtype
