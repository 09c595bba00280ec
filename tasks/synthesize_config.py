"""Settings of the synthesize stage: the teacher plays episodes through the OpenAI protocol."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from envs.tictactoe.teacher import TEACHER_MODEL, TEACHER_SKILL


@dataclass
class SynthesizeConfig:
    r"""
    Configuration for [`tasks.synthesize.run`]: a teacher plays the episodes of one split through any endpoint
    speaking the OpenAI Chat Completions protocol; every finished batch is journaled so a killed run resumes.

    Parameters:
        > Parameters that control what is played

        split (`str`, *optional*, defaults to `"train"`):
            Split of `specs_dir` whose episodes the teacher plays.
        num_episodes (`int` or `None`, *optional*, defaults to `None`):
            Play only the first N specs of the split (strata are round-robin, so any prefix is balanced); `None`
            plays them all.
        env (`dict[str, Any]`, *optional*, defaults to the `env` section):
            The environment the games are played in (rendering, turns, ...).

        > Parameters that control the teacher

        teacher_url (`str` or `None`, *optional*, defaults to `None`):
            Base URL (ending in `/v1`) of an OpenAI-compatible endpoint: OpenAI, `vllm serve`, any teacher API.
            `None` starts the embedded teacher (a calibrated expert behind the same protocol) on a free loopback
            port for the duration of the stage.
        teacher_model (`str`, *optional*, defaults to `"tictactoe-teacher"`):
            Model name sent with every request (and served by the embedded teacher).
        teacher_skill (`float`, *optional*, defaults to `0.5`):
            Embedded teacher only: probability of a strategic slip in a quiet position (it never misses an
            immediate win or block). 0.5 is calibrated like the case study's gpt-5-mini teacher.
        api_key_env (`str`, *optional*, defaults to `"OPENAI_API_KEY"`):
            Name of the environment variable holding the endpoint's API key; the key itself never appears in
            params, logs or MLflow. Unset means the placeholder key local servers accept.
        temperature (`float`, *optional*, defaults to `1.0`):
            Sampling temperature of the teacher.
        max_tokens (`int` or `None`, *optional*, defaults to `512`):
            Longest teacher reply per turn; `None` leaves it to the server.
        seed (`int`, *optional*, defaults to `0`):
            Seed of the teacher: each batch's base seed derives from it and the batch's index, each request's
            from that and the conversation (reruns send identical requests); also seeds the retry jitter.

        > Parameters that control throughput and failures

        batch_size (`int`, *optional*, defaults to `64`):
            Episodes played together; every turn of a batch is one round of concurrent requests, and each finished
            batch is appended to the journal (the unit of work a kill can lose). Batches are fixed slices of the
            spec list, so the games depend on it: keep it when resuming to get exactly an uninterrupted run's data.
        max_concurrency (`int`, *optional*, defaults to `16`):
            Requests in flight at once.
        requests_per_second (`float` or `None`, *optional*, defaults to `None`):
            Average request rate limit (an API's quota); `None` for no limit.
        max_retries (`int`, *optional*, defaults to `5`):
            Retries of a request on 408, 429, 5xx, timeouts and dropped connections (exponential backoff with
            jitter, honouring Retry-After); other errors fail the stage at once.
        backoff_base (`float`, *optional*, defaults to `0.5`):
            Seconds before the first retry; doubles at every retry.
        backoff_max (`float`, *optional*, defaults to `30.0`):
            Longest single backoff in seconds.
        timeout (`float`, *optional*, defaults to `60.0`):
            Seconds per request attempt.
        cache_dir (`str` or `None`, *optional*, defaults to `None`):
            Disk cache of teacher replies keyed by the full request (worth it for a paid API); `None` disables it.

        > Parameters that control the outputs

        specs_dir (`str`, *optional*, defaults to `layout.datasets`):
            Folder of the episode-spec splits written by generate.
        output_dir (`str`, *optional*, defaults to `layout.episodes`):
            Folder of `episodes.jsonl` (one finished episode per line, in spec order), written atomically at the
            end.
        work_dir (`str`, *optional*, defaults to `layout.work`):
            Folder of the journal (`synthesize/<fingerprint>.jsonl`), kept across runs and never a DVC output so a
            rerun after a kill resumes from it.
        metrics_dir (`str`, *optional*, defaults to `layout.metrics`):
            Folder of the stage's metrics file, `synthesize.json`.
    """

    split: str = field(default="train", metadata={"help": "Split whose episodes the teacher plays."})
    num_episodes: int | None = field(
        default=None, metadata={"help": "First N specs of the split; None = all."}
    )
    env: dict[str, Any] = field(
        default_factory=lambda: {"name": "tictactoe"},
        metadata={"help": "Environment name and settings.", "from": "env"},
    )
    teacher_url: str | None = field(
        default=None, metadata={"help": "OpenAI-compatible base URL; None = the embedded teacher."}
    )
    teacher_model: str = field(
        default=TEACHER_MODEL, metadata={"help": "Model name sent with every request."}
    )
    teacher_skill: float = field(
        default=TEACHER_SKILL, metadata={"help": "Embedded teacher's slip probability in quiet positions."}
    )
    api_key_env: str = field(
        default="OPENAI_API_KEY", metadata={"help": "Name of the env var holding the API key."}
    )
    temperature: float = field(default=1.0, metadata={"help": "Teacher sampling temperature."})
    max_tokens: int | None = field(default=512, metadata={"help": "Longest teacher reply per turn."})
    seed: int = field(default=0, metadata={"help": "Base seed of requests and retry jitter."})
    batch_size: int = field(default=64, metadata={"help": "Episodes played together; the journal's unit."})
    max_concurrency: int = field(default=16, metadata={"help": "Requests in flight at once."})
    requests_per_second: float | None = field(default=None, metadata={"help": "Average request rate limit."})
    max_retries: int = field(default=5, metadata={"help": "Retries on 408, 429, 5xx and connection errors."})
    backoff_base: float = field(default=0.5, metadata={"help": "Seconds before the first retry."})
    backoff_max: float = field(default=30.0, metadata={"help": "Longest single backoff in seconds."})
    timeout: float = field(default=60.0, metadata={"help": "Seconds per request attempt."})
    cache_dir: str | None = field(default=None, metadata={"help": "Disk cache of teacher replies."})
    specs_dir: str = field(
        default="data/datasets", metadata={"help": "Episode-spec splits.", "from": "layout.datasets"}
    )
    output_dir: str = field(
        default="data/synth", metadata={"help": "Folder of episodes.jsonl.", "from": "layout.episodes"}
    )
    work_dir: str = field(
        default="data/work", metadata={"help": "Folder of the journal.", "from": "layout.work"}
    )
    metrics_dir: str = field(
        default="data/metrics", metadata={"help": "Folder of synthesize.json.", "from": "layout.metrics"}
    )

    def __post_init__(self) -> None:
        if self.num_episodes is not None and self.num_episodes < 1:
            raise ValueError(f"num_episodes must be at least 1 or null (all), got {self.num_episodes}")
        if self.teacher_url is not None and not self.teacher_url.startswith(("http://", "https://")):
            raise ValueError(f"teacher_url must start with http:// or https://, got {self.teacher_url!r}")
        if not 0.0 <= self.teacher_skill <= 1.0:
            raise ValueError(f"teacher_skill must be within [0, 1], got {self.teacher_skill}")
        if self.batch_size < 1 or self.max_concurrency < 1:
            raise ValueError("batch_size and max_concurrency must be at least 1")
        if self.requests_per_second is not None and not (
            math.isfinite(self.requests_per_second) and self.requests_per_second > 0
        ):
            raise ValueError(f"requests_per_second must be positive or null, got {self.requests_per_second}")
        if "name" not in self.env:
            raise ValueError("env needs a 'name' (e.g. tictactoe)")

    def to_dict(self) -> dict:
        """The config as a plain dict (for MLflow params)."""
        return asdict(self)
