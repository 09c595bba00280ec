"""Configuration of the OpenAI-compatible policy (a teacher API, OpenAI, `vllm serve`, the embedded one)."""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

from wander.core.logs import redact_url

_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEY_PREFIXES = ("sk-", "sk_", "pk-", "rk-", "hf_", "ghp_", "gho_", "github_pat_", "xoxb-", "AKIA")  # fmt: skip


def _entropy_bits(text: str) -> float:
    """Shannon entropy of the characters of `text`, in bits per character."""
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def key_like_reason(value: str) -> str | None:
    """Why `value` looks like an API key rather than the name of an environment variable (None when it does not)."""
    if value.startswith(_KEY_PREFIXES):
        return f"it starts with {next(p for p in _KEY_PREFIXES if value.startswith(p))!r} like an API key"
    if not _VARIABLE_NAME.fullmatch(value):
        return "it is not a variable name (letters, digits and '_', not starting with a digit)"
    classes = sum(any(test(c) for c in value) for test in (str.islower, str.isupper, str.isdigit))
    if len(value) >= 24 and classes >= 3 and _entropy_bits(value) > 3.5:
        return f"it is a long random-looking string ({len(value)} characters)"
    return None


@dataclass
class OpenAIPolicyConfig:
    r"""
    Configuration class for [`OpenAIPolicy`], a policy that answers through any endpoint speaking the
    OpenAI Chat Completions protocol.

    Parameters:
        base_url (`str`, *optional*, defaults to `"http://127.0.0.1:8000/v1"`):
            Base URL of the endpoint, including the `/v1` suffix.
        model (`str` or `None`, *optional*, defaults to `None`):
            Model name sent with every request. `None` asks the endpoint's `/models` on first use and takes the
            model it serves (an error names them when it serves several).
        api_key_env (`str`, *optional*, defaults to `"OPENAI_API_KEY"`):
            Name of the environment variable that holds the API key. The key itself never appears in
            the config, params or logs; a value that looks like a key (`sk-...`, a long random string) is refused. When the variable is unset, the placeholder key `"EMPTY"` is sent,
            which is what local servers expect.
        temperature (`float`, *optional*, defaults to `1.0`):
            Sampling temperature.
        top_p (`float`, *optional*, defaults to `1.0`):
            Nucleus sampling probability mass.
        max_tokens (`int` or `None`, *optional*, defaults to `512`):
            Maximum number of completion tokens per reply. `None` leaves the limit to the server.
        seed (`int`, *optional*, defaults to `0`):
            Base seed. Each request's seed is derived from it and the conversation, so reruns send identical
            requests; it also seeds the jitter of the retry backoff.
        max_concurrency (`int`, *optional*, defaults to `8`):
            Maximum number of requests in flight at once within one batch.
        max_retries (`int`, *optional*, defaults to `5`):
            Retries after the first attempt on 408, 429, 5xx, timeouts and dropped connections. Other 4xx
            errors are never retried.
        backoff_base (`float`, *optional*, defaults to `0.5`):
            Backoff in seconds before the first retry; it doubles at every retry (full jitter).
        backoff_max (`float`, *optional*, defaults to `30.0`):
            Upper bound in seconds of a single backoff.
        timeout (`float`, *optional*, defaults to `60.0`):
            Timeout in seconds of one attempt (connect, read, write).
        cache_dir (`str` or `None`, *optional*, defaults to `None`):
            Directory of the disk cache of replies, keyed by a hash of the full request. `None` disables it.
    """

    base_url: str = "http://127.0.0.1:8000/v1"
    model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int | None = 512
    seed: int = 0
    max_concurrency: int = 8
    max_retries: int = 5
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    timeout: float = 60.0
    cache_dir: str | None = None

    def __post_init__(self) -> None:
        # Fail at construction, not on the thousandth request of a synthesis run.
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(
                f"base_url must start with http:// or https://, got {redact_url(self.base_url)!r}"
            )
        if self.model is not None and not self.model:
            raise ValueError("model must be a non-empty string, or None for the endpoint's only model")
        reason = key_like_reason(self.api_key_env) if self.api_key_env else None
        if reason is not None:
            # The value itself is never repeated: it may be a real key.
            raise ValueError(
                f"api_key_env must be the NAME of the environment variable that holds the key (e.g. "
                f"OPENAI_API_KEY), not the key itself; the value given looks like a key: {reason}. Put the key "
                "in an environment variable and name that variable here"
            )
        if self.max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {self.max_concurrency}")
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.backoff_base < 0 or self.backoff_max < 0:
            raise ValueError("backoff_base and backoff_max must be >= 0")
        if self.timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {self.timeout}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1 or None, got {self.max_tokens}")
        self.base_url = self.base_url.rstrip("/")
