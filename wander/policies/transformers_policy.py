"""A local transformers model as a policy: every live conversation answered by one batched `generate` call."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch
from transformers import GenerationConfig, PreTrainedModel, PreTrainedTokenizerBase

from wander.core.policy import Conversation, Reply
from wander.policies import llama_decode
from wander.policies.precision import autocast, resolve_bf16
from wander.policies.scratch_model import IM_END, default_device, load_model, load_tokenizer


class TransformersPolicy:
    """Answers a batch of conversations with a local causal LM, returning exact prompt/completion token ids.

    Sampling is seeded: call `i` of a policy built with `seed=s` draws from a seed derived from `(s, i)`, so a run
    replays exactly. The same conversations answered in a different batch composition may sample differently.

    `completion_ids` run up to and including the end-of-turn token (`finish_reason` "stop") or stop at
    `max_new_tokens` ("length"). `logprobs` (with `return_logprobs=True`) are the log-softmax of the model's logits
    divided by `temperature` (1 when greedy), before top-p/top-k filtering: what TRL's trainers compute.
    Generation settings not set here (e.g. a hub model's repetition penalty) come from `model.generation_config`.

    Greedy calls on a plain Llama (the scratch model) skip `generate` for `llama_decode.greedy_decode`: the same
    tokens for a fraction of the CPU time. `fast_greedy=False` keeps `generate` for them too.

    `bf16` computes in bf16 autocast (the weights stay as they are); None = where the device computes bf16 in
    hardware (wander/policies/precision.py); False (the default) keeps float32's exact logprobs.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        max_new_tokens: int = 128,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        greedy: bool = False,
        seed: int = 0,
        return_logprobs: bool = False,
        max_batch_size: int | None = None,
        device: str | torch.device | None = None,
        chat_template_kwargs: dict[str, Any] | None = None,
        fast_greedy: bool = True,
        bf16: bool | None = False,
    ) -> None:
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        if max_batch_size is not None and max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1 or None, got {max_batch_size}")
        if tokenizer.pad_token_id is None:
            raise ValueError("the tokenizer has no pad token; load it with load_tokenizer() or set one")
        if device is None:
            # A model already placed (e.g. by a trainer) stays where it is; a CPU one goes to CUDA if there is one.
            device = model.device if model.device.type != "cpu" else default_device()
        self.device = torch.device(device)
        self.model = model.to(self.device)
        self.tokenizer = tokenizer
        self.max_new_tokens = max_new_tokens
        # Temperature 0 means greedy, as in the OpenAI API.
        self.greedy = greedy or temperature == 0
        self.temperature = temperature
        self.top_p = top_p
        self.top_k = top_k
        self.seed = seed
        self.return_logprobs = return_logprobs
        self.max_batch_size = max_batch_size
        self.chat_template_kwargs = chat_template_kwargs or {}
        self.fast_greedy = fast_greedy
        self.bf16 = resolve_bf16(bf16, self.device)
        self.stop_ids = _stop_token_ids(model, tokenizer)
        self.calls = 0  # sampling calls made so far; advances the seed

    @classmethod
    def from_pretrained(cls, path_or_id: str | os.PathLike, **kwargs: Any) -> TransformersPolicy:
        """Load model and tokenizer from a local path or hub id and wrap them in a policy."""
        device = kwargs.pop("device", None)
        model = load_model(path_or_id, device=device)
        return cls(model, load_tokenizer(path_or_id), device=model.device, **kwargs)

    def generation_config(self) -> GenerationConfig:
        """The generation settings of every call (stops on the end-of-turn token)."""
        sampling = (
            {} if self.greedy else {"temperature": self.temperature, "top_p": self.top_p, "top_k": self.top_k}
        )
        return GenerationConfig(
            max_new_tokens=self.max_new_tokens,
            do_sample=not self.greedy,
            eos_token_id=self.stop_ids,
            pad_token_id=self.tokenizer.pad_token_id,
            use_cache=True,
            return_dict_in_generate=True,
            output_logits=self.return_logprobs,
            **sampling,
        )

    def next_seed(self) -> int:
        """The sampling seed of the next call; derived from (seed, call index) so calls are independent."""
        return int(np.random.SeedSequence([self.seed, self.calls]).generate_state(1)[0])

    def __call__(self, conversations: list[Conversation], *, seed: int | None = None) -> list[Reply]:
        """Return the next assistant message of each conversation, in order; `seed` overrides the call's seed."""
        if not conversations:
            return []
        if seed is None:
            seed = self.next_seed()
            self.calls += 1
        prompts = self.tokenizer.apply_chat_template(
            conversations,
            add_generation_prompt=True,
            tokenize=True,
            return_dict=True,
            **self.chat_template_kwargs,
        )["input_ids"]
        size = self.max_batch_size or len(prompts)
        config = self.generation_config()
        # Fork the RNG so sampling is a function of `seed` alone and the caller's random state is left untouched.
        cuda = [self.device.index or 0] if self.device.type == "cuda" else []
        replies: list[Reply] = []
        # The model may be a trainer's: switch to eval for generation and give it back in the mode it came.
        was_training = self.model.training
        self.model.eval()
        try:
            with (
                torch.random.fork_rng(devices=cuda),
                torch.inference_mode(),
                autocast(self.bf16, self.device),
            ):
                torch.manual_seed(seed)
                for start in range(0, len(prompts), size):
                    replies.extend(self._generate(prompts[start : start + size], config))
        finally:
            self.model.train(was_training)
        return replies

    def _generate(self, prompts: list[list[int]], config: GenerationConfig) -> list[Reply]:
        """One left-padded generation over `prompts`."""
        width = max(len(p) for p in prompts)
        pad = self.tokenizer.pad_token_id
        input_ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=self.device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=self.device)
        if self.greedy and self.fast_greedy and llama_decode.supports(self.model):
            new_tokens, logits = llama_decode.greedy_decode(
                self.model,
                input_ids,
                mask,
                self.max_new_tokens,
                self.stop_ids,
                pad,
                keep_logits=self.return_logprobs,
            )
        else:
            out = self.model.generate(input_ids=input_ids, attention_mask=mask, generation_config=config)
            new_tokens = out.sequences[:, width:]
            # Raw logits, before temperature and top-p/top-k: (batch, new tokens, vocab).
            logits = torch.stack(out.logits, dim=1) if self.return_logprobs else None
        generated = new_tokens.tolist()
        if logits is not None:
            logits = logits.float()
            if not self.greedy:
                # The distribution the trainer scores (TRL divides logits by its temperature too).
                logits = logits / self.temperature
            token_logprobs = logits.log_softmax(-1).gather(-1, new_tokens[..., None]).squeeze(-1).tolist()

        replies = []
        for row, (prompt, tokens) in enumerate(zip(prompts, generated, strict=True)):
            stop = next((i for i, t in enumerate(tokens) if t in self.stop_ids), None)
            # Keep the end-of-turn token: the trainer must see the model end its turn.
            completion = tokens if stop is None else tokens[: stop + 1]
            replies.append(
                Reply(
                    content=self.tokenizer.decode(completion, skip_special_tokens=True),
                    prompt_ids=list(prompt),
                    completion_ids=completion,
                    logprobs=token_logprobs[row][: len(completion)] if self.return_logprobs else None,
                    extra={"finish_reason": "length" if stop is None else "stop"},
                )
            )
        return replies


def _stop_token_ids(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """End-of-turn ids: ChatML's `<|im_end|>` when the vocabulary has it, plus the model's and tokenizer's eos."""
    ids = []
    im_end = tokenizer.convert_tokens_to_ids(IM_END)
    if isinstance(im_end, int) and im_end != tokenizer.unk_token_id:
        ids.append(im_end)
    model_eos = model.generation_config.eos_token_id if model.generation_config is not None else None
    for eos in [tokenizer.eos_token_id, *(model_eos if isinstance(model_eos, list) else [model_eos])]:
        if eos is not None and eos not in ids:
            ids.append(eos)
    if not ids:
        raise ValueError("neither the tokenizer nor the model defines an end-of-turn token")
    return ids
