"""XMLParser: defined results for malformed output, latest message only, fuzzed."""

from hypothesis import given, settings
from hypothesis import strategies as st

from wander import XMLParser

parser = XMLParser(("think", "move"), answer_field="move")


def test_well_formed_message():
    assert parser.parse("<think>center</think>\n<move>4</move>") == {"think": "center", "move": "4"}


def test_malformed_tags_give_defined_results():
    assert parser.parse("I play 4")["move"] is None  # missing
    assert parser.parse("<move>4")["move"] is None  # unclosed
    assert parser.parse("<move>  </move>")["move"] is None  # empty
    assert parser.parse("<move>1</move> then <move>2</move>")["move"] == "2"  # duplicated: last wins
    assert parser.parse("<move><move>3</move></move>")["move"] == "3"  # nested: innermost
    assert parser.parse("<move>5 <move>6</move>")["move"] == "6"  # unclosed opener before a closed one
    assert parser.parse(None) == {"think": None, "move": None}


def test_only_the_latest_assistant_message_is_parsed():
    messages = [
        {"role": "assistant", "content": "<move>1</move>"},
        {"role": "user", "content": "<move>7</move>"},
        {"role": "assistant", "content": "no idea"},
    ]
    assert parser.parse_answer(messages) is None  # never falls back to the earlier 1
    assert parser.parse_answer(messages[:2]) == "1"
    assert parser.parse_answer([]) is None


def test_format_reward_scores_think_plus_answer():
    good = "<think>block</think>\n<move>2</move>"
    assert parser.is_well_formed(good) and parser.is_well_formed("<move>2</move>")
    for bad in (
        "<think>x</think>",  # no answer
        "<move>2</move><move>3</move>",  # duplicated
        "<think>x<move>2</move></think>",  # nested
        "<move>2</move><think>x</think>",  # out of order
        "<think></think><move>2</move>",  # empty think
        "sure! <move>2</move>",  # stray text
        "<move>2",  # unclosed
    ):
        assert not parser.is_well_formed(bad), bad
    completion = [
        {"role": "assistant", "content": good},
        {"role": "user", "content": "board"},
        {"role": "assistant", "content": "2"},
    ]
    assert parser.format_reward(completion) == 0.5
    assert parser.format_reward([]) == 0.0


tag_soup = st.lists(
    st.sampled_from(["<think>", "</think>", "<move>", "</move>", "<move", "4", " ", "\n", "x", "<", ">", "/"])
    | st.text(max_size=5),
    max_size=30,
).map("".join)


@settings(max_examples=500, deadline=None)
@given(text=tag_soup)
def test_no_input_raises(text):
    parsed = parser.parse(text)
    assert set(parsed) == {"think", "move"}
    assert all(v is None or (isinstance(v, str) and v == v.strip() and v) for v in parsed.values())
    assert isinstance(parser.is_well_formed(text), bool)
    assert 0.0 <= parser.format_reward([{"role": "assistant", "content": text}]) <= 1.0
    parser.parse_answer([{"role": "assistant", "content": text}])


@settings(max_examples=200, deadline=None)
@given(
    content=st.one_of(st.none(), st.integers(), st.text()), role=st.sampled_from(["assistant", "user", None])
)
def test_odd_messages_do_not_raise(content, role):
    answer = parser.parse_answer([{"role": role, "content": content}])
    assert answer is None or (role == "assistant" and isinstance(content, str) and answer in content)


@settings(max_examples=500, deadline=None)
@given(text=tag_soup)
def test_single_tag_shortcut_agrees_with_the_pattern(text):
    # parse() skips the regex when a tag opens once; the documented rule (last complete, innermost) is the
    # regex, so both must agree on every text.
    for field, pattern in parser._patterns.items():
        matches = [m.group(1).strip() for m in pattern.finditer(text)]
        assert parser.parse(text)[field] == ((matches[-1] or None) if matches else None)


@settings(max_examples=200, deadline=None)
@given(completion=st.one_of(st.none(), st.integers(), st.floats(), st.dictionaries(st.text(), st.text())))
def test_parse_answer_of_anything_is_none(completion):
    # The parser promises never to raise: not even on a completion that is not text or messages at all.
    assert parser.parse_answer(completion) is None
    assert parser.format_reward(completion) == 0.0
