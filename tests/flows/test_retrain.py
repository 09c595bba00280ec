"""The retrain flow's derived params: the env's curriculum from the champion, on fresh seeds."""

from pathlib import Path

from flows.retrain import retrain_params
from tasks.params.load import load_params, read_params

REPO = Path(__file__).resolve().parents[2]


def test_retrain_params_run_the_env_s_curriculum_from_the_champion():
    params = read_params(REPO / "params.yaml")
    loaded = load_params(params=params)
    derived = retrain_params(params, loaded, Path("data/work/retrain/seed-7"), seed=7)
    assert (
        derived["grpo"]["start"] == "champion" and derived["grpo"]["stages"] is None
    )  # the env's curriculum
    assert derived["generate"]["seed"] == 7 and "seed" not in derived["env"]
    assert derived["layout"]["datasets"] == "data/work/retrain/seed-7/datasets"
    retrained = load_params(params=derived)  # the derived params are valid
    assert list(retrained.grpo.stages) == list(loaded.grpo.stages)  # the same curriculum, in order
    assert derived["layout"]["models"] == "data/work/retrain/seed-7/models"
    for key in ("metrics", "details", "eval"):  # what generate, grpo, evaluate and register write stays apart
        assert derived["layout"][key] == f"data/work/retrain/seed-7/{key}"
    assert derived["register"]["candidate"] == "candidate"
    # Every row register's gates read: the candidate, its start model and params.yaml's baseline (the teacher).
    last = list(loaded.grpo.stages)[-1]
    assert derived["evaluate"]["policies"] == {
        "champion": "data/work/retrain/seed-7/models/champion",
        "candidate": f"data/work/retrain/seed-7/models/grpo/{last}",
        "teacher": "teacher",
    }
    assert derived["register"]["baseline"] == params["register"]["baseline"] == "teacher"
    assert params["grpo"]["start"] == "sft"  # the pipeline's params are untouched
