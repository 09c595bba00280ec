"""GRPO on whole episodes: exact token layout of multi-turn rollouts, and real training on a tiny model."""

from __future__ import annotations

import functools

import pytest
import torch

from envs.tictactoe.players import ExpertPlayer, rationale
from envs.tictactoe.render import parse_board
from wander.policies.scratch_model import load_tokenizer
from wander.training import compose, trainer_spec
from wander.training.episode_data import SPEC_KEY, episode_dataset, spec_of
from wander.training.grpo import play_episodes

from .conftest import cpu_args


def expert_generate(tokenizer, cut_first_turn: bool = False):
    """A scripted 'model': the expert's reply to the board in the context, as canonical tokens + end of turn."""
    player = ExpertPlayer(0.0, seed=0)

    def generate(contexts):
        out = []
        for ids in contexts:
            text = tokenizer.decode(ids)
            first_turn = text.count("<|im_start|>assistant") == 1
            board = parse_board(text.rsplit("<|im_start|>user\n", 1)[1])
            cell = player.choose(board)
            reply = tokenizer.encode(f"<think>{rationale(board, cell)}</think>\n<move>{cell}</move>")
            # A turn cut off at the token limit ends without the end-of-turn token.
            out.append(reply if cut_first_turn and first_turn else reply + [tokenizer.eos_token_id])
        return out, None

    return generate


@pytest.fixture(scope="module")
def tokenizer(tiny_model):
    return load_tokenizer(tiny_model)


def test_env_mask_marks_exactly_the_environment_tokens(env, tokenizer):
    specs = env.get_dataset("train").select(range(8)).to_list()
    runs = play_episodes(env, specs, tokenizer, expert_generate(tokenizer))
    eos = tokenizer.eos_token_id
    for run in runs:
        episode = run.episode
        assert episode.done and episode.state["outcome"] in ("win", "draw")
        rendered = tokenizer.apply_chat_template(
            episode.messages, return_dict=True, return_assistant_tokens_mask=True
        )
        ids, assistant = rendered["input_ids"], rendered["assistant_masks"]
        n = len(run.prompt_ids) + len(run.completion_ids)
        # Token for token the conversation the env played, up to the model's last end-of-turn token.
        assert run.prompt_ids + run.completion_ids == ids[:n]
        assert tokenizer.decode(ids[n:]) == "\n"  # only the template's newline after the last turn
        # Model tokens are exactly the template's assistant tokens; everything else is the environment's.
        assert run.env_mask == assistant[len(run.prompt_ids) : n]
        assert 0 in run.env_mask  # multi-turn: environment turns in between
        assert run.completion_ids[-1] == eos and run.env_mask[-1] == 1
        assert len(run.logprobs) == len(run.completion_ids)
        # The episode went through the env's own code and rubric.
        assert episode.values["format"] == 1.0 and episode.reward == pytest.approx(
            env.rubric.score([{"state": episode.state, "completion": episode.completion}])[0].reward
        )


def test_a_turn_cut_off_at_the_token_limit_is_closed_by_an_environment_token(env, tokenizer):
    specs = [s for s in env.get_dataset("train").to_list() if s["model_starts"]][:2]
    runs = play_episodes(env, specs, tokenizer, expert_generate(tokenizer, cut_first_turn=True))
    eos = tokenizer.eos_token_id
    for run in runs:
        first = run.env_mask.index(0)  # end of the first model turn
        assert run.completion_ids[first] == eos and run.env_mask[first] == 0
        assert run.completion_ids[-1] == eos and run.env_mask[-1] == 1
        ids = tokenizer.apply_chat_template(run.episode.messages, return_dict=True)["input_ids"]
        assert run.prompt_ids + run.completion_ids == ids[: len(run.prompt_ids) + len(run.completion_ids)]


def test_episode_token_cap_stops_before_a_turn_and_ends_on_model_tokens(env, tokenizer):
    specs = env.get_dataset("train").select(range(4)).to_list()
    runs = play_episodes(
        env, specs, tokenizer, expert_generate(tokenizer), max_episode_tokens=150, max_turn_tokens=40
    )
    assert any(r.episode.state.get("truncated") for r in runs)
    for run in runs:
        assert len(run.prompt_ids) + len(run.completion_ids) <= 150
        assert run.env_mask[-1] == 1 and run.completion_ids[-1] == tokenizer.eos_token_id


def test_episode_dataset_carries_specs_in_stratified_order(env):
    data = episode_dataset(env, num_rows=10, seed=3, spec_in_prompt=True)
    specs = [spec_of(row["prompt"]) for row in data]
    assert [s["stratum"] for s in specs[:2]] != [specs[0]["stratum"]] * 2
    for i in range(0, 10, 2):  # every window of num_strata rows holds each stratum once
        assert {s["stratum"] for s in specs[i : i + 2]} == {0, 1}
    assert data[0][SPEC_KEY] == data[0]["prompt"][0][SPEC_KEY]
    assert episode_dataset(env, num_rows=10, seed=3, spec_in_prompt=True)[:] == data[:]  # seeded


def test_composition_forms_and_their_errors(env, tiny_model, tmp_path):
    from trl import GRPOConfig, GRPOTrainer, KTOTrainer

    args = cpu_args(GRPOConfig, str(tmp_path), max_steps=1, per_device_train_batch_size=4, num_generations=2)
    with pytest.raises(TypeError, match="trainer_spec"):
        compose(env, object())
    with pytest.raises(TypeError, match="needs a model"):
        compose(env, GRPOTrainer)
    with pytest.raises(TypeError, match="right-hand side of `>>` is trainer_spec"):
        env >> GRPOTrainer
    with pytest.raises(TypeError, match="no composition"):
        compose(env, KTOTrainer, model=tiny_model)
    with pytest.raises(ValueError, match="reward_funcs is built from the environment"):
        env >> trainer_spec(GRPOTrainer, tiny_model, args=args, reward_funcs=[len])
    odd = cpu_args(GRPOConfig, str(tmp_path), max_steps=1, per_device_train_batch_size=3, num_generations=3)
    with pytest.raises(ValueError, match="difficulty strata"):
        env >> trainer_spec(GRPOTrainer, model=tiny_model, args=odd)
    trainer = compose(env, functools.partial(GRPOTrainer, model=tiny_model, args=args))
    assert isinstance(trainer, GRPOTrainer)
    # The trainer gets the rubric's weights; the caller's config is left untouched.
    assert trainer.args.reward_weights[0] == 1.0 and args.reward_weights is None


@pytest.mark.slow
def test_grpo_trains_whole_episodes_and_logs_every_rubric_function(env, sft_model, tmp_path):
    from trl import GRPOConfig, GRPOTrainer

    args = cpu_args(
        GRPOConfig,
        str(tmp_path),
        max_steps=2,
        per_device_train_batch_size=16,
        num_generations=4,
        max_completion_length=32,
        learning_rate=1e-3,
    )
    trainer = env >> trainer_spec(GRPOTrainer, model=sft_model, args=args)
    rollouts = []
    rollout_func = trainer.rollout_func
    batches = []

    def recording(prompts, t):
        batches.append([spec_of(p) for p in prompts])
        rollouts.append(rollout_func(prompts, t))
        return rollouts[-1]

    trainer.rollout_func = recording
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    trainer.train()

    changed = [k for k, v in trainer.model.state_dict().items() if not torch.equal(v, before[k])]
    assert changed, "GRPO left every weight unchanged"
    logged = trainer.state.log_history[0]
    for name in ["episode", *env.rubric.names]:
        assert f"rewards/{name}/mean" in logged
    assert logged["rewards/episode/mean"] == pytest.approx(logged["reward"], abs=1e-5)

    for specs in batches:  # groups of num_generations identical specs; every batch covers every stratum
        assert all(specs[i] == specs[i - i % 4] for i in range(16))
        assert sorted(s["stratum"] for s in specs[::4]) == [0, 0, 1, 1]

    eos = trainer.processing_class.eos_token_id
    assert len(rollouts) == 2 and all(len(r["completion_ids"]) == 16 for r in rollouts)
    for out in rollouts:
        for ids, mask in zip(out["completion_ids"], out["env_mask"], strict=True):
            assert len(ids) == len(mask) and mask[-1] == 1  # never ends on environment tokens
            turns = [i for i, (t, m) in enumerate(zip(ids, mask, strict=True)) if m and t == eos]
            # Every model turn that stopped by itself ends the completion or hands over to the env.
            assert all(i == len(ids) - 1 or mask[i + 1] == 0 for i in turns)
        stopped = [ids[-1] == eos for ids in out["completion_ids"]]
        assert sum(stopped) >= len(stopped) // 2  # the SFT start ends most turns itself
