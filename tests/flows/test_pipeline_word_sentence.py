"""word_sentence, an env whose reward only a judge gives, through the whole smoke pipeline (`dvc exp run`), its
judge a scripted grader served over HTTP on loopback as any OpenAI-compatible judge would be: every stage that
scores (synthesize, curate's gate, GRPO, evaluate) asks it."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from envs.word_sentence import ScriptedJudge
from tasks.runtime.scratch_copy import copy_project, run_in
from wander.policies.openai_server import create_app, serve_in_thread


class CountingJudge(ScriptedJudge):
    """The env's scripted grader, counting the judge prompts it answered (the stages call it over HTTP)."""

    def __init__(self):
        self.prompts, self.lock = 0, threading.Lock()

    def __call__(self, conversations):
        with self.lock:
            self.prompts += len(conversations)
        return super().__call__(conversations)


@pytest.fixture(scope="module")
def judged_run(tmp_path_factory) -> tuple[Path, CountingJudge]:
    judge = CountingJudge()
    with serve_in_thread(create_app(lambda seed: judge, "judge")) as url:
        root = copy_project(tmp_path_factory.mktemp("pipeline-word_sentence"), profile="smoke")
        run_in(
            root,
            ["dvc", "exp", "run", "-S", "env.name=word_sentence", "-S", f"+env.word_sentence.judge={url}"],
        )
        yield root, judge


@pytest.mark.slow
def test_a_judged_env_runs_the_whole_pipeline_on_its_served_judge(judged_run) -> None:
    project, judge = judged_run
    for path in ("data/sft/train.jsonl", "data/models/grpo/main/model.safetensors", "data/eval/report.md"):
        assert (project / path).is_file(), path
    episodes = [json.loads(line) for line in (project / "data/synth/episodes.jsonl").read_text().splitlines()]
    assert all("judge" in e["values"] for e in episodes)
    synth = json.loads((project / "data/metrics/synthesize.json").read_text())
    assert 0.8 < synth["teacher_reward"] < 1.0  # the teacher leaves a word out of some sentences
    curate = json.loads((project / "data/details/curate.json").read_text())
    assert curate["dropped"]["judge"] > 0  # the judge's partial grades are what curation removed
    headline = json.loads((project / "data/eval/metrics.json").read_text())
    assert set(headline) == {"grpo-main", "teacher"}
    assert 0.8 < headline["teacher"]["reward"]["all"] <= 1.0
    report = (project / "data/eval/report.md").read_text()
    assert "| judge |" in report or " judge " in report
    assert judge.prompts >= len(
        episodes
    )  # every teacher episode, then curation, GRPO and evaluation, judged over HTTP
