"""The suite's end-to-end tests: the modules that chain pipeline stages as processes (`dvc repro`, `dvc exp run`, a
Prefect flow or deployment), and why each must. They are most of the suite's time (docs/experiments/test-suite.md);
tests/conftest.py marks their tests `end_to_end` (`pytest -m end_to_end --co -q` lists them) and
tests/test_end_to_end.py fails when a module that runs stages is missing here.

A new entry needs a reason no faster test can give: a pipeline run is 1-5 minutes on two cores. A test that only reads
a finished run asks for a shared one (`smoke_pipeline(name)`, test_pipeline.py's `project`) instead of its own.
"""

END_TO_END = {
    "tests/flows/test_pipeline.py": (
        "the default smoke pipeline through the Prefect flow, once for the module: the flow itself, a stop and its "
        "rerun (processes and outputs), the env served over HTTP, DVC's invalidation, deployments through a real "
        "Prefect server and worker and the retrain are behaviours of a whole run, not of a stage"
    ),
    "tests/flows/test_pipeline_envs.py": (
        "every env's smoke pipeline (the shared `smoke_pipeline` run of each): each stage's outputs for each env, "
        "which only a run that chains them produces"
    ),
    "tests/flows/test_pipeline_calculator.py": "reads calculator's shared smoke run: what its outputs mean",
    "tests/flows/test_pipeline_chess.py": "reads chess's shared smoke run: the opponent matrix with Stockfish",
    "tests/flows/test_pipeline_coding.py": "reads coding's shared smoke run: sandboxed rewards through every stage",
    "tests/flows/test_pipeline_double_check.py": "reads double_check's shared smoke run: its two-turn episodes",
    "tests/flows/test_pipeline_reasoning_gym.py": "reads reasoning_gym's shared smoke run: a task nobody here wrote",
    "tests/flows/test_pipeline_reverse_text.py": "reads reverse_text's shared smoke run, then `wander eval` on it",
    "tests/flows/test_pipeline_word_sentence.py": "runs word_sentence, a task only a judge scores, on a judge served over HTTP: every stage that scores asks it",
    "tests/flows/test_pipeline_workplace_assistant.py": "reads workplace_assistant's shared smoke run: tool calls",
    "tests/flows/test_pipeline_llm.py": (
        "the packaged chat model through `dvc repro` on the llm-smoke profile: the chat template, LoRA-free full "
        "fine-tuning and the tokenizer of a real pretrained model in every stage"
    ),
    "tests/flows/test_pipeline_gpu.py": "the chat profile on a CUDA GPU (skipped without one): bf16 and vLLM's CUDA build",
    "tests/services/test_team.py": (
        "the pipeline on a team's servers (PostgreSQL, S3, MLflow, Prefect) with two workers: which stage runs where, "
        "a killed worker and a restarted MLflow server mid-run, a third clone pulling the run"
    ),
    "tests/tasks/test_dvc_data_stages.py": "`dvc repro curate`: the data stages' DVC wiring and their no-op rerun",
    "tests/wander/test_env_init.py": (
        "issue 29's acceptance: a scaffolded env runs the smoke pipeline with no edit outside its folder"
    ),
}
