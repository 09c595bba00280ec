"""Tool-calling envs under GRPO through TRL's environment_factory."""

from __future__ import annotations

import json
import sys

import pytest
from datasets import Dataset
from transformers.utils import get_json_schema

from wander import Rubric, ToolEnv, XMLParser
from wander.core.mcp_client import McpServer
from wander.policies.scratch_model import build_tokenizer
from wander.policies.scratch_model_config import ScratchModelConfig
from wander.training import RolloutConfig, trainer_spec
from wander.training.episode_data import SPEC_KEY, dump_spec
from wander.training.tools import as_env_messages, base_system_prompt, score_sessions, session_class

from .conftest import cpu_args


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first number
        b: the second number
    """
    return a + b


def one_step_args(tmp_path, max_completion_length: int):
    """GRPO arguments for one CPU step of two groups of two."""
    from trl import GRPOConfig

    return cpu_args(
        GRPOConfig,
        str(tmp_path),
        max_steps=1,
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=max_completion_length,
    )


ADD_SERVER = """
from mcp.server.fastmcp import FastMCP

server = FastMCP("add")


@server.tool()
def add(a: int, b: int) -> str:
    \"\"\"Add two integers.\"\"\"
    return str(a + b)


server.run("stdio")
"""


def calculator(server: McpServer | None = None) -> ToolEnv:
    """The sums env with the local `add`, or with the `add` an MCP server lists and runs."""
    parser = XMLParser(("answer",), answer_field="answer")

    def correct(completion, answer, parser):
        return float(parser.parse_answer(completion) == answer)

    def tool_calls(state):
        return float(state.get("tool_calls", 0))

    rows = [
        {"prompt": f"{a} + {b}?", "answer": str(a + b), "stratum": a % 2} for a in range(4) for b in range(4)
    ]
    return ToolEnv(
        tools=[] if server else [add],
        mcp=server,
        dataset={"train": Dataset.from_list(rows)},
        rubric=Rubric([correct, tool_calls], [1.0, 0.0], parser=parser),
        parser=parser,
        system_prompt="Answer in <answer> tags.",
        max_turns=3,
    )


def test_the_env_tools_become_trl_environment_methods_run_by_the_env():
    env = calculator()
    session = session_class(env)(env)
    assert get_json_schema(session.add) == env.tool_schemas[0]
    session.reset(**{SPEC_KEY: dump_spec({"prompt": "2 + 40?", "answer": "42"})})
    assert session.add(a=2, b=40) == "42"
    assert session.add(a=2).startswith("Error: TypeError")  # errors go back to the model, as in env.evaluate
    assert session._episode.state["tool_calls"] == 2 and session._episode.state["tool_errors"] == 1
    assert base_system_prompt(env) == "Answer in <answer> tags."


def test_a_grpo_prompt_reads_token_for_token_like_the_env_protocol_sft_and_evaluation_use():
    # SFT rows and env.evaluate carry the tool protocol in the system message; under GRPO, TRL renders it from
    # `tools=` through the chat template. A scratch model trained on the first must see the same tokens in the
    # second (it did not: another tool header made the calculator's SFT model copy wrong numbers, reward 0).
    env = calculator()
    tokenizer = build_tokenizer([env.system_prompt, "2 + 40?"], ScratchModelConfig(vocab_size=300))
    session = session_class(env)(env)
    user = {"role": "user", "content": "2 + 40?"}
    as_env = [{"role": "system", "content": env.system_prompt}, user]
    as_grpo = [{"role": "system", "content": base_system_prompt(env)}, user]
    env_ids = tokenizer.apply_chat_template(
        as_env, add_generation_prompt=True, tokenize=True, return_dict=False
    )
    grpo_ids = tokenizer.apply_chat_template(
        as_grpo, tools=[session.add], add_generation_prompt=True, tokenize=True, return_dict=False
    )
    assert list(grpo_ids) == list(env_ids)
    # A call the model wrote, parsed by TRL and rendered again, is the env's text of it.
    call = '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 40}}</tool_call>'
    parsed = tokenizer.parse_response(call + "<|im_end|>", prefix="")
    rendered = tokenizer.apply_chat_template([user, parsed], tokenize=False)
    assert rendered.endswith("<|im_start|>assistant\n" + call + "<|im_end|>\n")
    assert as_env_messages([parsed]) == [{"role": "assistant", "content": call}]


def test_trl_completions_are_scored_as_env_episodes():
    env = calculator()
    session = session_class(env)(env)
    session.reset(**{SPEC_KEY: dump_spec({"prompt": "2 + 40?", "answer": "42"})})
    session.add(a=2, b=40)
    call = {"type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 40}}}
    completion = [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "name": "add", "content": "42"},
        {"role": "assistant", "content": "<answer>42</answer>"},
    ]
    [(reward, values)] = score_sessions(env, [completion], [session])
    assert reward == 1.0 and values == {"correct": 1.0, "tool_calls": 1.0}
    messages = as_env_messages(completion)
    assert json.loads(messages[0]["content"].removeprefix("<tool_call>").removesuffix("</tool_call>")) == {
        "name": "add",
        "arguments": {"a": 2, "b": 40},
    }
    assert session._episode.messages[-3:] == messages


@pytest.mark.slow
@pytest.mark.parametrize("tools", ["local", "mcp"])
def test_tool_env_composes_through_environment_factory_and_trains_a_step(tiny_model, tmp_path, tools):
    from trl import GRPOTrainer

    if tools == "mcp":  # the same tool from a server over stdio: TRL calls it through the env's session
        (tmp_path / "add_server.py").write_text(ADD_SERVER)
        env = calculator(McpServer(command=[sys.executable, str(tmp_path / "add_server.py")]))
    else:
        env = calculator()
    # In TRL's tool loop max_completion_length caps the whole completion, tool results included.
    args = one_step_args(tmp_path, max_completion_length=96)
    trainer = env >> trainer_spec(GRPOTrainer, model=tiny_model, args=args)
    assert trainer.environment_factories is not None and [t.__name__ for t in trainer.tools] == ["add"]
    assert trainer.train_dataset[0]["prompt"][0] == {"role": "system", "content": "Answer in <answer> tags."}
    tokenizer = trainer.processing_class

    def scripted(prompt_ids, *args, **kwargs):
        """Call the tool with the question's numbers, then answer with its result."""
        out = []
        for ids in prompt_ids:
            text = tokenizer.decode(ids)
            if "<|im_start|>tool" in text:
                result = text.rsplit("<|im_start|>tool\n", 1)[1].split("<|im_end|>")[0]
                reply = f"<answer>{result}</answer>"
            else:
                a, b = text.rsplit("<|im_start|>user\n", 1)[1].split("?")[0].split(" + ")
                call = {"name": "add", "arguments": {"a": int(a), "b": int(b)}}
                reply = f"<tool_call>\n{json.dumps(call)}\n</tool_call>"
            out.append(tokenizer.encode(reply) + [tokenizer.eos_token_id])
        return out, None

    trainer._generate_single_turn = scripted  # TRL's tool loop, our sessions and rubric; a scripted model
    trainer.train()
    logged = trainer.state.log_history[0]
    assert logged["tools/call_frequency"] == 1.0 and logged["tools/failure_frequency"] == 0.0
    assert logged["rewards/correct/mean"] == 1.0 and logged["rewards/tool_calls/mean"] == 1.0
    text = env >> trainer_spec(
        GRPOTrainer, model=tiny_model, args=args, rollout=RolloutConfig(tool_protocol="rollout_func")
    )
    assert text.rollout_func is not None and not text.tools
    env.close()


@pytest.mark.slow
def test_a_chat_template_without_tool_support_trains_a_tool_env_on_the_env_s_own_protocol(tmp_path):
    # SmolLM2's ChatML template renders no tools (nor calls), so TRL's tool loop refuses it. The env's text
    # protocol (the pipeline's grpo.tool_protocol) needs nothing of the template: the prompt is the one SFT trained
    # on, tool schemas in the system message, and a step trains.
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
    from trl import GRPOTrainer

    from wander.policies.packaged_models import packaged_file

    path = packaged_file("smollm2-135m-instruct")
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    small = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tokenizer), tie_word_embeddings=True, **small))
    env = calculator()
    args = one_step_args(tmp_path, max_completion_length=8)
    with pytest.raises(ValueError, match="does not support tool calling"):
        env >> trainer_spec(GRPOTrainer, model=model, processing_class=tokenizer, args=args)
    rollout = RolloutConfig(tool_protocol="rollout_func")
    trainer = env >> trainer_spec(
        GRPOTrainer, model=model, processing_class=tokenizer, args=args, rollout=rollout
    )
    assert not trainer.tools
    prompts = []
    generate = trainer._generate_single_turn

    def recorded(prompt_ids, *args, **kwargs):
        prompts.extend(prompt_ids)
        return generate(prompt_ids, *args, **kwargs)

    trainer._generate_single_turn = recorded
    trainer.train()
    assert trainer.state.global_step == 1 and "rewards/correct/mean" in trainer.state.log_history[0]
    # The model was asked with the env's system prompt, tool schemas included, as SFT rows and evaluation carry it.
    first = tokenizer.decode(prompts[0])
    assert env.system_prompt in first and '"name": "add"' in env.system_prompt
    assert first.endswith("<|im_start|>assistant\n")
