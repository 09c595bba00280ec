"""llama_decode: greedy tokens and logits of the scratch model, bit for bit those of `generate`, on tic-tac-toe prompts."""

from __future__ import annotations

import pytest
import torch
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

from wander import load_environment
from wander.core.policy import Reply
from wander.policies import llama_decode
from wander.policies.scratch_model import build_scratch_model, load_model, load_tokenizer
from wander.policies.transformers_policy import TransformersPolicy

MAX_NEW_TOKENS = 24


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """An untrained scratch model built as `make run` builds it, and real prompts: first and later turns, two renderings."""
    compact = load_environment("tictactoe", num_eval=16, max_turns=4)
    grid = load_environment("tictactoe", num_eval=16, max_turns=4, rendering="grid", history="full")
    path = build_scratch_model(compact.corpus(), tmp_path_factory.mktemp("scratch") / "model")
    conversations = {}
    for name, env in (("compact", compact), ("grid", grid)):
        episodes = [env.start(spec) for spec in env.get_dataset("eval").to_list()]
        conversations[name] = [env.observation(ep) for ep in episodes]
        for ep in episodes[:8]:  # a second turn: the board after a move, or the note on an invalid reply
            env.advance(ep, Reply("<move>4</move>"))
        conversations[name] += [env.observation(ep) for ep in episodes[:8] if not ep.done]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the policies run here; the results do not depend on it
    yield path, conversations
    torch.set_num_threads(threads)


def _batch(tokenizer, conversations) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded ids and attention mask, as TransformersPolicy builds them."""
    prompts = tokenizer.apply_chat_template(conversations, add_generation_prompt=True, return_dict=True)[
        "input_ids"
    ]
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[tokenizer.pad_token_id] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    return ids, mask


@pytest.mark.parametrize("padding", ["none", "left"])
@pytest.mark.parametrize("stops", ["end_of_turn", "early"])
def test_greedy_decode_equals_generate_bit_for_bit(scratch, padding, stops):
    path, conversations = scratch
    model, tokenizer = load_model(path, device="cpu"), load_tokenizer(path)
    assert llama_decode.supports(model)
    # No padding: one rendering's first turns (all one length). Left padding: both renderings and later turns mixed.
    batch = (
        conversations["compact"][:16]
        if padding == "none"
        else conversations["compact"] + conversations["grid"]
    )
    ids, mask = _batch(tokenizer, batch)
    assert bool(mask.all()) == (padding == "none")
    stop_ids = [tokenizer.eos_token_id]
    if stops == "early":
        # The untrained model never ends its turn: stop on a token it does emit, so rows finish at different steps.
        stop_ids.append(_staggered_stop(_generate(model, ids, mask, stop_ids)[0]))
    tokens, logits = _generate(model, ids, mask, stop_ids)
    fast_tokens, fast_logits = llama_decode.greedy_decode(
        model, ids, mask, MAX_NEW_TOKENS, stop_ids, tokenizer.pad_token_id, keep_logits=True
    )
    assert fast_tokens.tolist() == tokens
    assert torch.equal(fast_logits, logits)
    if stops == "early":
        ends = {
            row.index(tokenizer.pad_token_id) if tokenizer.pad_token_id in row else len(row) for row in tokens
        }
        assert min(ends) < MAX_NEW_TOKENS  # the stop was reached
        assert (
            len(ends) > 1 or len({tuple(row) for row in tokens}) == 1
        )  # at different steps, where replies differ


def _staggered_stop(rows: list[list[int]]) -> int:
    """The emitted token whose first occurrence varies most across rows: as a stop, rows end at different steps."""
    candidates = {t for row in rows for t in row}
    return max(candidates, key=lambda t: len({row.index(t) if t in row else -1 for row in rows}))


def _generate(model, ids, mask, stop_ids) -> tuple[list[list[int]], torch.Tensor]:
    """Plain `model.generate`, greedy: new tokens and raw logits per step."""
    config = GenerationConfig(
        max_new_tokens=MAX_NEW_TOKENS,
        do_sample=False,
        eos_token_id=stop_ids,
        pad_token_id=model.generation_config.pad_token_id,
        return_dict_in_generate=True,
        output_logits=True,
    )
    with torch.inference_mode():
        out = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
    return out.sequences[:, ids.shape[1] :].tolist(), torch.stack(out.logits, dim=1)


def test_policy_replies_and_logprobs_equal_the_generate_path(scratch):
    path, conversations = scratch
    batch = conversations["compact"] + conversations["grid"]
    fast, plain = (
        TransformersPolicy.from_pretrained(
            path, greedy=True, max_new_tokens=MAX_NEW_TOKENS, return_logprobs=True, fast_greedy=fast_greedy
        )
        for fast_greedy in (True, False)
    )
    for a, b in zip(fast(batch), plain(batch), strict=True):
        assert (a.completion_ids, a.content, a.extra) == (b.completion_ids, b.content, b.extra)
        assert a.logprobs == b.logprobs


def test_sampling_still_goes_through_generate(scratch, monkeypatch):
    path, conversations = scratch
    policy = TransformersPolicy.from_pretrained(path, temperature=1.0, max_new_tokens=8, seed=5)
    reference = [r.completion_ids for r in policy(conversations["compact"], seed=11)]
    monkeypatch.setattr(
        llama_decode, "greedy_decode", lambda *a, **k: pytest.fail("sampling used greedy_decode")
    )
    assert [r.completion_ids for r in policy(conversations["compact"], seed=11)] == reference
    assert [r.completion_ids for r in policy(conversations["compact"], seed=12)] != reference


def test_models_it_cannot_reproduce_go_through_generate(scratch, monkeypatch):
    path, conversations = scratch
    model = load_model(path, device="cpu")
    model.generation_config.repetition_penalty = 1.3  # a hub model's setting: it changes the logits
    assert not llama_decode.supports(model)
    eager = load_model(path, device="cpu")
    eager.set_attn_implementation("eager")
    assert not llama_decode.supports(eager)
    # Grouped-query attention (SmolLM2-135M-Instruct: 9 query heads, 3 key/value heads) takes `generate`.
    config = load_model(path, device="cpu").config.to_dict()
    assert llama_decode.supports(LlamaForCausalLM(LlamaConfig(**config)))  # the same model, fresh: supported
    gqa = LlamaForCausalLM(LlamaConfig(**{**config, "num_key_value_heads": 1}))
    assert gqa.config.num_key_value_heads < gqa.config.num_attention_heads and not llama_decode.supports(gqa)
    monkeypatch.setattr(llama_decode, "greedy_decode", lambda *a, **k: pytest.fail("used greedy_decode"))
    policy = TransformersPolicy(model, load_tokenizer(path), greedy=True, max_new_tokens=4, device="cpu")
    assert len(policy(conversations["compact"][:2])) == 2
