"""Every tool the pipeline runs stays offline and sends no telemetry, whoever starts it: `make`, a Prefect worker, a
shell running `python -m flows.pipeline` or a stage, or `wander`.

Each tool reads its own switch from the environment (DVC, MLflow, Prefect's server, Great Expectations, Hugging
Face); `stay_offline()` sets the ones the caller has not set, so child processes (DVC, the stages) inherit them. A
value the caller set wins: `HF_HUB_OFFLINE=0` lets a hub id download where a hub is reachable.
"""

from __future__ import annotations

import os

OFFLINE_ENV = {
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DVC_NO_ANALYTICS": "1",
    "GX_ANALYTICS_ENABLED": "false",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


def stay_offline() -> None:
    """Set each tool's no-telemetry / offline switch in this process's environment where it is unset."""
    for key, value in OFFLINE_ENV.items():
        os.environ.setdefault(key, value)
