"""Capabilities are protocols an env opts into: the base class has none, the code that needs one names it."""

from __future__ import annotations

import pytest

from wander import Environment, load_environment
from wander.core.capabilities import (
    Augmentation,
    BestOutcomes,
    CandidateReplies,
    DecisionTree,
    ExactEvaluation,
    ExpectedOutcomes,
    LosingLines,
    MissingCapability,
    WorstCase,
    require,
)

CAPABILITIES = (
    ExactEvaluation, WorstCase, LosingLines, CandidateReplies, ExpectedOutcomes, BestOutcomes, Augmentation,
    DecisionTree,
)  # fmt: skip
MEMBERS = ("exact_suite", "exact_note", "exact_columns", "worst_case", "worst_case_lines", "worst_case_summary",
           "losing_positions", "candidate_replies", "expected_outcomes", "best_outcomes", "equivalent_games",
           "decision_tree")  # fmt: skip


def test_the_base_environment_inherits_no_capability_stub():
    assert [m for m in MEMBERS if hasattr(Environment, m)] == []


def test_tictactoe_opts_into_every_capability_and_text_envs_into_none():
    tictactoe = load_environment("tictactoe")
    assert all(isinstance(tictactoe, c) for c in CAPABILITIES)
    for name in ("reverse_text", "double_check", "calculator", "workplace_assistant", "coding"):
        env = load_environment(name)
        assert [c.__name__ for c in CAPABILITIES if isinstance(env, c)] == [], name
    # Chess has no solver: its engine values a reply (BestOutcomes) over its legal moves (CandidateReplies).
    chess = load_environment("chess", num_train=8, num_eval=4, num_test=4)
    assert [c.__name__ for c in CAPABILITIES if isinstance(chess, c)] == ["CandidateReplies", "BestOutcomes"]


def test_require_names_the_protocol_its_members_and_the_way_out():
    require(load_environment("tictactoe"), ExpectedOutcomes, "play_on='expected'", "use 'sample'")  # has it
    with pytest.raises(MissingCapability) as refused:
        require(load_environment("reverse_text"), WorstCase, "the worst-case table", "skip it")
    assert str(refused.value) == (
        "the worst-case table needs an environment with the WorstCase capability "
        "(wander.core.capabilities.WorstCase: `worst_case`, `worst_case_lines`, "
        "`worst_case_summary`); 'reverse_text' does not have "
        "it: skip it"
    )
    assert isinstance(refused.value, ValueError)  # a bad setting, as the stages report one
