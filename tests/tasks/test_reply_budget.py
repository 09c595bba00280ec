"""Reply budgets that follow from the environment: null `grpo.max_completion_length`, `evaluate.max_new_tokens` and
`register.max_new_tokens` are the env's (`reply_tokens()` per model turn, `completion_tokens()` where TRL's tool loop
caps a whole completion), and they cover the teacher's replies in the tokens of the scratch tokenizer and of a real
BPE tokenizer (SmolLM2's, read from the packaged model as the chat profile's build_model reads it)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from envs.reverse_text import longest_text, make_text
from tasks.params import preflight
from tasks.params.sections import Params
from wander import load_environment
from wander.core.pipeline_hooks import DEFAULT_REPLY_TOKENS, PipelineHooks, reply_budget
from wander.core.tool_env import ToolEnv

REPO = Path(__file__).resolve().parents[2]
# params.yaml's other envs have 4 strata; the env's own default is 3.
ENVS = {
    "tictactoe": {},
    "tictactoe-think": {"reply_format": "think"},
    "reverse_text": {"num_groups": 4},
    "double_check": {"num_groups": 4},
    "calculator": {"num_groups": 4},
    "workplace_assistant": {"num_groups": 4},
}


def _env(key: str):
    return load_environment(key.split("-")[0], **ENVS[key])


@pytest.fixture(scope="module")
def teacher_episodes() -> dict[str, list]:
    """Every episode of every split, played by the env's teacher at its slip rate and without slips."""
    out = {}
    for key in ENVS:
        env = _env(key)
        out[key] = [
            episode
            for skill in (0.0, env.teacher_skill)
            for split in ("train", "eval", "test")
            for episode in env.rollout(env.teacher_policy(skill, 0), env.get_dataset(split).to_list())
        ]
    return out


@pytest.fixture(scope="module")
def tokenizers(teacher_episodes) -> dict:
    """The scratch tokenizer trained on the teacher's texts (byte-level BPE, no whole-token tags: its longest
    tokenization) and SmolLM2's BPE tokenizer from the packaged model file."""
    from transformers import AutoTokenizer

    from wander.policies.packaged_models import packaged_file
    from wander.policies.scratch_model import build_tokenizer

    texts = [
        m["content"] or "" for episodes in teacher_episodes.values() for e in episodes for m in e.messages
    ]
    path = packaged_file("smollm2-135m-instruct")
    return {
        "scratch": build_tokenizer(texts),
        "smollm2": AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name),
    }


def _replies(episodes: list) -> list[str]:
    return [m["content"] for e in episodes for m in e.messages if m["role"] == "assistant"]


@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(ENVS))
def test_the_reply_budget_covers_the_teachers_longest_reply_in_real_tokens(key, teacher_episodes, tokenizers):
    env = _env(key)
    longest = max(_replies(teacher_episodes[key]), key=len)
    for name, tokenizer in tokenizers.items():
        tokens = (
            len(tokenizer(longest, add_special_tokens=False)["input_ids"]) + 1
        )  # and the end-of-turn token
        assert env.reply_tokens() >= tokens, (name, longest)
    # A bound, not a guess: no more than the longest reply's bytes and a few tokens beyond them.
    assert env.reply_tokens() <= 2 * len(longest.encode()) + 8, longest


@pytest.mark.slow
@pytest.mark.parametrize("key", ["calculator", "workplace_assistant"])
def test_a_tool_envs_completion_budget_covers_the_teachers_longest_episode_as_trl_renders_it(
    key, teacher_episodes, tokenizers
):
    env = _env(key)
    assert isinstance(env, ToolEnv)
    # The longest episodes in characters (a token holds at least one): rendering all of them takes minutes.
    episodes = sorted(teacher_episodes[key], key=lambda e: -sum(len(m["content"] or "") for m in e.messages))
    for name, tokenizer in tokenizers.items():
        longest = 0
        for e in episodes[:50]:
            messages = [{"role": m["role"], "content": m["content"] or ""} for m in e.messages]
            prompt = tokenizer.apply_chat_template(messages[: e.prompt_len], add_generation_prompt=True)
            whole = tokenizer.apply_chat_template(messages)
            longest = max(longest, len(_ids(whole)) - len(_ids(prompt)))
        assert env.completion_tokens() >= longest, (name, longest)


def _ids(rendered) -> list[int]:
    # transformers 5 returns a BatchEncoding from apply_chat_template; older versions a list.
    return rendered["input_ids"] if hasattr(rendered, "keys") else rendered


def test_reverse_texts_budget_covers_its_longest_text_in_any_split() -> None:
    for groups in (1, 3, 4, 8):
        longest = max(len(make_text(seed, stratum)) for seed in range(3000) for stratum in range(groups))
        assert longest_text(groups) >= longest
        env = load_environment("reverse_text", num_groups=groups, num_train=1, num_eval=1, num_test=1)
        # Any tokenizer's token holds at least one byte (the texts are ASCII), plus the end-of-turn token.
        assert env.reply_tokens() >= len(f"<reversed_text>{'x' * longest}</reversed_text>") + 1
    assert load_environment("reverse_text", num_groups=4).reply_tokens() > 16  # the old default cut it


def test_tictactoe_keeps_16_for_a_move_and_takes_more_for_a_rationale() -> None:
    assert load_environment("tictactoe").reply_tokens() == 16
    assert load_environment("tictactoe", reply_format="think").reply_tokens() > 64


def test_an_env_that_does_not_say_gets_the_generic_budget() -> None:
    class Silent(PipelineHooks):
        max_turns = 3

    assert Silent().reply_tokens() == DEFAULT_REPLY_TOKENS
    assert Silent().completion_tokens() == 3 * DEFAULT_REPLY_TOKENS


def test_an_explicit_number_wins_and_null_is_the_envs() -> None:
    env = load_environment("reverse_text", num_groups=4, num_train=4, num_eval=4, num_test=4)
    assert reply_budget(env, 5) == 5 and reply_budget(env, None) == env.reply_tokens()
    params = Params.model_validate(
        {
            "env": {"name": "reverse_text"},
            "evaluate": {"max_new_tokens": 40},
            "register": {"max_new_tokens": 40},
        }
    )
    budgets = preflight.reply_budgets(params, env)
    assert budgets == {
        "grpo.max_completion_length": env.reply_tokens(),
        "evaluate.max_new_tokens": 40,
        "register.max_new_tokens": 40,
    }
    line = preflight.budget_line(params, env)
    assert line.startswith("reply budget (tokens; null = env reverse_text's):")
    assert (
        f"grpo.max_completion_length {env.reply_tokens()}," in line
        and "evaluate.max_new_tokens 40 (set)" in line
    )


def test_grpo_caps_a_tool_envs_whole_completion_and_any_other_envs_turn() -> None:
    rollout = Params().grpo.rollout()
    tool = load_environment("calculator", num_train=4, num_eval=4, num_test=4)
    text = load_environment("double_check", num_train=4, num_eval=4, num_test=4)
    assert rollout.completion_budget(tool, None) == tool.completion_tokens() > tool.reply_tokens()
    assert rollout.completion_budget(text, None) == text.reply_tokens()
    assert rollout.completion_budget(tool, 300) == 300


def test_the_params_leave_the_budgets_to_the_env_and_the_preflight_refuses_two_replay_budgets() -> None:
    from tasks.params.load import load_params

    params = load_params(REPO / "params.yaml")
    assert (params.grpo.max_completion_length, params.evaluate.max_new_tokens) == (None, None)
    assert params.register.max_new_tokens is None
    mismatched = params.model_copy(
        update={"register": params.register.model_copy(update={"max_new_tokens": 8})}
    )
    found = [p for p in preflight.problems(mismatched) if p.startswith("register.max_new_tokens")]
    assert len(found) == 1 and "evaluate gives the candidate 16" in found[0]


def test_wander_eval_without_max_new_tokens_does_not_cut_a_perfect_reversal(tmp_path, monkeypatch) -> None:
    """A model row that reverses perfectly but stops at its token budget (one token a character, the worst a
    tokenizer can do): with the env's budget every reply is whole."""
    import wander.eval.matrix as matrix
    from wander.cli import main
    from wander.core.policy import Reply

    budgets = []

    def perfect_within_budget(spec, *, max_new_tokens, **_):
        budgets.append(max_new_tokens)

        def policy(conversations):
            texts = [f"<reversed_text>{c[-1]['content'][::-1]}</reversed_text>" for c in conversations]
            return [Reply(t[: max_new_tokens - 1]) for t in texts]  # the last token is the end of turn

        return policy

    monkeypatch.setattr(matrix, "make_policy", perfect_within_budget)
    out = tmp_path / "eval"
    args = [
        "eval",
        "--env",
        "reverse_text",
        "--policy",
        "perfect=some/model",
        "--games",
        "20",
        "--no-progress",
    ]
    assert main([*args, "--out", str(out)]) == 0
    assert budgets == [load_environment("reverse_text").reply_tokens()]
    with (out / "matrix.csv").open() as f:
        rows = [r for r in csv.DictReader(f) if r["policy"] == "perfect"]
    assert rows and all(float(r["exact"]) == 1.0 for r in rows)
