"""LLM-judge rewards against a scripted judge served by the embedded OpenAI-compatible server (real HTTP on
loopback): scores parsed, one batch per rubric call, cached, a hard budget, group-relative scoring, unusable
answers and a dead endpoint refused."""

from __future__ import annotations

import re
import socket
import time

import pytest

from envs.reverse_text import lcs_length
from wander import Rubric, load_environment
from wander.core.policy import Reply
from wander.eval.judge_agreement import agreement
from wander.policies.judge import Judge
from wander.policies.loading import make_policy
from wander.policies.openai_server import create_app, serve_in_thread

TAG = re.compile(r"<reversed_text>(.*?)</reversed_text>", re.DOTALL)  # reverse_text's answer tag


def tagged(text: str) -> str:
    found = TAG.search(text)
    return found.group(1) if found else ""


def grade(got: str, want: str) -> int:
    """reverse_text's score on a scale of 10, where only the exact reversal is a 10."""
    ratio = 2 * lcs_length(got, want) / (len(got) + len(want)) if got else 0.0
    return 10 if got == want else min(9, round(10 * ratio))


class ScriptedJudge:
    """Grades as reverse_text's scorer does, to the judge's scale of 10; counts the conversations it answers."""

    scripted = True

    def __init__(self, answer: str | None = None):
        self.calls, self.conversations, self.answer = 0, 0, answer

    def __call__(self, conversations):
        self.calls += 1
        self.conversations += len(conversations)
        replies = []
        for (message,) in conversations:
            text = message["content"]
            reference = text.split("Reference answer:\n", 1)[1].split("\n", 1)[0]
            body, instruction = text.rsplit("\n\n", 1)  # the instruction is the prompt's last paragraph
            verdict = (lambda g: "Yes" if g == 10 else "No") if "Yes" in instruction else str
            if self.answer is not None:
                replies.append(Reply(self.answer))
            elif "replies to the same task" in text:
                parts = re.findall(r"Reply (\d+):\n(.*?)(?=\n\nReply \d+:|$)", body, re.DOTALL)
                lines = [f"Reply {k}: {verdict(grade(tagged(r), reference))}" for k, r in parts]
                replies.append(Reply("\n".join(lines)))
            else:
                reply = body.split("\nReply:\n", 1)[1]
                replies.append(Reply(f"Close enough.\nScore: {verdict(grade(tagged(reply), reference))}"))
        return replies


RUBRIC = "The reply is the task's text reversed, character by character."


def reversal(info: dict) -> str:
    return info["text"][::-1]


def expected(episode) -> float:
    return grade(tagged(episode.completion[-1]["content"]), reversal(episode.spec)) / 10


@pytest.fixture(scope="module")
def played():
    env = load_environment("reverse_text", num_train=8, num_eval=12, num_test=4)
    specs = env.get_dataset("eval").to_list()
    return env, env.rollout(make_policy("expert-0.5", env=env), specs)


def judged(judge: Judge, env, episodes) -> list:
    return Rubric([judge], [1.0], parser=env.parser).score([e.scoring_inputs() for e in episodes])


def test_a_judge_served_over_http_agrees_with_the_scorer_it_scripts_and_answers_from_its_cache(played):
    env, episodes = played
    script = ScriptedJudge()
    with serve_in_thread(create_app(lambda seed: script, "judge")) as url:
        judge = Judge.from_spec(url, RUBRIC, reference=reversal)
        found = agreement(env, judge, episodes, "reward", threshold=1.0)
        assert found["judged"] == 12 and found["unscored"] == 0
        assert found["agreement"]["mean"] == 1.0  # exact reversals are the 10s, slips below
        exact = sum(e.reward == 1.0 for e in episodes)
        assert found["table"] == {
            "judge pass, scorer pass": exact, "judge pass, scorer fail": 0,
            "judge fail, scorer pass": 0, "judge fail, scorer fail": 12 - exact,
        }  # fmt: skip
        assert found["mean_abs_difference"]["mean"] < 0.05  # the judge's scale rounds to tenths
        assert {e.reward == 1.0 for e in episodes} == {True, False}  # both kinds of reply judged
        assert judge.calls == 12 and script.conversations == 12
        again = judged(judge, env, episodes)
        assert script.conversations == 12 and judge.calls == 12  # every reply answered from the cache
        assert [s.reward for s in again] == [expected(e) for e in episodes]


def test_a_batch_is_one_policy_call_per_chunk_and_the_budget_is_hard(played):
    env, episodes = played
    script = ScriptedJudge()
    scores = judged(Judge(script, RUBRIC, reference=reversal, batch_size=5), env, episodes)
    assert script.calls == 3 and script.conversations == 12  # 12 replies in chunks of 5
    assert not any(s.error for s in scores)
    budget = Judge(ScriptedJudge(), RUBRIC, reference=reversal, max_calls=5)
    scores = judged(budget, env, episodes)
    refused = [s for s in scores if s.error]
    assert len(refused) == 7 and budget.calls == 5
    assert refused[0].error == "judge: JudgeError: the judge's budget of 5 requests is spent"
    assert all(s.reward == 0.0 for s in refused)


def test_group_mode_scores_a_tasks_replies_together_in_one_request(played):
    env, episodes = played
    script = ScriptedJudge()
    judge = Judge(script, RUBRIC, reference=reversal, mode="group")
    group = [e for e in episodes[:2] for _ in range(3)]  # two tasks, three replies each (a GRPO group)
    scores = judged(judge, env, group)
    assert script.conversations == 2 and judge.calls == 2
    assert [s.reward for s in scores] == [expected(e) for e in group]


@pytest.mark.parametrize("mode", ["each", "group"])
def test_a_yes_no_verdict_is_one_for_yes_and_zero_for_no(played, mode):
    env, episodes = played
    script = ScriptedJudge()
    judge = Judge(script, RUBRIC, reference=reversal, mode=mode, verdict="yes_no")
    group = [e for e in episodes[:4] for _ in range(2)]
    scores = judged(judge, env, group)
    assert [s.reward for s in scores] == [float(expected(e) == 1.0) for e in group]
    assert {s.reward for s in scores} == {0.0, 1.0}
    assert script.conversations == 4  # one request a task: each mode sends a repeated reply once
    scores = judged(
        Judge(ScriptedJudge("Score: 7"), RUBRIC, reference=reversal, verdict="yes_no"), env, group
    )
    assert (
        scores[0].error
        == "judge: JudgeError: the judge's answer gives no Yes or No for every reply: 'Score: 7'"
    )


def test_an_answer_without_a_score_errors_its_episode_with_the_answer(played):
    env, episodes = played
    scores = judged(
        Judge(ScriptedJudge("I think it is fine."), RUBRIC, reference=reversal), env, episodes[:2]
    )
    assert all(
        s.error
        == "judge: JudgeError: the judge's answer gives no score 0-10 for every reply: 'I think it is fine.'"
        for s in scores
    )


def test_a_judge_endpoint_that_does_not_answer_is_refused_before_any_episode():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(ValueError, match=rf"the judge endpoint http://127.0.0.1:{port}/v1 does not answer"):
        Judge.from_spec(f"http://127.0.0.1:{port}/v1", RUBRIC)
    assert time.monotonic() - started < 60
