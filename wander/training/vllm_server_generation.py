"""GRPO generation through a vLLM server on any machine, CPU included: TRL's `use_vllm` hooks, weights reloaded
from disk after every optimizer step.

TRL's server mode (`GRPOConfig(use_vllm=True, vllm_mode="server")` with `trl vllm-serve`) needs `vllm` importable
in the trainer's process and syncs weights over NCCL, which needs CUDA (TRL's `VLLMClient.init_communicator`
refuses any other device). Here the server is vLLM's own OpenAI-compatible one from its separate venv
(`wander.policies.vllm_server`), started with `VLLM_SERVER_DEV_MODE=1`, and TRL's generation object is swapped for
`ServerGeneration`, which TRL's GRPOTrainer calls exactly as it calls its own (`sync_weights()` whenever the step
changed, then `generate(...)`):

- `sync_weights`: the trainer's weights are written as safetensors to a folder and the server reloads them in
  place (`POST /collective_rpc {"method": "reload_weights"}`, 0.2 s for the scratch model), then its prefix cache
  is reset. vLLM 0.32's in-place reload refreshes tied input embeddings but not the output head that shares them,
  so the served model is untied (`untied_checkpoint`): the same numbers, in two tensors that both reload.
- `generate`: token-id prompts to `/v1/completions`, one request per prompt with its own seed (identical prompts
  of a GRPO group still sample independently, and reruns sample the same), returning the exact completion ids and
  the sampled tokens' logprobs (`--logprobs-mode processed_logprobs`, as TRL's importance-sampling correction
  expects).

```python
with training_server(path, work_dir) as server:  # an untied copy of `path`, served with `sync_config()`
    trainer = use_vllm_server(env >> trainer_spec(GRPOTrainer, model=path, args=args), server)
    trainer.train()
```
"""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import httpx

from wander.policies.vllm_server import VLLMServer
from wander.policies.vllm_server_config import VLLMServerConfig

# The server settings weight reloading needs: the dev-mode endpoints and logprobs of the processed distribution.
SYNC_ENV = {"VLLM_SERVER_DEV_MODE": "1"}
SYNC_ARGS = ["--logprobs-mode", "processed_logprobs"]


def untied_checkpoint(model_dir: str | Path, out_dir: str | Path) -> Path:
    """A copy of a checkpoint with its tied output head written out as a tensor of its own (same values).

    vLLM 0.32's `reload_weights` refreshes a tied model's input embeddings but keeps its old output head; an
    untied copy reloads both. Other checkpoints are copied unchanged.
    """
    from safetensors.torch import load_file, save_file

    model_dir, out_dir = Path(model_dir), Path(out_dir)
    shutil.copytree(model_dir, out_dir, dirs_exist_ok=True)
    config = json.loads((out_dir / "config.json").read_text())
    if not config.get("tie_word_embeddings", False):
        return out_dir
    weights = out_dir / "model.safetensors"
    if not weights.exists():
        raise ValueError(f"{model_dir} is tied but has no single model.safetensors to untie")
    tensors = load_file(weights)
    embed = next(k for k in tensors if k.endswith("embed_tokens.weight"))
    tensors["lm_head.weight"] = tensors[embed].clone()
    save_file(tensors, weights, metadata={"format": "pt"})
    config["tie_word_embeddings"] = False
    (out_dir / "config.json").write_text(json.dumps(config, indent=2))
    return out_dir


def untied_state_dict(model: Any) -> dict:
    """The model's weights for the server: contiguous CPU tensors, the tied head as a tensor of its own."""
    state = {k: v.detach().to("cpu").contiguous() for k, v in model.state_dict().items()}
    embed = next((k for k in state if k.endswith("embed_tokens.weight")), None)
    if embed is not None and getattr(model.config, "tie_word_embeddings", False):
        state["lm_head.weight"] = state[embed].clone()
    return state


class ServerGeneration:
    """What TRL's GRPOTrainer calls for generation when `use_vllm` is on, served by a running `VLLMServer`."""

    def __init__(self, trainer: Any, server: VLLMServer, sync_dir: str | Path | None = None) -> None:
        self.trainer = trainer
        self.server = server
        self.sync_dir = Path(sync_dir or tempfile.mkdtemp(prefix="vllm-sync-"))
        self.client = httpx.Client(timeout=httpx.Timeout(300.0))
        self.calls = 0
        self.syncs = 0

    def _post(self, path: str, body: dict | None = None) -> Any:
        response = self.client.post(f"{self.server.root_url}{path}", json=body or {})
        if response.status_code != 200:
            raise RuntimeError(f"vLLM {path} answered {response.status_code}: {response.text[:500]}")
        return response.json() if response.content else None

    def sync_weights(self) -> None:
        """Write the trainer's weights and have the server reload them in place."""
        from safetensors.torch import save_file

        model = self.trainer.accelerator.unwrap_model(self.trainer.model)
        self.sync_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.sync_dir / "model.safetensors.tmp"
        save_file(untied_state_dict(model), tmp, metadata={"format": "pt"})
        tmp.replace(self.sync_dir / "model.safetensors")
        kwargs = {"weights_path": str(self.sync_dir)}
        self._post("/collective_rpc", {"method": "reload_weights", "kwargs": kwargs})
        self._post("/reset_prefix_cache")
        self.syncs += 1

    def generate(
        self, prompts: list[list[int]], images: Any = None, num_generations: int = 1, profiler: Any = None
    ) -> tuple[list[list[int]], list[list[int]], list[list[list[float]]], list[list[list[int]]]]:
        """`num_generations` samples of each token prompt: (prompt ids, completion ids, [[sampled logprob]] per
        token, [[sampled token id]] per token), completions prompt-major like TRL's own."""
        if images is not None and any(i is not None for i in images):
            raise NotImplementedError("images are not supported by the vLLM server generation")
        t = self.trainer
        call, self.calls = self.calls, self.calls + 1
        rng = random.Random(f"{t.args.seed}:{t.state.global_step}:{call}")
        jobs = [(list(p), rng.getrandbits(31)) for p in prompts for _ in range(num_generations)]
        sampling = {
            "temperature": t.temperature,
            "top_p": t.top_p,
            "max_tokens": t.max_completion_length,
            "logprobs": 0,
            "return_token_ids": True,
            "skip_special_tokens": False,
        }
        if getattr(t, "top_k", None):
            sampling["top_k"] = t.top_k
        if getattr(t, "min_p", None):
            sampling["min_p"] = t.min_p
        if getattr(t, "repetition_penalty", 1.0) != 1.0:
            sampling["repetition_penalty"] = t.repetition_penalty

        def one(job: tuple[list[int], int]) -> tuple[list[int], list[float]]:
            prompt, seed = job
            body = {"model": self.server.name, "prompt": prompt, "seed": seed, **sampling}
            choice = self._post("/v1/completions", body)["choices"][0]
            return list(choice["token_ids"]), [float(x) for x in choice["logprobs"]["token_logprobs"]]

        with profiler or nullcontext(), ThreadPoolExecutor(max_workers=min(64, len(jobs) or 1)) as pool:
            results = list(pool.map(one, jobs))
        completion_ids = [ids for ids, _ in results]
        logprobs = [[[lp] for lp in lps] for _, lps in results]
        token_ids = [[[i] for i in ids] for ids in completion_ids]
        prompt_ids = [prompt for prompt, _ in jobs]
        return prompt_ids, completion_ids, logprobs, token_ids


def use_vllm_server(trainer: Any, server: VLLMServer, sync_dir: str | Path | None = None) -> Any:
    """Make a GRPOTrainer built without vLLM generate through `server`, syncing weights at every new step.

    The server must serve the trainer's start weights (untied, `untied_checkpoint`), started with `sync_config()`. TRL's importance-sampling correction then uses the
    server's logprobs, as with its own vLLM modes.
    """
    if trainer.accelerator.num_processes != 1:
        raise NotImplementedError("vLLM server generation with weight reloading runs in one training process")
    trainer.use_vllm = True
    trainer.vllm_mode = "server"
    trainer.vllm_generation = ServerGeneration(trainer, server, sync_dir)
    trainer._last_loaded_step = -1  # TRL syncs before the first generation, as with its own backends
    return trainer


def sync_config(config: VLLMServerConfig | None = None) -> VLLMServerConfig:
    """`config` (default: the defaults) with the environment and arguments weight reloading needs."""
    config = config or VLLMServerConfig()
    env_vars = {**config.env_vars, **SYNC_ENV}
    return dataclasses.replace(config, env_vars=env_vars, extra_args=[*config.extra_args, *SYNC_ARGS])


def training_server(
    model_dir: str | Path,
    work_dir: str | Path,
    config: VLLMServerConfig | None = None,
    name: str | None = None,
) -> VLLMServer:
    """A (not yet started) server of `model_dir`'s untied copy in `work_dir`, set up for weight reloading: start it
    with `with`, then `use_vllm_server(trainer, server)`."""
    served = untied_checkpoint(model_dir, Path(work_dir) / "served")
    return VLLMServer(served, sync_config(config), name=name or Path(model_dir).name)
