"""One way to name any policy: a scripted player, a local model, or an OpenAI-compatible URL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from envs.policies.base import Policy

SCRIPTED = ("random", "minimax", "expert", "teacher")


def make_policy(
    spec: str,
    *,
    seed: int = 0,
    temperature: float = 0.0,
    max_new_tokens: int = 64,
    model: str | None = None,
    api_key_env: str = "OPENAI_API_KEY",
    cache_dir: str | None = None,
    env: Any = None,
) -> Policy:
    """A policy from a spec string; temperature 0 means greedy decoding.

    - `random`, `minimax[-P]`, `expert[-P]`: scripted tic-tac-toe players (P: random-move probability),
    - `http://...` or `https://...`: an OpenAI-compatible endpoint (its base URL, e.g. ending in /v1); `model`
      None takes the endpoint's only model from its `/models`,
    - anything else: a local model folder or a hub id, loaded with transformers.

    With `env`, its own scripted players (`env.scripted_policy`) come first: `expert-P` is that env's teacher at
    slip rate P, `teacher` the embedded teacher at the env's default rate.
    """
    scripted = env.scripted_policy(spec, seed) if env is not None else None
    if scripted is not None:
        return scripted
    if spec == "teacher":
        raise ValueError("policy 'teacher' is an environment's embedded teacher: give make_policy the env")
    if env is None and spec.split("-")[0] in SCRIPTED:
        from envs.tictactoe.players import scripted_player

        return scripted_player(spec, seed=seed)
    if spec.startswith(("http://", "https://")):
        from envs.policies.openai_policy import OpenAIPolicy
        from envs.policies.openai_policy_config import OpenAIPolicyConfig

        config = OpenAIPolicyConfig(
            base_url=spec,
            model=model,
            api_key_env=api_key_env,
            temperature=temperature,
            max_tokens=max_new_tokens,
            seed=seed,
            cache_dir=cache_dir,
        )
        return OpenAIPolicy(config)
    if not Path(spec).exists() and spec.count("/") != 1:
        raise ValueError(
            f"policy {spec!r} is not a scripted player ({', '.join(SCRIPTED)}), a URL, an existing model "
            "folder, or a hub id like org/name"
        )
    from envs.policies.transformers_policy import TransformersPolicy

    return TransformersPolicy.from_pretrained(
        spec,
        greedy=temperature == 0,
        temperature=temperature or 1.0,
        seed=seed,
        max_new_tokens=max_new_tokens,
    )
