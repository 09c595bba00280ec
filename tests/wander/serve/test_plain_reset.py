"""A reset that names no episode: the server draws a seed from its own, reports it, and the seed replays the game.

OpenEnv's generic client plays whole games with a plain `reset()`, and TRL's documented OpenEnv pattern (a
`rollout_func` that resets and steps a client for each prompt) trains a tiny model against `wander env serve`.
"""

from __future__ import annotations

import asyncio
import os

import httpx
import pytest
from openenv.core.generic_client import GenericEnvClient

from envs.tictactoe import MinimaxPlayer
from wander import load_environment
from wander.core.splits import SPLIT_SEEDS
from wander.serve.server import EpisodeSession, ResetSeeds, serve_env_in_thread

from .conftest import SETTINGS

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


async def play_plain(url: str, player) -> tuple[int, list, float]:
    """One game with OpenEnv's client and `reset()` without arguments: the drawn seed, the transcript, the reward."""
    async with GenericEnvClient(base_url=url) as client:
        result = await client.reset()
        seed = result.observation["metadata"]["seed"]
        messages = list(result.observation["messages"])
        while not result.done:
            reply = player([result.observation["prompt"]])[0].content
            result = await client.step({"message": reply})
            messages += [{"role": "assistant", "content": reply}, *result.observation["messages"]]
    return seed, messages, result.reward


def test_plain_reset_plays_a_whole_game_whose_seed_replays_it(served, local_env):
    seeds = set()
    for game in range(3):
        seed, messages, reward = asyncio.run(play_plain(served, MinimaxPlayer(0.5, seed=game)))
        assert SPLIT_SEEDS["train"][0] <= seed < SPLIT_SEEDS["train"][1]
        local = local_env.rollout(MinimaxPlayer(0.5, seed=game), [local_env.make_spec(seed)])[0]
        assert messages == local.messages and reward == local.reward
        seeds.add(seed)
    assert len(seeds) == 3  # each plain reset is a fresh episode


def test_http_reset_with_an_empty_body_reports_a_seed_that_replays(served):
    drawn = httpx.post(served + "/reset", json={}, timeout=10).json()["observation"]
    again = httpx.post(served + "/reset", json={"seed": drawn["metadata"]["seed"]}, timeout=10).json()
    assert again["observation"]["messages"] == drawn["messages"]
    assert again["observation"]["metadata"] == drawn["metadata"]
    by_task = httpx.post(served + "/reset", json={"split": "eval", "index": 0}, timeout=10).json()
    assert (
        "seed" not in by_task["observation"]["metadata"]
    )  # a task reset is replayed by its task, not a seed


def test_the_drawn_seeds_are_a_function_of_the_server_seed(local_env):
    def first_seeds(seeds: ResetSeeds, n: int = 4) -> list[int]:
        session = EpisodeSession(local_env, seeds)
        return [session.reset().metadata["seed"] for _ in range(n)]

    assert first_seeds(ResetSeeds(3)) == first_seeds(ResetSeeds(3))
    assert first_seeds(ResetSeeds(3)) != first_seeds(ResetSeeds(4))
    assert first_seeds(ResetSeeds(3, stream=1)) != first_seeds(ResetSeeds(3, stream=0))  # worker processes


# hidden 64, 2 layers (as tests/wander/training): a GRPO step in about a second.
TINY = dict(
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=2,
    intermediate_size=128,
    vocab_size=512,
)


@pytest.mark.slow
def test_trl_rollout_func_resets_and_steps_a_served_env(tmp_path):
    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from wander.policies.scratch_model import build_scratch_model
    from wander.policies.scratch_model_config import ScratchModelConfig

    # One model turn per episode, so each rollout is TRL's single-step pattern and ends with the env's reward.
    env = load_environment("tictactoe", **{**SETTINGS, "max_turns": 1})
    model = str(build_scratch_model(env.corpus(), tmp_path / "model", ScratchModelConfig(**TINY)))
    seen: list[dict] = []

    with serve_env_in_thread(env) as url, GenericEnvClient(base_url=url).sync() as client:

        def rollout_func(prompts: list[str], trainer) -> dict:
            """TRL's OpenEnv pattern: per prompt, reset the client, generate the model's turn, step, take the reward."""
            tokenizer = trainer.processing_class
            out: dict[str, list] = {"prompt_ids": [], "completion_ids": [], "env_reward": []}
            for _ in prompts:
                result = client.reset()
                ids = tokenizer.apply_chat_template(
                    result.observation["prompt"], add_generation_prompt=True, tokenize=True, return_dict=False
                )
                with torch.no_grad():
                    generated = trainer.model.generate(
                        torch.tensor([ids]),
                        do_sample=True,
                        max_new_tokens=8,
                        pad_token_id=tokenizer.eos_token_id,
                    )
                completion = generated[0, len(ids) :].tolist()
                step = client.step({"message": tokenizer.decode(completion, skip_special_tokens=True)})
                seen.append({"seed": result.observation["metadata"]["seed"], "done": step.done})
                out["prompt_ids"].append(ids)
                out["completion_ids"].append(completion)
                out["env_reward"].append(float(step.reward))
            return {**out, "logprobs": None}  # no sampling logprobs without vLLM

        def env_reward(completions, env_reward, **kwargs) -> list[float]:
            return env_reward

        args = GRPOConfig(
            output_dir=str(tmp_path / "grpo"),
            max_steps=1,
            per_device_train_batch_size=4,
            num_generations=2,
            max_completion_length=8,
            bf16=False,
            activation_checkpointing=False,
            use_cpu=True,
            report_to=[],
            seed=0,
            logging_steps=1,
            save_strategy="no",
            disable_tqdm=True,
        )
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=[env_reward],
            args=args,
            train_dataset=Dataset.from_dict({"prompt": ["play"] * 8}),
            rollout_func=rollout_func,
        )
        trainer.train()

    assert len(seen) == 4 and all(s["done"] for s in seen)  # one batch of 4 whole (one-turn) episodes
    assert len({s["seed"] for s in seen}) == 4  # plain resets: four fresh episodes
    logged = [h for h in trainer.state.log_history if "reward" in h]
    assert logged and all(isinstance(h["reward"], float) for h in logged)
