"""Stage logging: wander's own progress lines on stderr, the per-request chatter of HTTP libraries off by default.

The synthesis talks to its teacher over HTTP, thousands of requests per run; httpx logs each at INFO and the
embedded teacher's uvicorn would add an access line for each. Those loggers stay at WARNING unless asked for:
`WANDER_LOG_LEVEL=DEBUG` (which reaches every stage run by DVC or the flow, through the environment) or a stage's
`--verbose` option.
"""

from __future__ import annotations

import logging
import os
import sys

LEVEL_ENV = "WANDER_LOG_LEVEL"
# Loggers that speak once per HTTP request or server start.
CHATTY = ("httpx", "httpcore", "openai", "uvicorn", "uvicorn.access", "uvicorn.error")


def log_level() -> int:
    """The level WANDER_LOG_LEVEL names (DEBUG, INFO, WARNING, ...), INFO when unset or not a level name."""
    name = os.environ.get(LEVEL_ENV, "INFO").strip().upper()
    return logging.getLevelNamesMapping().get(name, logging.INFO)


def configure_logging(prefix: str, verbose: bool = False) -> int:
    """Log to stderr as `<prefix>: message`; per-request library loggers at WARNING unless verbose or DEBUG."""
    level = log_level()
    logging.basicConfig(level=level, format=f"{prefix}: %(message)s", stream=sys.stderr)
    logging.getLogger().setLevel(level)
    chatty = level if verbose or level <= logging.DEBUG else max(level, logging.WARNING)
    for name in CHATTY:
        logging.getLogger(name).setLevel(chatty)
    return level
