"""One way to name any policy: a scripted player, a local model, or a URL whose scheme names a policy kind.

Policy kinds are found by name as environments are (`wander.core.registry.Registry`): `POLICY_KINDS` maps a spec's
URL scheme (`http`, `https`) to the factory that builds it; a new kind is one `POLICY_KINDS.register` call beside its
policy, not a new branch here. A spec with no registered scheme is a local model folder or a hub id."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from wander.core.policy import Policy
from wander.core.registry import Registry

if TYPE_CHECKING:
    from wander.core.environment import Environment


@dataclass(frozen=True)
class PolicyOptions:
    """What `make_policy` passes every policy kind besides the spec: sampling, endpoint and cache settings."""

    seed: int = 0
    temperature: float = 0.0
    """0 means greedy decoding."""
    max_new_tokens: int = 64
    model: str | None = None
    """The model name an endpoint serves; None takes its only model."""
    api_key_env: str = "OPENAI_API_KEY"
    cache_dir: str | None = None
    bf16: bool | None = False
    """A local model's bf16 autocast; None = where the hardware computes bf16 (wander/policies/precision.py)."""


PolicyFactory = Callable[[str, PolicyOptions], Policy]
"""What builds a policy of one kind: `factory(spec, options)`, the whole spec passed."""
POLICY_KINDS: Registry[PolicyFactory] = Registry("policy kind")
"""Policy kinds by the URL scheme of their spec (`scheme://...`)."""


def is_scripted_name(spec: str) -> bool:
    """Whether a policy spec names one of an environment's scripted players (a bare word such as `random`,
    `expert-0.25` or `teacher`) rather than a model folder, hub id or URL."""
    return "/" not in spec and ":" not in spec and not Path(spec).exists()


def policy_kind(spec: str) -> PolicyFactory | None:
    """The factory of the policy kind `spec`'s URL scheme names (`http://...`), or None for any other spec."""
    scheme, separator, _ = spec.partition("://")
    return POLICY_KINDS.get(scheme) if separator else None


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
    bf16: bool | None = False,
) -> Policy:
    """A policy from a spec string; temperature 0 means greedy decoding.

    - a bare word: one of `env`'s scripted players (`env.scripted_policy`; any env: `expert[-P]`, its teacher at
      slip rate P, and `teacher`, the embedded teacher at the env's default rate; tic-tac-toe adds `random` and
      `minimax[-P]`),
    - `scheme://...` of a registered policy kind (`POLICY_KINDS`): `http://...` or `https://...`, an
      OpenAI-compatible endpoint (its base URL, e.g. ending in /v1); `model` None takes the endpoint's only model
      from its `/models`,
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
    options = PolicyOptions(
        seed=seed,
        temperature=temperature,
        max_new_tokens=max_new_tokens,
        model=model,
        api_key_env=api_key_env,
        cache_dir=cache_dir,
        bf16=bf16,
    )
    factory = policy_kind(spec)
    if factory is not None:
        return factory(spec, options)
    if not Path(spec).exists() and spec.count("/") != 1:
        raise ValueError(
            f"policy {spec!r} is not a scripted player of {env.name if env is not None else 'the env'}, a URL, an "
            "existing model folder, or a hub id like org/name"
        )
    return local_model_policy(spec, options)


def openai_policy(spec: str, options: PolicyOptions) -> Policy:
    """`http(s)://.../v1`: an OpenAI-compatible endpoint (wander.policies.openai_policy, imported here)."""
    from wander.policies.openai_policy import OpenAIPolicy
    from wander.policies.openai_policy_config import OpenAIPolicyConfig

    config = OpenAIPolicyConfig(
        base_url=spec,
        model=options.model,
        api_key_env=options.api_key_env,
        temperature=options.temperature,
        max_tokens=options.max_new_tokens,
        seed=options.seed,
        cache_dir=options.cache_dir,
    )
    return OpenAIPolicy(config)


def local_model_policy(spec: str, options: PolicyOptions) -> Policy:
    """A local model folder or a hub id, loaded with transformers (wander.policies.transformers_policy)."""
    from wander.policies.transformers_policy import TransformersPolicy

    return TransformersPolicy.from_pretrained(
        spec,
        greedy=options.temperature == 0,
        temperature=options.temperature or 1.0,
        seed=options.seed,
        max_new_tokens=options.max_new_tokens,
        bf16=options.bf16,
    )


POLICY_KINDS.register("http", openai_policy)
POLICY_KINDS.register("https", openai_policy)
