"""The scratch model: tokenizer trained offline, chat template, tiny Llama, save and reload."""

from __future__ import annotations

import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers.pre_tokenizers import ByteLevel
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM
from trl.chat_template_utils import is_chat_template_prefix_preserving, supports_tool_calling

import wander
from wander.core.tool_env import TOOL_PROMPT
from wander.policies.scratch_model import (
    IM_END,
    IM_START,
    PAD,
    build_model,
    build_scratch_model,
    build_tokenizer,
    load_model,
    load_tokenizer,
)
from wander.policies.scratch_model_config import ScratchModelConfig

TEXTS = [
    "You play X. Board:\n X | . | O\n---+---+---\n . | X | .\n---+---+---\n O | . | .",
    "<think>Cell 8 completes my line and wins.</think>\n<move>8</move>",
    "Invalid: use <move>N</move> with N in 0-8.",
    "  indented\tand\ttabbed  \n\n\ntrailing spaces   ",
]
VARIED = [
    "",
    " ",
    "\n",
    "hello world",
    "  two leading spaces",
    "trailing\n\n",
    "<move>4</move><think>why</think>",
    "digits 0123456789 and 3.14159 and -42",
    "tabs\tand\r\nwindows newlines",
    "unicode: café, naïve, 日本語, 🙂👍, Ω≈ç√",
    "never seen in training: zqxjkv QQQ ~~~ {}[]|\\",
    f"special tokens inline: {IM_START}user\nhi{IM_END}",
]
CONVERSATION = [
    {"role": "system", "content": "You play tic-tac-toe."},
    {"role": "user", "content": "Your move.\n . | . | ."},
    {"role": "assistant", "content": "<think>center</think>\n<move>4</move>"},
    {"role": "user", "content": "Opponent played 0."},
    {"role": "assistant", "content": "<move>8</move>"},
]
SMALL = ScratchModelConfig(vocab_size=400, num_hidden_layers=2, seed=1)


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer(TEXTS * 3, SMALL)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    return build_scratch_model(TEXTS * 3, tmp_path_factory.mktemp("scratch") / "model", SMALL)


def round_trip(tokenizer, text: str) -> str:
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return tokenizer.decode(ids, skip_special_tokens=False)


# ----- tokenizer -----


def test_tokenizer_has_no_unknown_token_and_every_byte(tokenizer):
    assert tokenizer.unk_token is None
    vocab = tokenizer.get_vocab()
    # The 256 byte symbols of byte-level BPE: any string has a tokenization.
    assert set(ByteLevel.alphabet()) <= set(vocab)
    assert len(tokenizer) <= SMALL.vocab_size


@pytest.mark.parametrize("text", VARIED)
def test_tokenizer_round_trips_exactly(tokenizer, text):
    assert round_trip(tokenizer, text) == text


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=60))
def test_tokenizer_round_trips_any_text(tokenizer, text):
    assert round_trip(tokenizer, text) == text


def test_special_tokens_are_single_distinct_ids(tokenizer):
    ids = [tokenizer.convert_tokens_to_ids(t) for t in (IM_START, IM_END, PAD)]
    assert len(set(ids)) == 3
    assert tokenizer.eos_token == IM_END and tokenizer.eos_token_id == ids[1]
    assert tokenizer.pad_token == PAD and tokenizer.pad_token_id == ids[2]
    assert tokenizer(f"{IM_START}x{IM_END}", add_special_tokens=False)["input_ids"][0] == ids[0]
    assert (
        tokenizer("abc", add_special_tokens=True)["input_ids"]
        == tokenizer("abc", add_special_tokens=False)["input_ids"]
    )


def test_digits_are_single_tokens(tokenizer):
    ids = tokenizer("moves 012345678", add_special_tokens=False)["input_ids"]
    tokens = tokenizer.convert_ids_to_tokens(ids)
    assert [t for t in tokens if any(c.isdigit() for c in t)] == list("012345678")


def test_tokenizer_is_deterministic():
    a = build_tokenizer(TEXTS, SMALL)
    b = build_tokenizer(TEXTS, SMALL)
    assert a.get_vocab() == b.get_vocab()


# ----- chat template -----


def test_chat_template_renders_chatml(tokenizer):
    messages = [*CONVERSATION[:3], {"role": "tool", "content": "42"}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == (
        "<|im_start|>system\nYou play tic-tac-toe.<|im_end|>\n"
        "<|im_start|>user\nYour move.\n . | . | .<|im_end|>\n"
        "<|im_start|>assistant\n<think>center</think>\n<move>4</move><|im_end|>\n"
        "<|im_start|>tool\n42<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    no_prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)
    assert text == no_prompt + "<|im_start|>assistant\n"


def test_assistant_mask_covers_assistant_content_and_end_of_turn(tokenizer):
    out = tokenizer.apply_chat_template(CONVERSATION, return_dict=True, return_assistant_tokens_mask=True)
    ids, mask = out["input_ids"], out["assistant_masks"]
    assert len(ids) == len(mask)
    masked = tokenizer.decode([i for i, m in zip(ids, mask, strict=True) if m], skip_special_tokens=False)
    assert masked == "<think>center</think>\n<move>4</move><|im_end|><move>8</move><|im_end|>"
    # Each masked run ends exactly on an end-of-turn token, so SFT teaches the model to stop.
    runs_end = [i for i in range(len(mask)) if mask[i] and (i + 1 == len(mask) or not mask[i + 1])]
    assert [ids[i] for i in runs_end] == [tokenizer.eos_token_id] * 2


def test_chat_template_supports_tool_calling_for_trl(tokenizer):
    assert supports_tool_calling(tokenizer)
    assert is_chat_template_prefix_preserving(tokenizer)
    call = {"type": "function", "function": {"name": "play", "arguments": {"cell": 4}}}
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "name": "play", "content": "ok"},
    ]
    tools = [{"type": "function", "function": {"name": "play", "parameters": {"type": "object"}}}]
    text = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False)
    # The tools read as a ToolEnv's own text protocol, a call as the env writes it (json.dumps, one line).
    assert text.startswith("<|im_start|>system\n" + TOOL_PROMPT.format(schemas=json.dumps(tools[0])) + IM_END)
    reply = '<tool_call>{"name": "play", "arguments": {"cell": 4}}</tool_call><|im_end|>'
    assert reply in text
    parsed = tokenizer.parse_response(reply, prefix="")
    assert parsed["tool_calls"] == [call]
    assert tokenizer.parse_response("<move>4</move><|im_end|>", prefix="") == {
        "role": "assistant",
        "content": "<move>4</move>",
    }


# ----- model -----


def test_build_model_is_a_seeded_tiny_llama(tokenizer):
    before = torch.get_rng_state()
    model = build_model(tokenizer, SMALL)
    assert torch.equal(torch.get_rng_state(), before)  # the caller's random state is untouched
    assert isinstance(model, LlamaForCausalLM) and model.config.model_type == "llama"
    assert model.config.vocab_size == len(tokenizer)
    assert model.config.eos_token_id == tokenizer.eos_token_id
    assert model.config.pad_token_id == tokenizer.pad_token_id
    assert model.generation_config.eos_token_id == tokenizer.eos_token_id
    assert model.config.use_cache is True
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()

    same = build_model(tokenizer, SMALL)
    other = build_model(tokenizer, ScratchModelConfig(vocab_size=400, num_hidden_layers=2, seed=2))
    weights = model.state_dict()
    assert all(torch.equal(weights[k], v) for k, v in same.state_dict().items())
    assert not all(torch.equal(weights[k], v) for k, v in other.state_dict().items())


def test_default_config_has_about_a_million_parameters(tokenizer):
    model = build_model(tokenizer, ScratchModelConfig())
    n = sum(p.numel() for p in model.parameters())
    assert 1.0e6 < n < 1.3e6


def test_config_rejects_inconsistent_shapes():
    with pytest.raises(ValueError, match="num_attention_heads"):
        ScratchModelConfig(hidden_size=130)
    with pytest.raises(ValueError, match="num_key_value_heads"):
        ScratchModelConfig(num_key_value_heads=3)
    with pytest.raises(ValueError, match="vocab_size"):
        ScratchModelConfig(vocab_size=100)


# ----- save and reload -----


def test_saved_model_reloads_with_auto_classes_and_generates(saved, tokenizer):
    assert json.loads((saved / "scratch_model_config.json").read_text()) == SMALL.to_dict()
    auto_tokenizer = AutoTokenizer.from_pretrained(saved)
    auto_model = AutoModelForCausalLM.from_pretrained(saved)
    assert isinstance(auto_model, LlamaForCausalLM)
    for text in VARIED:
        ids = auto_tokenizer(text, add_special_tokens=False)["input_ids"]
        assert ids == tokenizer(text, add_special_tokens=False)["input_ids"]
        assert auto_tokenizer.decode(ids) == text
    assert auto_tokenizer.chat_template == tokenizer.chat_template
    assert auto_tokenizer.eos_token == IM_END and auto_tokenizer.pad_token == PAD

    prompt = auto_tokenizer.apply_chat_template(
        CONVERSATION[:2], add_generation_prompt=True, return_tensors="pt"
    )
    n = prompt["input_ids"].shape[1]
    out = auto_model.generate(**prompt, max_new_tokens=5, do_sample=False)
    assert torch.equal(out[0, :n], prompt["input_ids"][0])
    assert n < out.shape[1] <= n + 5


def test_load_model_and_tokenizer(saved):
    model = load_model(saved, device="cpu")
    tokenizer = load_tokenizer(saved)
    assert isinstance(model, LlamaForCausalLM) and not model.training
    assert model.device.type == "cpu" and model.dtype == torch.float32
    assert tokenizer.pad_token == PAD


def test_load_model_restores_use_cache(saved, tmp_path):
    # TRL checkpoints are saved with use_cache=False.
    model = AutoModelForCausalLM.from_pretrained(saved)
    model.config.use_cache = False
    model.save_pretrained(tmp_path / "ckpt")
    assert json.loads((tmp_path / "ckpt" / "config.json").read_text())["use_cache"] is False
    assert load_model(tmp_path / "ckpt").config.use_cache is True


def test_build_scratch_model_replaces_atomically(tmp_path):
    out = tmp_path / "model"
    build_scratch_model(TEXTS, out, SMALL)
    first = (out / "model.safetensors").read_bytes()
    (out / "stale.txt").write_text("from an older build")
    assert build_scratch_model(TEXTS, out, SMALL) == out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]  # no temp or backup dirs left behind
    assert not (out / "stale.txt").exists()
    assert (out / "model.safetensors").read_bytes() == first  # same texts and seed, same bytes


# ----- the tic-tac-toe corpus -----


@pytest.mark.slow
def test_tokenizer_from_tictactoe_corpus_round_trips_every_string():

    env = wander.load_environment("tictactoe")
    corpus = sorted(set(env.corpus()))
    assert len(corpus) > 1000
    tokenizer = build_tokenizer(corpus, ScratchModelConfig())
    backend = tokenizer.backend_tokenizer
    encodings = backend.encode_batch(corpus, add_special_tokens=False)
    ids = [e.ids for e in encodings]
    special = set(tokenizer.all_special_ids)
    assert all(0 <= i < len(tokenizer) and i not in special for row in ids for i in row)
    assert backend.decode_batch(ids, skip_special_tokens=False) == corpus
    # Every board cell and row separator is its own token, whatever BPE merged from the corpus around it.
    board = backend.encode("X.O/.X./...\nmoves 135678", add_special_tokens=False)
    assert board.tokens[:11] == ["X", ".", "O", "/", ".", "X", ".", "/", ".", ".", "."]


def test_single_char_tokens_can_be_turned_off():
    texts = ["X.O/.X./..."] * 50
    merged = build_tokenizer(texts, ScratchModelConfig(single_char_tokens=""))
    split = build_tokenizer(texts, ScratchModelConfig())
    assert len(merged.tokenize(texts[0])) < 11 == len(split.tokenize(texts[0]))


def test_whole_tokens_make_a_reply_four_tokens_and_decode_back():
    texts = ["<move>4</move>", "<think>Corner</think>\n<move>0</move>"] * 50
    plain = build_tokenizer(texts, ScratchModelConfig())
    tags = ("<think>", "</think>", "<move>", "</move>")
    tokenizer = build_tokenizer(texts, ScratchModelConfig(), whole_tokens=tags)
    assert len(tokenizer) == len(plain) + 4
    reply = "<move>4</move><|im_end|>"
    assert tokenizer.tokenize(reply) == ["<move>", "4", "</move>", "<|im_end|>"]
    assert len(plain.tokenize(reply)) == 9  # the byte-level split cuts each tag into pieces
    # Inside other text too, and decoding (special tokens skipped, as the policies do) gives the text back.
    text = "a</move>b<move>7"
    ids = tokenizer.encode(text)
    assert [tokenizer.decode([i]) for i in ids][1:4] == ["</move>", "b", "<move>"]
    assert tokenizer.decode(ids, skip_special_tokens=True) == text


def test_a_build_killed_midway_leaves_debris_the_next_build_clears(tmp_path):
    # SIGKILL while the model folder is written: its temporary stays; the next build removes it (issue 44).
    import signal
    import subprocess
    import sys

    from wander.core.atomic_io import TEMP_NAME

    out = tmp_path / "base"
    code = (
        "import os, signal, sys\n"
        "import transformers\n"
        "from wander.policies.scratch_model import build_scratch_model\n"
        "from wander.policies.scratch_model_config import ScratchModelConfig\n"
        "def die(self, *args, **kwargs): os.kill(os.getpid(), signal.SIGKILL)\n"
        "transformers.PreTrainedModel.save_pretrained = die\n"
        f"build_scratch_model({TEXTS!r}, sys.argv[1], ScratchModelConfig(**{SMALL.to_dict()!r}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    debris = [p.name for p in tmp_path.iterdir() if TEMP_NAME.fullmatch(p.name)]
    assert len(debris) == 1 and not out.exists()
    build_scratch_model(TEXTS, out, SMALL)
    assert (out / "config.json").is_file()
    assert [p.name for p in tmp_path.iterdir()] == ["base"]
