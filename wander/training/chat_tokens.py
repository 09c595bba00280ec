"""Token ids of conversations under a chat template; a leaf module that every rollout may import without a cycle."""

from __future__ import annotations

from typing import Any

from wander.core.policy import Message


def render_ids(
    tokenizer: Any, messages: list[Message], add_generation_prompt: bool, **template_kwargs: Any
) -> list[int]:
    """Token ids of a conversation under the chat template."""
    out = tokenizer.apply_chat_template(
        messages,
        add_generation_prompt=add_generation_prompt,
        tokenize=True,
        return_dict=True,
        **template_kwargs,
    )
    ids = out["input_ids"]
    return list(ids[0] if ids and isinstance(ids[0], list) else ids)


def trainer_template_kwargs(trainer: Any) -> dict[str, Any]:
    """The chat-template arguments a TRL trainer renders with: its `chat_template_kwargs`, and its own template."""
    kwargs = dict(trainer.chat_template_kwargs)
    if trainer.chat_template is not None:
        kwargs["chat_template"] = trainer.chat_template
    return kwargs
