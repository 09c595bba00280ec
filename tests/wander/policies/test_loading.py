"""make_policy: one string names any policy."""

import pytest

from envs.tictactoe import ExpertPlayer, MinimaxPlayer, RandomPlayer
from wander import load_environment
from wander.policies.loading import make_policy
from wander.policies.openai_policy import OpenAIPolicy
from wander.policies.scratch_model import build_scratch_model
from wander.policies.scratch_model_config import ScratchModelConfig
from wander.policies.transformers_policy import TransformersPolicy


def test_scripted_names_are_the_envs():
    env = load_environment("tictactoe")
    assert type(make_policy("random", env=env)) is RandomPlayer
    minimax = make_policy("minimax-0.25", seed=3, env=env)
    assert type(minimax) is MinimaxPlayer and minimax.random_move_prob == 0.25
    assert type(make_policy("expert", env=env)) is ExpertPlayer
    with pytest.raises(ValueError, match="scripted players belong to an environment: pass env="):
        make_policy("random")
    with pytest.raises(ValueError, match="not a scripted player of reverse_text"):
        make_policy("minimax-0.25", env=load_environment("reverse_text"))


def test_url_gives_an_openai_policy_with_the_key_named_not_stored(monkeypatch):
    monkeypatch.setenv("MY_KEY", "secret")
    policy = make_policy("http://127.0.0.1:9/v1", model="m", api_key_env="MY_KEY", temperature=0.0)
    assert isinstance(policy, OpenAIPolicy)
    assert policy.config.api_key_env == "MY_KEY" and "secret" not in repr(policy.config)


def test_local_folder_gives_a_transformers_policy(tmp_path):
    env = load_environment("tictactoe", num_eval=2)
    config = ScratchModelConfig(
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        intermediate_size=64,
    )
    path = build_scratch_model(env.corpus(), tmp_path / "model", config)
    policy = make_policy(str(path), max_new_tokens=4)
    assert isinstance(policy, TransformersPolicy) and policy.greedy
    result = env.evaluate(policy)
    assert len(result.trajectories) == 2


def test_unknown_spec_names_the_choices():
    with pytest.raises(ValueError, match="not a scripted player"):
        make_policy("no/such/model/folder")


def test_a_new_policy_kind_is_a_registration_not_a_branch(monkeypatch):
    from wander.core.registry import Registry
    from wander.policies import loading

    kinds = Registry("policy kind")
    for scheme in loading.POLICY_KINDS:
        kinds.register(scheme, loading.POLICY_KINDS.get(scheme))
    built = []
    kinds.register(
        "echo", lambda spec, options: built.append((spec, options.seed, options.model)) or "policy"
    )
    monkeypatch.setattr(loading, "POLICY_KINDS", kinds)
    assert make_policy("echo://x", seed=4, model="m") == "policy" and built == [("echo://x", 4, "m")]
    assert isinstance(make_policy("https://127.0.0.1:9/v1", model="m"), OpenAIPolicy)
    with pytest.raises(ValueError, match="not a scripted player"):  # an unregistered scheme: as before
        make_policy("ftp://host/model")
