"""The register stage: lineage tags, and the champion alias moves only for a better model."""

import json
import warnings
from pathlib import Path

import mlflow
import pytest

from tasks.evaluate import run as evaluate
from tasks.params.evaluation_sections import Evaluate, Register
from tasks.params.sections import Params
from tasks.params.shared_sections import Env
from tasks.register import PIP_REQUIREMENTS, decide, dvc_hash, run
from tasks.runtime import tracking
from wander import load_environment
from wander.eval.compare import BETTER, UNCLEAR, WORSE, compare_exact
from wander.eval.matrix import run_matrix
from wander.policies.scratch_model import build_scratch_model
from wander.policies.scratch_model_config import ScratchModelConfig
from wander.policies.transformers_policy import TransformersPolicy

NON_LOSS = load_environment("tictactoe").evaluation_suite().metric("non_loss")
LOSS = load_environment("tictactoe").evaluation_suite().metric("loss")
TINY = ScratchModelConfig(
    hidden_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2, intermediate_size=64
)


def scripted_rows(policy: str, games: int = 60) -> list[dict]:
    config = Evaluate(
        baseline=None,
        policies={policy: policy},
        references=[],
        opponents=["random", "minimax-0"],
        games=games,
        progress=False,
    )
    return run_matrix(config).rows


def test_decision_uses_intervals():
    random_rows, minimax_rows = scripted_rows("random"), scripted_rows("minimax")
    assert decide(None, random_rows, NON_LOSS, "x") == (True, "first registered version")
    assert decide(random_rows, minimax_rows, NON_LOSS, "minimax")[0] is True
    assert decide(minimax_rows, random_rows, NON_LOSS, "random")[0] is False
    assert (
        decide(minimax_rows, scripted_rows("minimax"), NON_LOSS, "again")[0] is False
    )  # no clear difference


def test_the_gate_refuses_a_candidate_worse_than_a_reference_even_the_first_version():
    random_rows, minimax_rows = scripted_rows("random"), scripted_rows("minimax")
    promoted, reason = decide(None, random_rows, NON_LOSS, "random", {"teacher": minimax_rows})
    assert promoted is False and reason.startswith("random is worse than teacher on non_loss in")
    assert "minimax-0 (first)" in reason
    promoted, reason = decide(
        None, minimax_rows, NON_LOSS, "minimax", {"sft": random_rows, "teacher": minimax_rows}
    )
    assert promoted is True and reason == "first registered version, no worse than sft, teacher"
    # a champion that is beaten, but a start model the candidate is worse than: still refused
    assert decide(random_rows, minimax_rows, NON_LOSS, "m", {"sft": scripted_rows("minimax")})[0] is True
    assert decide(random_rows, random_rows, NON_LOSS, "r", {"sft": minimax_rows})[0] is False


def test_exact_results_decide_what_a_few_sampled_games_cannot_tell():
    # Two greedy models, exact non-loss equal against random and far apart against perfect play (the chat profile's
    # SFT-only champion and its GRPO successor): the sampled rows alone cannot tell them apart.
    champion = {"random": {"non_loss": 0.982}, "minimax-0": {"non_loss": 0.715}}
    candidate = {"random": {"non_loss": 0.982}, "minimax-0": {"non_loss": 0.975}}
    rows = scripted_rows("minimax", games=5)
    assert decide(rows, rows, NON_LOSS, "grpo")[0] is False  # sampled: no clear difference
    found = compare_exact(champion, candidate, NON_LOSS)
    assert [(c["opponent"], c["verdict"]) for c in found] == [
        ("random", UNCLEAR),
        ("minimax-0", BETTER),
        ("all", BETTER),
    ]
    assert (found[-1]["a"], found[-1]["b"]) == (pytest.approx((0.982 + 0.715) / 2), pytest.approx(0.9785))
    assert decide(rows, rows, NON_LOSS, "grpo", exact=found) == (
        True,
        "grpo is better than champion on non_loss: better in 1 of 2 columns, worse in none.",
    )
    # Exactly worse anywhere is worse: no margin hides it; exactly equal everywhere keeps the champion.
    slipped = compare_exact(
        candidate, {"random": {"non_loss": 0.981}, "minimax-0": {"non_loss": 1.0}}, NON_LOSS
    )
    assert [c["verdict"] for c in slipped] == [WORSE, BETTER, BETTER]
    assert decide(rows, rows, NON_LOSS, "next", exact=slipped) == (
        False,
        "mixed: next is better than champion in 1 of 2 columns and worse in 1.",
    )
    assert decide(rows, rows, NON_LOSS, "again", exact=compare_exact(candidate, candidate, NON_LOSS)) == (
        False,
        "again and champion are equal on non_loss in every column (exact results).",
    )


def test_exact_comparison_follows_the_metric_and_needs_it_on_both_sides():
    assert compare_exact({"random": {"loss": 0.02}}, {"random": {"loss": 0.0}}, LOSS)[0]["verdict"] == BETTER
    assert compare_exact({"random": {"loss": 0.0}}, {"random": {"loss": 0.02}}, LOSS)[0]["verdict"] == WORSE
    # The last bits of a sum computed in another order are no difference.
    assert compare_exact({"r": {"loss": 0.1 + 0.2}}, {"r": {"loss": 0.3}}, LOSS)[0]["verdict"] == UNCLEAR
    # Without the metric on both sides, or in a column of A's, there is nothing exact to compare: None.
    assert compare_exact({"random": {"win": 0.9}}, {"random": {"win": 0.9}}, NON_LOSS) is None
    assert (
        compare_exact({"random": {"loss": 0.0}, "minimax-0": {"loss": 0.0}}, {"random": {"loss": 0.0}}, LOSS)
        is None
    )
    assert compare_exact({}, {"random": {"loss": 0.0}}, LOSS) is None


def evaluate_grpo(games: int = 4) -> None:
    """The evaluate stage on the scratch model `grpo` alone, into data/eval."""
    evaluate(
        Params(
            evaluate=Evaluate(
                baseline=None,
                policies={"grpo": "data/models/grpo"},
                references=[],
                opponents=["random", "minimax-0"],
                games=games,
                max_new_tokens=8,
                out_dir="data/eval",
                progress=False,
            )
        )
    )


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = load_environment("tictactoe")
    build_scratch_model(env.corpus(), tmp_path / "data/models/grpo", TINY)
    evaluate_grpo()
    return tmp_path


def test_register_tags_lineage_and_keeps_the_champion_unless_beaten(project: Path):
    config = Params(
        register=Register(
            lineage={"grpo": "data/models/grpo"},
            candidate="grpo",
            datasets=["data/sft"],
            max_new_tokens=8,
            baseline=None,  # this matrix has no teacher row
        )
    )
    with tracking.stage_run("register", root=project):
        first = run(config)
    with tracking.stage_run("register", root=project):
        again = run(config)  # the same candidate, evaluation and gates: the same registration
    assert first["promoted"] is True and first["version"] == 1
    assert again == first
    evaluate_grpo(games=6)  # a new evaluation of the same model is a new registration
    with tracking.stage_run("register", root=project):
        second = run(config)
    assert second["promoted"] is False and second["version"] == 2  # the same model is no better
    client = mlflow.MlflowClient()
    assert int(client.get_model_version_by_alias("wander-tictactoe", "champion").version) == 1
    tags = client.get_model_version("wander-tictactoe", "2").tags
    # Both greedy on an env with exact results: the champion replayed exactly, equal in every column.
    assert tags["wander.promoted"] == "false"
    assert (
        tags["wander.promotion_reason"]
        == "grpo and champion are equal on non_loss in every column (exact results)."
    )
    assert tags["wander.checkpoint"] == "data/models/grpo" and tags["wander.parent"] == "none"
    assert tags["wander.dataset.data/sft"] == "untracked"
    assert tags["eval.non_loss"] == f"{second['candidate_non_loss']:.4f}"


def test_a_register_that_fails_registers_nothing(project: Path):
    # The baseline gate needs the teacher's rows, which this matrix lacks: refused before any version exists.
    config = Params(
        register=Register(lineage={"grpo": "data/models/grpo"}, candidate="grpo", baseline="teacher")
    )
    with (
        tracking.stage_run("register", root=project),
        pytest.raises(ValueError, match="no rows for policy 'teacher'"),
    ):
        run(config)
    assert mlflow.MlflowClient().search_model_versions("name='wander-tictactoe'") == []


def test_unknown_candidate_is_refused(project: Path):
    with pytest.raises(ValueError, match="not in register.lineage"):
        run(Params(register=Register(lineage={"sft": "data/models/sft"}, candidate="grpo")))


def test_the_registered_model_answers_conversations_and_mlflow_has_no_advice_for_it(tmp_path, monkeypatch):
    # MLflow checks a PythonModel's predict when the class is defined (register's import, log_model and every
    # load_model run the file) and raises its advice inside a warnings filter of its own, which no filter of
    # ours can reach: the type hints are what keeps it quiet. The unhinted control shows this record sees it.
    from tasks.runtime import registered_model  # as register imports it: running the file sets MLflow's model

    monkeypatch.chdir(tmp_path)
    build_scratch_model(load_environment("tictactoe").corpus(), tmp_path / "checkpoint", TINY)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with tracking.stage_run("register", root=tmp_path):
            info = mlflow.pyfunc.log_model(
                name="model",
                python_model=registered_model.__file__,
                artifacts={"checkpoint": str(tmp_path / "checkpoint")},
                pip_requirements=PIP_REQUIREMENTS,
            )
        model = mlflow.pyfunc.load_model(info.model_uri)
        advice = [str(w.message) for w in seen if "type hint" in str(w.message).lower()]

        class Unhinted(mlflow.pyfunc.PythonModel):
            def predict(self, context, model_input, params=None):
                return model_input

    assert advice == []
    assert any("Add type hints to the `predict` method" in str(w.message) for w in seen)
    assert info.signature.inputs.to_dict() == [
        {"type": "array", "items": {"type": "map", "values": {"type": "string"}}, "required": True}
    ]
    assert info.signature.outputs.to_dict() == [{"type": "string", "required": True}]
    policy = model.unwrap_python_model().policy
    assert isinstance(policy, TransformersPolicy)
    policy.max_new_tokens = 4
    conversations = [
        [{"role": "system", "content": "play"}, {"role": "user", "content": "x"}],
        [{"role": "user", "content": "o"}],
    ]
    assert model.predict(conversations) == [reply.content for reply in policy(conversations)]  # greedy
    with pytest.raises(mlflow.exceptions.MlflowException, match="type hint"):
        model.predict([[{"role": "user", "content": 3}]])  # a message's fields are strings


def test_the_gate_judges_a_lower_is_better_metric_of_a_rubric_env_that_way():
    suite = load_environment("workplace_assistant").evaluation_suite()

    def rows(mean: float, sd: float) -> list[dict]:  # one cell per stratum and split, 100 episodes each
        return [
            {"opponent": g, "side": s, "games": 100, "side_effects": mean, "side_effects_sd": sd}
            for g in suite.groups
            for s in suite.sides
        ]

    clean, messy = rows(0.0, 0.0), rows(0.4, 0.5)
    side_effects = suite.comparable("side_effects")
    promoted, reason = decide(None, messy, side_effects, "messy", {"teacher": clean})
    assert promoted is False and reason.startswith("messy is worse than teacher on side_effects in")
    assert decide(messy, clean, side_effects, "clean")[0] is True  # fewer side effects beat the champion


# A rubric env's gate on a real evaluation: an untrained scratch model scores no correct final answer where the
# double_check teacher (30% first slips, half of them caught) scores ~0.85, so 10 games per cell separate them.
RUBRIC_ENV = Env(name="double_check")


@pytest.fixture
def rubric_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A double_check project whose matrix holds an untrained model `grpo` and the env's teacher."""
    monkeypatch.chdir(tmp_path)
    build_scratch_model(load_environment("double_check").corpus(), tmp_path / "data/models/grpo", TINY)
    evaluate(
        Params(
            env=RUBRIC_ENV,
            evaluate=Evaluate(
                policies={"grpo": "data/models/grpo", "teacher": "teacher"},
                references=[],
                games=10,
                max_new_tokens=8,
                out_dir="data/eval",
                progress=False,
            ),
        )
    )
    return tmp_path


def register_grpo(root: Path, baseline: str | None) -> dict:
    """Register the rubric project's `grpo` row with the teacher gate on (`baseline="teacher"`) or off."""
    config = Params(
        env=RUBRIC_ENV,
        register=Register(
            lineage={"grpo": "data/models/grpo"},
            candidate="grpo",
            datasets=[],
            max_new_tokens=8,
            baseline=baseline,
        ),
    )
    with tracking.stage_run("register", root=root):
        return run(config)


def headline_all(root: Path, policy: str) -> float:
    """The evaluate stage's pooled headline (`reward`, every stratum and split) of one matrix row."""
    return json.loads((root / "data/eval/metrics.json").read_text())[policy]["reward"]["all"]


def test_the_gate_refuses_a_rubric_env_candidate_worse_than_its_teacher(rubric_project: Path):
    teacher = headline_all(rubric_project, "teacher")
    first = register_grpo(rubric_project, "teacher")
    # Clearly worse in the real matrix; registered as version 1, yet no champion: no alias at all.
    assert 0.6 < teacher < 1.0 and first["candidate_reward"] < teacher - 0.5
    assert first["promoted"] is False and first["version"] == 1
    assert first["reason"].startswith("grpo is worse than teacher on reward in ")
    assert "stratum-0 (eval)" in first["reason"]
    client = mlflow.MlflowClient()
    with pytest.raises(mlflow.exceptions.MlflowException):
        client.get_model_version_by_alias("wander-double_check", "champion")

    # Without the teacher gate the same model becomes the first champion; with it again, the alias stays there.
    assert register_grpo(rubric_project, None)["promoted"] is True
    # Registered again as the first time (same model, evaluation and gates): that version, no third one.
    assert register_grpo(rubric_project, "teacher") == first
    assert int(client.get_model_version_by_alias("wander-double_check", "champion").version) == 2
    assert len(client.search_model_versions("name='wander-double_check'")) == 2
    tags = client.get_model_version("wander-double_check", "1").tags
    assert tags["wander.promoted"] == "false" and tags["wander.promotion_reason"] == first["reason"]


def test_the_gate_says_by_how_much_a_candidate_is_worse_than_its_teacher(rubric_project: Path):
    # Issue 31: "a champion that is worse than its teacher is not promoted, and the summary says by how much".
    # The run summary prints register's reason, so the reason carries both pooled headline values.
    reason = register_grpo(rubric_project, "teacher")["reason"]
    candidate, teacher = headline_all(rubric_project, "grpo"), headline_all(rubric_project, "teacher")
    assert f"{candidate:.3f}" in reason and f"{teacher:.3f}" in reason, reason


def test_a_checkpoint_inside_a_dvc_output_folder_is_tagged_with_that_folder_s_hash_and_its_path():
    hashes = {"data/models/sft": "a1", "data/models/grpo": "b2.dir", "data/datasets": "c3.dir"}
    assert dvc_hash(hashes, "data/models/sft") == "a1"
    assert dvc_hash(hashes, Path("data/models/grpo/polish")) == "b2.dir:polish"
    assert dvc_hash(hashes, "data/models/grpo-polish") == "untracked"  # a sibling's name is not inside it
    assert dvc_hash(hashes, "elsewhere/model") == "untracked"


def test_the_start_model_gate_refuses_a_candidate_worse_item_by_item_that_separate_intervals_miss():
    # The reference replies exactly, the candidate slips on 40% of its replies (a reply a letter short): on the same
    # 96 items it is never better and often worse, a difference the columns' separate intervals do not resolve.
    from wander.eval.rubric_report import matrix_dict

    env = load_environment("reverse_text", num_train=4, num_eval=48, num_test=48)
    config = Evaluate(
        baseline=None,
        policies={"start": "expert", "candidate": "expert-0.4"},
        references=[],
        games=16,
        progress=False,
    )
    result = run_matrix(config, env=env)
    rows = {p: [r for r in result.rows if r["policy"] == p] for p in result.policies}
    reward = env.evaluation_suite().metric("reward")
    assert decide(None, rows["candidate"], reward, "candidate", {"start": rows["start"]})[0] is True
    paired = matrix_dict(result)["paired"]
    assert set(paired) == {"candidate - start"} and paired["candidate - start"]["better"] == 0
    promoted, reason = decide(
        None, rows["candidate"], reward, "candidate", {"start": rows["start"]}, paired=paired
    )
    assert promoted is False and reason.startswith(
        "candidate is worse than start on reward item by item: -0."
    )
    assert "on the same 96 items (0 better," in reason
    # The same pair the other way round: better item by item, no refusal.
    flipped = {
        "candidate - start": {**paired["candidate - start"], "mean": 0.02, "ci_low": 0.01, "ci_high": 0.04}
    }
    assert decide(None, rows["start"], reward, "candidate", {"start": rows["candidate"]}, paired=flipped)[0]
