"""The Prefect flows (`python -m flows.pipeline`, `python -m flows.retrain`); whoever runs one, no tool phones home:
set before Prefect's ephemeral server starts, and inherited by DVC and the stages."""

from wander.core.offline import stay_offline

stay_offline()
