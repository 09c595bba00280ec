"""The pipeline's stages, one module each (`python -m tasks.<stage>`); whoever runs one, no tool phones home.

With `WANDER_STAGE_SERVER` set, a stage command runs in that warm server's fork (tasks/runtime/stage_server.py)
before it imports anything heavy: this package is the first thing `python -m tasks.<stage>` imports."""

import os
import sys

from wander.core.offline import stay_offline

stay_offline()

# While `python -m` is locating its module, sys.argv[0] is "-m": this import is a stage command's (`tasks.<stage>`).
if os.environ.get("WANDER_STAGE_SERVER") and sys.argv[:1] == ["-m"]:
    from tasks.runtime.stage_server import run_through_server

    _status = run_through_server(os.environ["WANDER_STAGE_SERVER"])
    if _status is not None:
        sys.exit(_status)
