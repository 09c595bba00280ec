"""The log switch: other libraries' INFO lines quiet by default, back with --verbose or WANDER_LOG_LEVEL=DEBUG."""

from __future__ import annotations

import logging

import pytest

from tasks.logs import CHATTY, LEVEL_ENV, OURS, configure_logging

NAMES = ["", *OURS, *CHATTY, "stage", "some.library"]


@pytest.fixture(autouse=True)
def restore_levels():
    levels = {n: logging.getLogger(n).level for n in NAMES}
    yield
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


@pytest.mark.parametrize(
    ("env", "verbose", "ours", "others"),
    [
        (None, False, logging.INFO, logging.WARNING),
        ("nonsense", False, logging.INFO, logging.WARNING),
        (None, True, logging.INFO, logging.INFO),
        ("debug", False, logging.DEBUG, logging.DEBUG),
        ("WARNING", False, logging.WARNING, logging.WARNING),
        ("ERROR", True, logging.ERROR, logging.ERROR),
    ],
)
def test_levels(monkeypatch, env, verbose, ours, others):
    if env is None:
        monkeypatch.delenv(LEVEL_ENV, raising=False)
    else:
        monkeypatch.setenv(LEVEL_ENV, env)
    assert configure_logging("stage", verbose) == ours
    assert {logging.getLogger(n).getEffectiveLevel() for n in (*OURS, "stage", "tasks.sft")} == {ours}
    logging.getLogger("uvicorn.access").setLevel(logging.INFO)  # as uvicorn's own log config leaves it
    configure_logging("stage", verbose)
    assert {logging.getLogger(n).getEffectiveLevel() for n in (*CHATTY, "some.library")} == {others}
