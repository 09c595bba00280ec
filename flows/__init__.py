"""The Prefect flows (`python -m flows.pipeline`, `python -m flows.retrain`); whoever runs one, no tool phones home
and the libraries' notices that ask nothing of the user stay off: set before Prefect's ephemeral server starts, and
inherited by DVC and the stages."""

from wander.core.logs import quiet_library_notices
from wander.core.offline import stay_offline

stay_offline()
quiet_library_notices()
