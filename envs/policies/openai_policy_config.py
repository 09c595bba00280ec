"""Configuration of the OpenAI-compatible policy (a teacher API, OpenAI, `vllm serve`, the embedded one)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class OpenAIPolicyConfig:
    r"""
    Configuration class for [`OpenAIPolicy`], a policy that answers through any endpoint speaking the
    OpenAI Chat Completions protocol.

    Parameters:
        base_url (`str`, *optional*, defaults to `"http://127.0.0.1:8000/v1"`):
            Base URL of the endpoint, including the `/v1` suffix.
        model (`str`, *optional*, defaults to `"teacher"`):
            Model name sent with every request.
        api_key_env (`str`, *optional*, defaults to `"OPENAI_API_KEY"`):
            Name of the environment variable that holds the API key. The key itself never appears in
            the config, params or logs. When the variable is unset, the placeholder key `"EMPTY"` is sent,
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
    model: str = "teacher"
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
            raise ValueError(f"base_url must start with http:// or https://, got {self.base_url!r}")
        if not self.model:
            raise ValueError("model must be a non-empty string")
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
