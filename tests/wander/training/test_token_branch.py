"""GRPO one token at a time on a single-turn env (branch_at="token"): groups share the greedy prefix up to the
token the model is least sure of, differ there only, and only that token carries the loss."""

from __future__ import annotations

import pytest
import torch

from envs.reverse_text import lcs_length
from wander import load_environment
from wander.training import RolloutConfig, trainer_spec
from wander.training.episode_data import spec_of
from wander.training.grpo import rollout_func
from wander.training.token_branch import TokenBranchRollout, least_sure_position

from .conftest import TINY, cpu_args

GROUP = 4


@pytest.fixture(scope="module")
def reverse_env():
    return load_environment("reverse_text", num_groups=1, num_train=64, num_eval=8, num_test=8)


@pytest.fixture(scope="module")
def reverse_model(reverse_env, tmp_path_factory) -> str:
    """A tiny byte-level model after a few SFT steps on reverse_text."""
    from trl import SFTConfig, SFTTrainer

    from wander.policies.scratch_model import build_scratch_model
    from wander.policies.scratch_model_config import ScratchModelConfig
    from wander.training.sft_data_config import SFTDataConfig

    path = tmp_path_factory.mktemp("reverse") / "model"
    base = build_scratch_model(reverse_env.corpus(), path, ScratchModelConfig(**{**TINY, "vocab_size": 259}))
    # A short SFT on the teacher's reversals: replies in the env's tags, scored above zero, far from sure.
    out = path.parent / "sft"
    args = cpu_args(
        SFTConfig, str(out), num_train_epochs=60, per_device_train_batch_size=16, learning_rate=3e-3
    )
    data = SFTDataConfig(
        teacher=reverse_env.teacher_policy(0.0, 0), num_episodes=64, filters=("well_formatted",)
    )
    trainer = reverse_env >> trainer_spec(SFTTrainer, model=str(base), args=args, data=data)
    trainer.train()
    trainer.save_model(str(out / "final"))
    trainer.processing_class.save_pretrained(str(out / "final"))
    return str(out / "final")


def token_trainer(env, model: str, tmp_path, max_steps: int = 1):
    from trl import GRPOConfig, GRPOTrainer

    args = cpu_args(
        GRPOConfig,
        str(tmp_path),
        max_steps=max_steps,
        per_device_train_batch_size=2 * GROUP,
        num_generations=GROUP,
        max_completion_length=env.reply_tokens(),
        learning_rate=1e-3,
        temperature=2.0,  # the group's sampled branch tokens spread
    )
    return env >> trainer_spec(GRPOTrainer, model=model, args=args, rollout=RolloutConfig(branch_at="token"))


def test_least_sure_position_is_the_step_with_the_lowest_top_probability():
    sure, unsure, middling = (
        torch.tensor([5.0, 0.0, 0.0]),
        torch.tensor([1.0, 0.9, 0.8]),
        torch.tensor([2.0, 0, 0]),
    )
    assert least_sure_position([sure, middling, unsure, middling, unsure]) == 2  # the first of equals


def test_a_group_shares_the_greedy_prefix_and_differs_at_the_least_sure_token(
    reverse_env, reverse_model, tmp_path
):
    trainer = token_trainer(reverse_env, reverse_model, tmp_path)
    assert isinstance(trainer.rollout_func, TokenBranchRollout)
    rows = [trainer.train_dataset[i]["prompt"] for i in range(2)]
    prompts = [row for row in rows for _ in range(GROUP)]
    out = trainer.rollout_func(prompts, trainer)

    model, tokenizer = trainer.model.eval(), trainer.processing_class
    eos = tokenizer.eos_token_id
    for g in range(2):
        members = range(g * GROUP, (g + 1) * GROUP)
        # The greedy reply as evaluation would play it, and where its top probability is lowest.
        spec = spec_of(rows[g])
        episode = reverse_env.start(spec)
        prompt = tokenizer.apply_chat_template(episode.messages, add_generation_prompt=True, return_dict=True)
        prompt = list(prompt["input_ids"])
        with torch.no_grad():
            greedy = model.generate(
                torch.tensor([prompt]),
                do_sample=False,
                max_new_tokens=reverse_env.reply_tokens(),
                output_scores=True,
                return_dict_in_generate=True,
                pad_token_id=eos,
            )
        ids = greedy.sequences[0, len(prompt) :].tolist()
        ids = ids[: ids.index(eos) + 1] if eos in ids else ids
        at = least_sure_position([s[0] for s in greedy.scores[: len(ids)]])
        for i in members:
            assert out["prompt_ids"][i] == prompt + ids[:at]  # the prefix joins the prompt: no loss on it
            completion, mask = out["completion_ids"][i], out["env_mask"][i]
            assert mask == [1] + [0] * (len(completion) - 1)  # only the branch token is trained
            # After the sampled token the reply goes on greedily, within the budget, and is scored whole.
            with torch.no_grad():
                rest = model.generate(
                    torch.tensor([prompt + ids[:at] + completion[:1]]),
                    do_sample=False,
                    max_new_tokens=reverse_env.reply_tokens() - at - 1,
                    pad_token_id=eos,
                )[0, len(prompt) + at + 1 :].tolist()
            rest = rest[: rest.index(eos) + 1] if eos in rest else rest
            assert completion[1:] == ([] if completion[0] == eos else rest)
            reply = tokenizer.decode(ids[:at] + completion, skip_special_tokens=True)
            answer = reverse_env.parser.parse_answer([{"role": "assistant", "content": reply}]) or ""
            want = spec["text"][::-1]
            expected = 2 * lcs_length(answer, want) / (len(answer) + len(want)) if answer else 0.0
            assert out["episode_reward"][i] == pytest.approx(expected)
        # The group differs at the branch token.
        assert len({out["completion_ids"][i][0] for i in members}) > 1
    # Replies in the env's tags: the scores compared above are real ones.
    assert max(out["episode_reward"]) > 0.0


def test_token_branching_trains_and_logs_how_sure_the_model_was(reverse_env, reverse_model, tmp_path):
    trainer = token_trainer(reverse_env, reverse_model, tmp_path, max_steps=2)
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    trainer.train()
    assert any(not torch.equal(v, before[k]) for k, v in trainer.model.state_dict().items())
    logged = [h["branch/top_probability"] for h in trainer.state.log_history if "branch/top_probability" in h]
    assert len(logged) == 2 and all(0.0 < p < 1.0 for p in logged)


def test_token_branching_is_refused_for_an_env_of_several_turns():
    env = load_environment("tictactoe", history="current", num_groups=2, num_train=16)
    with pytest.raises(ValueError, match="single reply.*branch_at='depth'"):
        rollout_func(env, RolloutConfig(branch_at="token"))
