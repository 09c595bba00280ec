"""A policy behind any OpenAI-compatible endpoint: concurrent, retried with backoff, seeded, disk-cached."""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import json
import logging
import os
import random
import tempfile
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import openai

from wander.core.logs import redact_url
from wander.core.policy import Conversation, Reply
from wander.policies.openai_policy_config import OpenAIPolicyConfig

logger = logging.getLogger(__name__)

T = TypeVar("T")
PLACEHOLDER_API_KEY = "EMPTY"  # what vLLM and other local servers accept when they check no key
RETRY_STATUSES = frozenset({408, 429})  # plus every 5xx


class PolicyRequestError(RuntimeError):
    """A chat completion request that failed for good: a non-retryable error, or retries exhausted."""

    def __init__(
        self, url: str, model: str | None, attempts: int, status: int | None, reason: str, what: str = ""
    ) -> None:
        self.url = url = redact_url(url)  # an error message is printed and logged: no credentials in it
        self.model = model
        self.attempts = attempts
        self.status = status
        self.reason = reason = redact_url(reason)
        kind = f"HTTP {status}" if status is not None else "connection error"
        what = what or f"chat completion request to {url} (model {model!r})"
        super().__init__(
            f"{what} failed after {attempts} attempt{'s' if attempts != 1 else ''}: {kind}: {reason}"
        )


@dataclass
class PolicyStats:
    """Counters of what a policy did; tests and logs read them."""

    requests: int = 0  # requests that went to the endpoint (cache misses)
    attempts: int = 0  # HTTP attempts, first tries and retries
    retries: int = 0
    cache_hits: int = 0


def api_key_from_env(name: str) -> str:
    """The API key held by the environment variable `name`, or the placeholder for local servers."""
    return (os.environ.get(name) if name else None) or PLACEHOLDER_API_KEY


def request_seed(base_seed: int, messages: Conversation, occurrence: int = 0) -> int:
    """Deterministic seed of one request, from the base seed, the conversation and its repeat index."""
    # The repeat index keeps identical conversations in one batch (a GRPO group, repeated openings)
    # from all getting the same sample and the same cache entry.
    text = f"{base_seed}:{occurrence}:{_canonical(messages)}"
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) & 0x7FFFFFFF


def _canonical(obj: object) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


class OpenAIPolicy:
    """Answers conversations through the Chat Completions protocol of any OpenAI-compatible endpoint."""

    def __init__(self, config: OpenAIPolicyConfig) -> None:
        self.config = config
        self.url = f"{config.base_url}/chat/completions"
        self.shown_url = redact_url(self.url)  # what logs and errors show
        self.model = config.model  # None until the endpoint's only model is known
        self.stats = PolicyStats()
        # Seeded so a rerun waits the same way; timing never changes the answers anyway.
        self._jitter = random.Random(config.seed)

    def __repr__(self) -> str:
        return f"OpenAIPolicy(url={self.shown_url!r}, model={self.model!r})"

    def resolve_model(self) -> str:
        """The model name requests carry: the configured one, or the endpoint's only model (asked once)."""
        if self.model is None:
            _blocking(lambda: self._with_client(self._resolve_model))
        return self.model

    async def _resolve_model(self, client: openai.AsyncOpenAI) -> None:
        if self.model is not None:
            return
        url = f"{self.config.base_url}/models"
        page = await self._retrying(lambda: client.models.list(), f"listing the models at {redact_url(url)}")
        names = [m.id for m in page.data]
        if len(names) != 1:
            served = ", ".join(repr(n) for n in names) or "none"
            raise PolicyRequestError(
                url,
                None,
                1,
                200,
                f"it serves {len(names)} models ({served}); name one (e.g. --api-model or teacher.model)",
                what=f"choosing the model at {redact_url(url)}",
            )
        self.model = names[0]
        logger.info("%s serves one model, %r: using it", redact_url(url), self.model)

    def _client(self) -> openai.AsyncOpenAI:
        cfg = self.config
        return openai.AsyncOpenAI(
            base_url=cfg.base_url,
            api_key=api_key_from_env(cfg.api_key_env),
            timeout=cfg.timeout,
            max_retries=0,  # retries are ours: backoff with jitter, and a clear error at the end
        )

    async def _with_client(self, work: Callable[[openai.AsyncOpenAI], Awaitable[T]]) -> T:
        async with self._client() as client:
            return await work(client)

    def __call__(self, conversations: list[Conversation]) -> list[Reply]:
        """Return one Reply per conversation, in order (blocking)."""
        return _blocking(lambda: self.agenerate(conversations))

    async def agenerate(self, conversations: list[Conversation]) -> list[Reply]:
        """Return one Reply per conversation, in order, with at most max_concurrency requests in flight."""
        semaphore = asyncio.Semaphore(self.config.max_concurrency)
        # One client per batch: its connection pool belongs to the loop that runs the batch.
        async with self._client() as client:
            await self._resolve_model(client)
            bodies = self.request_bodies(conversations)
            tasks = [asyncio.ensure_future(self._answer(client, semaphore, body)) for body in bodies]
            try:
                return list(await asyncio.gather(*tasks))
            except BaseException:
                # Do not leave siblings running against a client that is about to close.
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                raise

    def request_bodies(self, conversations: list[Conversation]) -> list[dict]:
        """The exact request body of each conversation, per-request seed included."""
        cfg = self.config
        seen: dict[str, int] = {}
        bodies = []
        for messages in conversations:
            key = _canonical(messages)
            occurrence = seen.get(key, 0)
            seen[key] = occurrence + 1
            body = {
                "model": self.model,
                "messages": list(messages),
                "temperature": cfg.temperature,
                "top_p": cfg.top_p,
                "seed": request_seed(cfg.seed, messages, occurrence),
            }
            if cfg.max_tokens is not None:
                body["max_tokens"] = cfg.max_tokens
            bodies.append(body)
        return bodies

    def cache_key(self, body: dict) -> str:
        """Hash of everything that defines a request: endpoint, model, messages, sampling params, seed."""
        return hashlib.sha256(_canonical({"url": self.url, **body}).encode()).hexdigest()

    async def _answer(self, client: openai.AsyncOpenAI, semaphore: asyncio.Semaphore, body: dict) -> Reply:
        key = self.cache_key(body) if self.config.cache_dir else None
        if key is not None and (reply := self._cache_get(key)) is not None:
            self.stats.cache_hits += 1
            return reply
        async with semaphore:
            self.stats.requests += 1
            reply = await self._request_with_retries(client, body)
        if key is not None:
            self._cache_put(key, body, reply)
        return reply

    async def _request_with_retries(self, client: openai.AsyncOpenAI, body: dict) -> Reply:
        attempt = 0

        async def once() -> Reply:
            nonlocal attempt
            attempt += 1
            return self._to_reply(await client.chat.completions.create(**body), body, attempt)

        return await self._retrying(once)

    async def _retrying(self, call: Callable[[], Awaitable[T]], what: str = "") -> T:
        """`await call()`, retried on 408/429/5xx and connection errors; other errors fail at once, clearly."""
        cfg = self.config
        attempts = cfg.max_retries + 1
        shown = what or f"{self.shown_url} (model {self.model!r})"
        for attempt in range(1, attempts + 1):
            self.stats.attempts += 1
            retry_after = None
            try:
                return await call()
            except openai.APIStatusError as e:
                status, reason = e.status_code, e.message
                if status not in RETRY_STATUSES and status < 500:  # 4xx: asking again cannot help
                    raise PolicyRequestError(self.url, self.model, attempt, status, reason, what) from e
                retry_after = _retry_after(e)
                error: Exception = e
            except openai.APIConnectionError as e:  # timeouts included
                status, error = None, e
                cause = e.__cause__
                reason = f"{e.message} ({type(cause).__name__}: {cause})" if cause else e.message
            except openai.APIError as e:  # a 200 whose body is not a chat completion
                raise PolicyRequestError(self.url, self.model, attempt, None, str(e), what) from e
            if attempt == attempts:
                raise PolicyRequestError(self.url, self.model, attempt, status, reason, what) from error
            delay = self._backoff(attempt, retry_after)
            self.stats.retries += 1
            logger.warning(
                "%s: attempt %d/%d failed (%s); retrying in %.2fs",
                shown,
                attempt,
                attempts,
                f"HTTP {status}" if status is not None else redact_url(reason),
                delay,
            )
            await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        """Full jitter: uniform in [0, min(max, base * 2^(attempt-1))], at least what the server asked."""
        cfg = self.config
        delay = self._jitter.uniform(0, min(cfg.backoff_max, cfg.backoff_base * 2 ** (attempt - 1)))
        if retry_after is not None:
            delay = max(delay, min(retry_after, cfg.backoff_max))
        return delay

    def _to_reply(self, response: object, body: dict, attempt: int) -> Reply:
        choices = getattr(response, "choices", None)
        if not choices:
            raise PolicyRequestError(self.url, self.model, attempt, 200, "response has no choices")
        choice = choices[0]
        usage = getattr(response, "usage", None)
        extra = {
            "finish_reason": choice.finish_reason,
            "model": getattr(response, "model", None),
            "seed": body["seed"],
            "usage": usage.model_dump(mode="json", exclude_none=True) if usage is not None else None,
        }
        return Reply(content=choice.message.content or "", extra=extra)

    def cache_path(self, key: str) -> Path:
        """Where the cache entry of `key` lives (sharded by the key's first two hex digits)."""
        return Path(self.config.cache_dir) / key[:2] / f"{key}.json"

    def _cache_get(self, key: str) -> Reply | None:
        path = self.cache_path(key)
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            return Reply(content=entry["content"], extra=entry.get("extra", {}))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as e:
            # A damaged entry costs one request, never the run.
            logger.warning("ignoring unreadable cache entry %s: %s", path, e)
            return None

    def _cache_put(self, key: str, body: dict, reply: Reply) -> None:
        path = self.cache_path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        entry = {"request": {"url": self.shown_url, **body}, "content": reply.content, "extra": reply.extra}
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(entry, f, ensure_ascii=False)
            os.replace(tmp, path)  # readers see the old state or the whole entry, never half of it
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def _blocking(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run the coroutine `make()` to its end, from sync code or from inside a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    # Called from inside a running loop (a notebook, an async server): asyncio.run would refuse,
    # so the coroutine gets its own loop in a worker thread.
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(make())).result()


def _retry_after(error: openai.APIStatusError) -> float | None:
    """Seconds the server asked us to wait (Retry-After header), if it said so in seconds."""
    try:
        return max(0.0, float(error.response.headers.get("retry-after", "")))
    except (TypeError, ValueError):
        return None
