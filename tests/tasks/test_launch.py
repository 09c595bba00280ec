"""A training stage's launch on several processes, checked before anything starts: batches that split into whole
groups per process, launchers this machine can run (accelerate configs and vLLM's server mode need CUDA), one line
each naming the key and the fix; the launcher commands; the shipped accelerate configs load as accelerate reads them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from accelerate.commands.config.config_args import load_config_from_file
from accelerate.utils import DistributedType

from tasks.params import preflight
from tasks.params.launch_checks import ACCELERATE_CONFIGS, launch_problems
from tasks.params.load import PARAMS_FILE, load_params, read_params
from tasks.runtime.launch import launcher_command

from .conftest import REPO, smoke_params, write_params

CPU_ONLY = pytest.mark.skipif(torch.cuda.is_available(), reason="checks what a machine without CUDA refuses")


def _params(**sections: dict) -> object:
    raw = read_params(PARAMS_FILE, profile="smoke")
    for name, values in sections.items():
        raw[name] = {**raw[name], **values}
    return load_params(params=raw)


def test_one_process_needs_no_launch_and_two_split_the_smoke_batches():
    assert launch_problems(_params(), "grpo") == launch_problems(_params(), "sft") == []
    # 16 samples a step in groups of 4, micro-batches of 8: two processes play two whole groups each.
    assert launch_problems(_params(grpo={"processes": 2}), "grpo") == []
    assert launch_problems(_params(sft={"processes": 2}), "sft") == []


@pytest.mark.parametrize(
    ("grpo", "multiple"),
    [({"processes": 3}, 12), ({"processes": 2, "num_generations": 16}, 32)],
)
def test_a_batch_that_does_not_split_into_whole_groups_per_process_is_one_line_per_curriculum_stage(
    grpo, multiple
):
    found = launch_problems(_params(grpo=grpo), "grpo")
    assert [line.split(" ", 1)[0] for line in found] == [
        f"grpo.stages.{s}.batch_size" for s in ("wide", "strong", "polish")
    ]
    assert all(f"use a multiple of {multiple}" in line for line in found), found
    assert found[0] in preflight.problems(_params(grpo=grpo))  # the flow's preflight finds it too


@CPU_ONLY
def test_an_accelerate_config_and_vllm_server_mode_are_refused_without_cuda():
    config = f"{ACCELERATE_CONFIGS}/multi-gpu.yaml"
    [sft] = launch_problems(_params(sft={"accelerate_config": config}), "sft")
    assert (
        sft.startswith("sft.accelerate_config: accelerate's launcher starts one process")
        and "torchrun" in sft
    )
    [server] = launch_problems(_params(grpo={"processes": 2, "vllm_mode": "server"}), "grpo")
    assert server.startswith("grpo.vllm_mode: server needs CUDA") and "NCCL" in server


@CPU_ONLY
def test_the_stage_refuses_a_launch_it_cannot_run_before_it_starts_anything(tmp_path: Path):
    params = smoke_params(tmp_path)
    params["grpo"].update(processes=3, vllm_mode="server")
    path = write_params(tmp_path / "params.yaml", params)
    result = subprocess.run(
        [sys.executable, "-m", "tasks.grpo", "--params", str(path), "--no-mlflow"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 4 and all(line.startswith("grpo: error: grpo.") for line in lines), result.stderr
    assert not (tmp_path / "data/work").exists()


def test_the_launchers_start_the_stage_module_with_its_arguments():
    torchrun = launcher_command(_params(sft={"processes": 2}), "sft", ["--params", "p.yaml"])
    assert torchrun[1:] == [
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node=2",
        "-m",
        "tasks.sft",
        "--params",
        "p.yaml",
    ]
    config = f"{ACCELERATE_CONFIGS}/deepspeed-zero2.yaml"
    accelerate = launcher_command(_params(grpo={"processes": 4, "accelerate_config": config}), "grpo", [])
    assert accelerate[1:] == [
        "-m",
        "accelerate.commands.launch",
        "--config_file",
        config,
        "--num_processes",
        "4",
        "-m",
        "tasks.grpo",
    ]


@pytest.mark.parametrize(
    ("name", "kind", "machines"),
    [
        ("multi-gpu", DistributedType.MULTI_GPU, 1),
        ("deepspeed-zero2", DistributedType.DEEPSPEED, 1),
        ("multi-node", DistributedType.MULTI_GPU, 2),
    ],
)
def test_the_shipped_accelerate_configs_load_as_accelerate_reads_them(name, kind, machines):
    config = load_config_from_file(str(REPO / ACCELERATE_CONFIGS / f"{name}.yaml"))
    assert config.distributed_type == kind and config.num_machines == machines and not config.use_cpu
    if kind == DistributedType.DEEPSPEED:
        assert config.deepspeed_config["zero_stage"] == 2
