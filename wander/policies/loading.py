"""One way to name any policy: a scripted player, a local model, or an OpenAI-compatible URL."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from wander.core.policy import Policy

if TYPE_CHECKING:
    from wander.core.environment import Environment


def is_scripted_name(spec: str) -> bool:
    """Whether a policy spec names one of an environment's scripted players (a bare word such as `random`,
    `expert-0.25` or `teacher`) rather than a model folder, hub id or URL."""
    return "/" not in spec and ":" not in spec and not Path(spec).exists()


def make_policy(
    spec: str,
    *,
    seed: int = 0,
    temperature: float = 0.0,
    max_new_tokens: int = 64,
    model: str | None = None,
    api_key_env: str = "OPENAI_API_KEY",
    cache_dir: str | None = None,
    env: Environment | None = None,
) -> Policy:
    """A policy from a spec string; temperature 0 means greedy decoding.

    - a bare word: one of `env`'s scripted players (`env.scripted_policy`; any env: `expert[-P]`, its teacher at
      slip rate P, and `teacher`, the embedded teacher at the env's default rate; tic-tac-toe adds `random` and
      `minimax[-P]`),
    - `http://...` or `https://...`: an OpenAI-compatible endpoint (its base URL, e.g. ending in /v1); `model`
      None takes the endpoint's only model from its `/models`,
    - anything else: a local model folder or a hub id, loaded with transformers.
    """
    scripted = env.scripted_policy(spec, seed) if env is not None else None
    if scripted is not None:
        return scripted
    if env is None and is_scripted_name(spec):
        raise ValueError(
            f"policy {spec!r} names a scripted player, and scripted players belong to an environment: "
            "pass env= (or give a model folder, hub id or URL)"
        )
    if spec.startswith(("http://", "https://")):
        from wander.policies.openai_policy import OpenAIPolicy
        from wander.policies.openai_policy_config import OpenAIPolicyConfig

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
            f"policy {spec!r} is not a scripted player of {env.name if env is not None else 'the env'}, a URL, an "
            "existing model folder, or a hub id like org/name"
        )
    from wander.policies.transformers_policy import TransformersPolicy

    return TransformersPolicy.from_pretrained(
        spec,
        greedy=temperature == 0,
        temperature=temperature or 1.0,
        seed=seed,
        max_new_tokens=max_new_tokens,
    )
