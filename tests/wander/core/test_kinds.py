"""The three kinds of environment, proven with toy tasks: single-turn, multi-turn, tool-calling."""

from datasets import Dataset

from wander import Environment, Reply, Rubric, SingleTurnEnv, ToolEnv, XMLParser
from wander.core.sampling import StratifiedSampler, stratified_order


class ReverserPolicy:
    """Answers with the reversed user text, in tags; wrong on purpose for 'abc'."""

    def __init__(self):
        self.batches = []

    def __call__(self, conversations):
        self.batches.append(len(conversations))
        out = []
        for conv in conversations:
            text = conv[-1]["content"]
            out.append(Reply("<answer>nope</answer>" if text == "abc" else f"<answer>{text[::-1]}</answer>"))
        return out


def reverse_env() -> SingleTurnEnv:
    parser = XMLParser(("answer",), answer_field="answer")

    def exact(completion, answer, parser):
        return float(parser.parse_answer(completion) == answer)

    rows = [{"prompt": w, "answer": w[::-1]} for w in ("hello", "abc", "wander", "xyz")]
    return SingleTurnEnv(
        dataset={"eval": Dataset.from_list(rows)},
        rubric=Rubric([exact, parser.format_reward], [1.0, 0.0], parser=parser),
        parser=parser,
        system_prompt="Reverse the text.",
    )


def test_single_turn_env_scores_each_episode_and_aggregates_with_intervals():
    policy = ReverserPolicy()
    result = reverse_env()(policy, split="eval")
    assert policy.batches == [4]  # one batch for all episodes
    assert [ep.values["exact"] for ep in result.trajectories] == [1.0, 0.0, 1.0, 1.0]
    assert result.metrics["exact"]["mean"] == 0.75
    assert 0 < result.metrics["exact"]["ci_low"] < 0.75 < result.metrics["exact"]["ci_high"] <= 1
    assert [m["role"] for m in result.trajectories[0].messages] == ["system", "user", "assistant"]


class CountdownEnv(Environment):
    """Multi-turn: the env counts down from the spec's start; the episode ends at zero."""

    def setup_state(self, spec):
        return {"left": spec["start"]}

    def initial_messages(self, spec, state):
        return [{"role": "user", "content": str(state["left"])}]

    def env_response(self, messages, state):
        state["left"] -= 1
        if state["left"] == 0:
            state["done"] = True
            return []
        if state["left"] == 99:
            raise RuntimeError("env bug")
        return [{"role": "user", "content": str(state["left"])}]


def test_multi_turn_batches_live_episodes_and_respects_max_turns():
    env = CountdownEnv(rubric=Rubric([lambda state: state["turn"]], [1.0]), max_turns=4)
    policy = ReverserPolicy()
    episodes = env.rollout(policy, [{"start": 1}, {"start": 3}, {"start": 10}, {"start": 100}])
    assert policy.batches == [4, 2, 2, 1]  # finished (and errored) episodes leave the batch
    assert [ep.state["turn"] for ep in episodes] == [1, 3, 4, 1]
    assert episodes[3].error == "env_response: RuntimeError: env bug" and episodes[3].reward == 0.0
    assert [ep.reward for ep in episodes[:3]] == [1.0, 3.0, 4.0]


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first number
        b: the second number
    """
    return a + b


class CalculatorPolicy:
    """Calls the tool (badly first, then well), then answers with the result."""

    def __call__(self, conversations):
        replies = []
        for conv in conversations:
            tools = [m for m in conv if m["role"] == "tool"]
            if not tools:
                replies.append(Reply('<tool_call>{"name": "add", "arguments": {"a": 2}}</tool_call>'))
            elif len(tools) == 1:
                replies.append(
                    Reply('<tool_call>{"name": "add", "arguments": {"a": 2, "b": 40}}</tool_call>')
                )
            else:
                replies.append(Reply(f"<answer>{tools[-1]['content']}</answer>"))
        return replies


def test_tool_env_turns_functions_into_tools_and_returns_errors_as_messages():
    parser = XMLParser(("answer",), answer_field="answer")

    def correct(completion, answer, parser):
        return float(parser.parse_answer(completion) == answer)

    env = ToolEnv(
        tools=[add],
        dataset={"eval": Dataset.from_list([{"prompt": "2 + 40?", "answer": "42"}])},
        rubric=Rubric([correct], [1.0], parser=parser),
        parser=parser,
    )
    assert env.tool_schemas[0]["function"]["parameters"]["required"] == ["a", "b"]
    assert '"name": "add"' in env.system_prompt
    [ep] = env.evaluate(CalculatorPolicy()).trajectories
    tool_messages = [m["content"] for m in ep.messages if m["role"] == "tool"]
    assert tool_messages[0].startswith("Error: TypeError") and tool_messages[1] == "42"
    assert ep.reward == 1.0 and ep.state["tool_errors"] == 1 and ep.state["tool_calls"] == 2


def test_stratified_order_balances_every_window():
    strata = [0] * 10 + [1] * 10 + [2] * 10
    order = stratified_order(strata, seed=3)
    assert sorted(order) == list(range(30))
    for i in range(0, 30, 3):
        assert sorted(strata[j] for j in order[i : i + 3]) == [0, 1, 2]
    sampler = StratifiedSampler(strata, seed=3)
    assert list(sampler) == order and list(sampler) != order  # a new epoch reshuffles
    assert stratified_order(strata, seed=3) == order
