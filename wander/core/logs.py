"""Stage logging: wander's own progress lines on stderr; other libraries' INFO chatter off by default.

The synthesis talks to its teacher over HTTP, thousands of requests per run; the OpenAI client's HTTP library
logs each at INFO, the embedded teacher's uvicorn would add an access line for each, and Great Expectations
announces its registrations on import. Only wander's loggers (and the stage's own) log at INFO; every other
logger stays at WARNING unless asked for: a stage's `--verbose` option, or `WANDER_LOG_LEVEL=DEBUG` (which reaches
every stage that DVC or the flow runs, through the environment). The same switch governs transformers' progress
bars: its "Loading weights" bar would otherwise print at every model load (each policy of the evaluation matrix,
each learning-curve point).
"""

from __future__ import annotations

import logging
import os
import re
import sys
import warnings

LEVEL_ENV = "WANDER_LOG_LEVEL"
PROGRESS_ENV = "HF_HUB_DISABLE_PROGRESS_BARS"
DATASETS_PROGRESS_ENV = "HF_DATASETS_DISABLE_PROGRESS_BARS"  # datasets' own switch: SFT's "Tokenizing" bars
# Our loggers: modules log under their package; a stage run as `python -m tasks.<stage>` is `__main__`.
OURS = ("wander", "envs", "tasks", "flows", "__main__")
# Per-request loggers, set explicitly too: a library's own logging setup (uvicorn's dictConfig) may have given
# them a level, and then the root's level would not reach them.
CHATTY = ("httpx", "httpx2", "httpcore", "openai", "uvicorn", "uvicorn.access", "uvicorn.error")

# Notices that ask nothing of the user, off at their source (each library's own switch) unless verbose or DEBUG.
QUIET_ENV = {
    "TRL_EXPERIMENTAL_SILENCE": "1",  # "You are using 'rollout_func', which is an experimental feature", per trainer
    "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",  # a download bar per model read back from the registry
    "MLFLOW_LOGGING_LEVEL": "WARNING",  # "Creating initial MLflow database tables...", per new store
}
# Warnings one library raises about how it calls another, which nothing in wander or its params can change.
# No filter here reaches a warning that a library raises under a `warnings.catch_warnings()` filter of its own
# (MLflow's advice on a PythonModel's predict): that one is answered at its source (registered_model's type hints).
LIBRARY_NOTICES = (
    (
        FutureWarning,
        r"`is_gradient_checkpointing` is deprecated",
    ),  # TRL's model unwrapping, transformers 5's rename
)

# `scheme://user:password@` in a URL: the userinfo part is a credential and never reaches a log or MLflow.
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s/?#@]+@")


def redact_url(text: str) -> str:
    """`text` with the userinfo of every URL in it masked: `http://user:key@host/v1` -> `http://***@host/v1`."""
    return _USERINFO.sub(r"\1***@", text) if "@" in text else text


class RedactCredentials(logging.Filter):
    """Masks the userinfo of every URL in a log line (`http://user:key@host` -> `http://***@host`), whoever logs it."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite the record's message when it holds credentials; never drop a record."""
        message = record.getMessage()
        redacted = redact_url(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


def log_level() -> int:
    """The level WANDER_LOG_LEVEL names (DEBUG, INFO, WARNING, ...), INFO when unset or not a level name."""
    name = os.environ.get(LEVEL_ENV, "INFO").strip().upper()
    return logging.getLevelNamesMapping().get(name, logging.INFO)


def configure_logging(prefix: str, verbose: bool = False) -> int:
    """Log to stderr as `<prefix>: message`: ours at WANDER_LOG_LEVEL, the rest at WARNING (and Hugging Face's
    progress bars off) unless verbose or DEBUG."""
    level = log_level()
    logging.basicConfig(level=level, format=f"{prefix}: %(message)s", stream=sys.stderr)
    for handler in logging.getLogger().handlers:  # a filter on the handler sees every library's records too
        if not any(isinstance(f, RedactCredentials) for f in handler.filters):
            handler.addFilter(RedactCredentials())
    others = level if verbose or level <= logging.DEBUG else max(level, logging.WARNING)
    logging.getLogger().setLevel(others)  # every library logger without a level of its own inherits this
    for name in CHATTY:
        logging.getLogger(name).setLevel(others)
    for name in (*OURS, prefix):
        logging.getLogger(name).setLevel(level)
    if others > logging.INFO:  # the bars are INFO-level chatter too
        quiet_progress_bars()
        quiet_library_notices()
    return level


def quiet_library_notices() -> None:
    """Turn off the notices of QUIET_ENV (where the environment does not say otherwise; child processes inherit it)
    and of LIBRARY_NOTICES; every other warning still shows."""
    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)
    for category, message in LIBRARY_NOTICES:
        warnings.filterwarnings("ignore", message=message, category=category)


def quiet_progress_bars() -> None:
    """Turn off Hugging Face's progress bars (transformers' "Loading weights", hub downloads, datasets' "Map" and
    "Tokenizing"), unless the environment already says (HF_HUB_DISABLE_PROGRESS_BARS,
    HF_DATASETS_DISABLE_PROGRESS_BARS); the Trainer's own bar is not one of them."""
    # The libraries read the variables when first imported; a process that imported them already is told
    # directly. Not imported up front: transformers costs a second, and generate never loads it.
    if os.environ.setdefault(DATASETS_PROGRESS_ENV, "1") == "1" and "datasets" in sys.modules:
        from datasets.utils import disable_progress_bars

        disable_progress_bars()
    if os.environ.setdefault(PROGRESS_ENV, "1") != "1":
        return
    if "transformers" in sys.modules or "huggingface_hub" in sys.modules:
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
