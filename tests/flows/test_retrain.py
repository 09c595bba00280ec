"""The retrain flow's derived params: GRPO from the champion, in curriculum order, on fresh seeds."""

from pathlib import Path

from flows.retrain import retrain_params
from tasks.params.load import load_params, read_params

REPO = Path(__file__).resolve().parents[2]


def test_retrain_params_keep_the_curriculum_order_and_start_from_the_champion():
    params = read_params(REPO / "params.yaml")
    derived = retrain_params(params, Path("data/work/retrain/seed-7"), seed=7)
    stages = derived["grpo"]["stages"]
    assert list(stages) == list(params["grpo"]["stages"])  # order is the curriculum
    first, *rest = stages.values()
    assert first["start"] == "champion" and all(s["start"].startswith("grpo-") for s in rest)
    assert derived["generate"]["seed"] == 7 and "seed" not in derived["env"]
    assert derived["layout"]["datasets"] == "data/work/retrain/seed-7/datasets"
    load_params(params=derived)  # the derived params are valid
    assert derived["layout"]["models"] == "data/work/retrain/seed-7/models"
    for key in ("metrics", "details", "eval"):  # what generate, grpo, evaluate and register write stays apart
        assert derived["layout"][key] == f"data/work/retrain/seed-7/{key}"
    assert derived["register"]["candidate"] == "candidate"
    # Every row register's gates read: the candidate, its start model and params.yaml's baseline (the teacher).
    assert derived["evaluate"]["policies"] == {
        "champion": "data/work/retrain/seed-7/models/champion",
        "candidate": f"data/work/retrain/seed-7/models/grpo-{list(stages)[-1]}",
        "teacher": "teacher",
    }
    assert derived["register"]["baseline"] == params["register"]["baseline"] == "teacher"
    assert (
        params["grpo"]["stages"][next(iter(stages))]["start"] == "sft"
    )  # the pipeline's params are untouched
