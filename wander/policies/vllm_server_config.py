"""Configuration of a vLLM server the project starts for a checkpoint (`wander.policies.vllm_server`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

# `make vllm` builds this venv next to the project's own: vLLM pins a transformers older than ours.
DEFAULT_VENV = Path(__file__).resolve().parents[2] / ".venv-vllm"
PYTHON_VARIABLE = "WANDER_VLLM_PYTHON"


@dataclass
class VLLMServerConfig:
    r"""
    How to start vLLM's OpenAI-compatible server (`python -m vllm.entrypoints.openai.api_server`) for a model.

    Parameters:
        python (`str` or `None`, *optional*, defaults to `None`):
            Python of the venv vLLM is installed in. `None`: the variable `WANDER_VLLM_PYTHON` if set, else
            `.venv-vllm/bin/python` of this repository (`make vllm` creates it: the CPU build here, the CUDA build
            on a machine with a GPU).
        host (`str`, *optional*, defaults to `"127.0.0.1"`):
            Interface the server binds; loopback unless a remote client needs it.
        port (`int`, *optional*, defaults to `0`):
            Port of the server; 0 picks a free one.
        dtype (`str`, *optional*, defaults to `"float32"`):
            vLLM's `--dtype`. `float32` computes like the transformers policy, so greedy games match it; `auto`
            would run a float32 checkpoint in 16 bits.
        max_model_len (`int` or `None`, *optional*, defaults to `2048`):
            Longest prompt plus reply in tokens (`--max-model-len`); `None` takes the model's own context.
        kv_cache_gb (`float`, *optional*, defaults to `1.0`):
            CPU build: memory for the KV cache in GiB (`VLLM_CPU_KVCACHE_SPACE`); the GPU build ignores it and
            sizes its cache with `--gpu-memory-utilization` (put it in `extra_args`).
        seed (`int`, *optional*, defaults to `0`):
            vLLM's `--seed` (sampling without a request seed).
        enforce_eager (`bool`, *optional*, defaults to `True`):
            vLLM's `--enforce-eager`: no torch.compile warm-up. On two CPU cores the server is up in ~75 s instead of
            ~230 s; on a GPU, `False` gives CUDA graphs (faster decoding of large models).
        env_vars (`dict[str, str]`, *optional*, defaults to `{}`):
            More environment variables of the server, e.g. `{"VLLM_SERVER_DEV_MODE": "1"}` for the endpoints that
            reload weights (GRPO through vLLM, wander/training/vllm_server_generation.py).
        startup_timeout (`float`, *optional*, defaults to `600.0`):
            Seconds to wait for `/health` to answer; vLLM's CPU build takes 40-80 s on two cores.
        extra_args (`list[str]`, *optional*, defaults to `[]`):
            More command-line arguments of vLLM's server, e.g. `["--enforce-eager"]` or
            `["--gpu-memory-utilization", "0.3"]`.
    """

    python: str | None = None
    host: str = "127.0.0.1"
    port: int = 0
    dtype: str = "float32"
    max_model_len: int | None = 2048
    kv_cache_gb: float = 1.0
    seed: int = 0
    enforce_eager: bool = True
    env_vars: dict[str, str] = field(default_factory=dict)
    startup_timeout: float = 600.0
    extra_args: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be 0 (a free one) or a port number, got {self.port}")
        if self.max_model_len is not None and self.max_model_len < 1:
            raise ValueError(f"max_model_len must be >= 1 or None, got {self.max_model_len}")
        if self.kv_cache_gb <= 0:
            raise ValueError(f"kv_cache_gb must be > 0, got {self.kv_cache_gb}")
        if self.startup_timeout <= 0:
            raise ValueError(f"startup_timeout must be > 0 seconds, got {self.startup_timeout}")

    def python_path(self) -> Path:
        """The vLLM venv's python; a clear error when it is not there."""
        chosen = self.python or os.environ.get(PYTHON_VARIABLE)
        path = Path(chosen) if chosen else DEFAULT_VENV / "bin" / "python"
        if not path.exists():
            raise FileNotFoundError(
                f"no vLLM python at {path}: run `make vllm` (it creates {DEFAULT_VENV.name}/ with vLLM in a venv of "
                f"its own), or set {PYTHON_VARIABLE} / `python` to the python of a venv where vLLM is installed"
            )
        return path
