"""The chat-model bench refuses bad sizes before any work and reads vLLM's engine binding from its log.

The measurement itself (minutes: a 135M model converted, two vLLM servers, SFT and GRPO steps) is run by hand with
`python -m bench.run bench.chat_model_speed`, on a quiet machine.
"""

from __future__ import annotations

import re

import pytest

from bench import chat_model_speed
from bench.chat_model_speed import engine_cores


@pytest.mark.parametrize(
    ("sizes", "message"),
    [
        ({"groups": 6}, "must divide by the env's 4 difficulty strata"),
        ({"group_size": 1}, "group_size must be at least 2"),
        ({"sft_rows": 20}, "raise sft_rows"),
        ({"vllm_binds": ("auto", "half")}, "unknown binding(s) ['half']"),
        ({"batch": 0}, "at least 1"),
    ],
)
def test_bad_sizes_fail_before_the_model_is_converted(sizes: dict, message: str, monkeypatch) -> None:
    def converted(folder: object) -> str:
        raise AssertionError("the model was converted (~30 s) before the sizes were checked")

    monkeypatch.setattr(chat_model_speed, "convert_model", converted)
    with pytest.raises(ValueError, match=re.escape(message)):
        chat_model_speed.run(**sizes)


def test_engine_cores_are_read_from_the_servers_log(tmp_path) -> None:
    log = tmp_path / "vllm.log"
    log.write_text(
        "INFO OpenMP thread binding info: \n"
        "\tVLLM_CPU_OMP_THREADS_BIND='0,1', auto_setup=False, skip_setup=False\n"
        "\tlocal_world_size=1, reserve_cpu_num=1\n"
        "\tlocal_rank=0, core ids=[0, 1]\n"
        "\treserved_cpus=[]\n"
    )
    assert engine_cores(log) == [0, 1]
    log.write_text("INFO vLLM started\n")
    assert engine_cores(log) is None
