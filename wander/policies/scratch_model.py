"""The default policy model, built offline: a byte-level BPE tokenizer trained on local texts and a tiny Llama.

Also the one way the project loads any causal LM (scratch, checkpoint, hub id) for generation, and reads the
longest sequence a saved one takes (`context_length`).
"""

from __future__ import annotations

import itertools
import json
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    GenerationConfig,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    PreTrainedTokenizerFast,
)

from wander.core.atomic_io import atomic_dir
from wander.core.tool_env import TOOL_PROMPT
from wander.policies.scratch_model_config import ScratchModelConfig

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"  # end of turn: the eos token, generation stops on it
PAD = "<|pad|>"
SPECIAL_TOKENS = [IM_START, IM_END, PAD]

# ChatML. The assistant turn, its `<|im_end|>` included, sits inside {% generation %} so TRL's
# assistant_only_loss trains the model to end its turns. Tools render as the env's own text protocol
# (`ToolEnv`: its system prompt, then TOOL_PROMPT with one JSON schema a line; a call is
# `<tool_call>{json}</tool_call>`), so a prompt TRL renders from `tools=` under GRPO reads token for token like
# the SFT data and the evaluation, which carry the protocol in the system message; TRL's response parser for
# Qwen/Hermes reads the calls back. Every message renders the same whatever follows it (prefix-preserving),
# which multi-turn GRPO relies on.
_TOOLS_HEAD = TOOL_PROMPT.format(schemas="\0").split("\0")[0]
CHAT_TEMPLATE = (
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}"
    "{{- " + json.dumps(_TOOLS_HEAD) + " }}"
    "{%- for tool in tools %}{%- if not loop.first %}{{- '\\n' }}{%- endif %}{{- tool | tojson }}{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'system' and loop.first and tools %}"
    "{%- elif message.role == 'assistant' %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- generation %}"
    "{%- if message.content %}{{- message.content }}{%- endif %}"
    "{%- for tool_call in message.tool_calls or [] %}"
    "{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}"
    "{%- if message.content or not loop.first %}{{- '\\n' }}{%- endif %}"
    "{{- '<tool_call>{\"name\": ' + (tool_call.name | tojson) + ', \"arguments\": ' }}"
    "{%- if tool_call.arguments is string %}{{- tool_call.arguments }}"
    "{%- else %}{{- tool_call.arguments | tojson }}{%- endif %}"
    "{{- '}</tool_call>' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>' }}"
    "{%- endgeneration %}"
    "{{- '\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

# transformers' response parser (tokenizer.parse_response, used by TRL for tool calls), matching the
# template above; the same fields as TRL's Qwen3 template minus the <think> block we never render.
RESPONSE_TEMPLATE = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "tool_calls": {
            "open": "<tool_call>",
            "close_pattern": r"</tool_call>\s*",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close_pattern": r"<\|im_end\|>\s*", "content": "text"},
    },
}

# The role headers never occur in message contents; train on them too so each is one token.
_ROLES = ["system", "user", "assistant", "tool"]


def default_device() -> torch.device:
    """CUDA when available, else CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def build_tokenizer(
    texts: Iterable[str], config: ScratchModelConfig | None = None, whole_tokens: Sequence[str] = ()
) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE tokenizer on `texts`, with the ChatML chat template and special tokens.

    `whole_tokens` (an environment's reply tags such as `<move>`) are one token each, matched before the byte-level
    split, which would cut `</move>` into `<`, `/`, `move`, `>`: measured, a reply `<move>4</move>` then takes 4
    generated tokens instead of 9.
    """
    config = config or ScratchModelConfig()
    tokenizer = Tokenizer(models.BPE())
    # Byte-level without a prefix space: every string has a tokenization and decodes back to itself.
    steps: list[pre_tokenizers.PreTokenizer] = []
    if config.split_digits:
        steps.append(pre_tokenizers.Digits(individual_digits=True))
    if config.single_char_tokens:
        chars = Regex("[" + "".join(re.escape(c) for c in config.single_char_tokens) + "]")
        steps.append(pre_tokenizers.Split(chars, behavior="isolated"))
    steps.append(pre_tokenizers.ByteLevel(add_prefix_space=False))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(steps)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=config.vocab_size,
        min_frequency=config.min_frequency,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    scaffold = [f"{role}\n" for role in _ROLES] * max(config.min_frequency, 1)
    tokenizer.train_from_iterator(itertools.chain(texts, scaffold), trainer=trainer)
    tokenizer.add_tokens([AddedToken(t, normalized=False, single_word=False) for t in whole_tokens])

    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token=IM_END,
        pad_token=PAD,
        additional_special_tokens=[IM_START],
        model_max_length=config.max_position_embeddings,
        clean_up_tokenization_spaces=False,
        padding_side="right",
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.response_template = RESPONSE_TEMPLATE
    return fast


def build_model(
    tokenizer: PreTrainedTokenizerBase, config: ScratchModelConfig | None = None
) -> LlamaForCausalLM:
    """A randomly initialised LlamaForCausalLM sized by `config`, seeded, with eos/pad from `tokenizer`."""
    config = config or ScratchModelConfig()
    # Llama, not Qwen2: with model_type qwen2, AutoTokenizer swaps in Qwen2Tokenizer and drops our decoder.
    model_config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden_size,
        num_hidden_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads,
        num_key_value_heads=config.num_key_value_heads,
        intermediate_size=config.intermediate_size,
        max_position_embeddings=config.max_position_embeddings,
        tie_word_embeddings=config.tie_word_embeddings,
        rope_theta=config.rope_theta,
        rms_norm_eps=config.rms_norm_eps,
        initializer_range=config.initializer_range,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        use_cache=True,
    )
    # Seed a forked RNG so building a model neither depends on nor disturbs the caller's random state.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        model = LlamaForCausalLM(model_config)
    model.generation_config = GenerationConfig(
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        use_cache=True,
    )
    return model


def build_scratch_model(
    texts: Iterable[str],
    out_dir: str | os.PathLike,
    config: ScratchModelConfig | None = None,
    whole_tokens: Sequence[str] = (),
) -> Path:
    """Build tokenizer and model from `texts` and save both to `out_dir` atomically; return `out_dir`."""
    config = config or ScratchModelConfig()
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(texts, config, whole_tokens)
    model = build_model(tokenizer, config)

    # atomic_dir clears what a killed earlier build left next to it (`.base.tmp-*`), then swaps the folder in whole.
    with atomic_dir(out_dir) as tmp:
        tokenizer.save_pretrained(tmp)
        model.save_pretrained(tmp)
        (tmp / "scratch_model_config.json").write_text(json.dumps(config.to_dict(), indent=2) + "\n")
    return out_dir


def load_tokenizer(path_or_id: str | os.PathLike) -> PreTrainedTokenizerBase:
    """Load any tokenizer (scratch, checkpoint or hub id) through AutoTokenizer, with a pad token set."""
    tokenizer = AutoTokenizer.from_pretrained(str(path_or_id))
    if tokenizer.pad_token is None:
        # Hub models often ship without one; the stop logic never relies on pad, so eos is safe here.
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def context_length(model_dir: str | Path) -> int:
    """The longest sequence the model at `model_dir` takes, from its config (else its tokenizer)."""
    config = json.loads((Path(model_dir) / "config.json").read_text())
    if config.get("max_position_embeddings"):
        return int(config["max_position_embeddings"])
    return int(load_tokenizer(model_dir).model_max_length)


def load_model(
    path_or_id: str | os.PathLike,
    device: str | torch.device | None = None,
    dtype: torch.dtype = torch.float32,
) -> PreTrainedModel:
    """Load any causal LM through AutoModelForCausalLM, ready for generation on `device` (default: CUDA if any)."""
    model = AutoModelForCausalLM.from_pretrained(str(path_or_id), dtype=dtype)
    # TRL checkpoints are saved with use_cache=False (it clashes with gradient checkpointing).
    model.config.use_cache = True
    model.generation_config.use_cache = True
    model.to(torch.device(device) if device is not None else default_device())
    model.eval()
    return model
