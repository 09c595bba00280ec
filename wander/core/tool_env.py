"""Tool-calling environments: Python functions become tools the model can call."""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable
from typing import Any

from wander.core.environment import Environment
from wander.core.parser import last_assistant_content
from wander.core.policy import Message

TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)

TOOL_PROMPT = """You can call these tools. To call one, answer with
<tool_call>{{"name": "<tool name>", "arguments": {{<arguments as JSON>}}}}</tool_call>
Each result comes back in a tool message. When you have the final answer, reply without a tool call.

Tools:
{schemas}"""


def tool_schema(func: Callable) -> dict:
    """OpenAI-style JSON schema of a typed, Google-style-docstring function."""
    from transformers.utils import get_json_schema  # lazy: transformers costs ~1 s to import

    try:
        return get_json_schema(func)
    except Exception as exc:
        raise ValueError(
            f"tool {getattr(func, '__name__', func)!r} cannot become a schema ({exc}); give it type hints "
            "and a docstring with an 'Args:' section describing every argument"
        ) from exc


class ToolEnv(Environment):
    """The model calls tools in `<tool_call>` JSON; results (or errors) return as tool messages.

    The episode ends when the model answers without a tool call, or at `max_turns`.
    """

    def __init__(self, *, tools: list[Callable], system_prompt: str = "", max_turns: int = 10, **kwargs: Any):
        self.tools = {t.__name__: t for t in tools}
        self.tool_schemas = [tool_schema(t) for t in tools]
        schemas = "\n".join(json.dumps(s) for s in self.tool_schemas)
        prompt = TOOL_PROMPT.format(schemas=schemas)
        super().__init__(
            system_prompt=f"{system_prompt}\n\n{prompt}" if system_prompt else prompt,
            max_turns=max_turns,
            **kwargs,
        )

    def env_response(self, messages: list[Message], state: dict) -> list[Message]:
        """Run every tool call of the latest model turn; no call means the model has answered."""
        calls = TOOL_CALL.findall(last_assistant_content(messages) or "")
        if not calls:
            state["done"] = True
            return []
        state["tool_calls"] = state.get("tool_calls", 0) + len(calls)
        return [{"role": "tool", "content": self.call_tool(raw, state)} for raw in calls]

    def call_tool(self, raw: str, state: dict) -> str:
        """Execute one tool call; any failure becomes an error message for the model."""
        try:
            call = json.loads(raw)
            name, arguments = call["name"], call.get("arguments", {})
            if name not in self.tools:
                raise KeyError(f"unknown tool {name!r}; available: {sorted(self.tools)}")
            if not isinstance(arguments, dict):
                raise TypeError("arguments must be a JSON object")
            result = self.tools[name](**arguments)
            if inspect.isawaitable(result):
                from wander.core.rubric import _run

                result = _run(result)
            return result if isinstance(result, str) else json.dumps(result)
        except Exception as exc:  # noqa: BLE001 - tool errors go back to the model, not up the stack
            state["tool_errors"] = state.get("tool_errors", 0) + 1
            return f"Error: {type(exc).__name__}: {exc}"
