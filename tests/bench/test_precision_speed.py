"""The precision bench refuses bad sizes before any model is built.

The measurement (minutes: the chat model converted, four SFT runs, greedy calls of both models) is run by hand with
`python -m bench.run bench.precision_speed`, on a quiet machine.
"""

from __future__ import annotations

import re

import pytest

from bench import precision_speed


@pytest.mark.parametrize(
    ("sizes", "message"),
    [({"sft_rows": 20}, "a timed step would repeat rows"), ({"repeats": 0}, "at least 1")],
)
def test_bad_sizes_fail_before_a_model_is_built(sizes: dict, message: str, monkeypatch) -> None:
    def built(folder: object) -> str:
        raise AssertionError("a model was built before the sizes were checked")

    monkeypatch.setattr(precision_speed, "convert_model", built)
    monkeypatch.setattr(precision_speed, "scratch_model", built)
    with pytest.raises(ValueError, match=re.escape(message)):
        precision_speed.run(**sizes)
