"""How many sessions an env server holds, how many of them one client may hold, and how long an idle one lives: the
defaults of `wander env serve`, the server and the stages that size a server, defined once here.

This module imports nothing heavy, so the CLI's parser and the stages read the defaults without loading openenv.
"""

from __future__ import annotations

MAX_SESSIONS = 256
IDLE_TTL_S = 300.0
# One trainer machine is the usual client: a GRPO stage at the default params keeps 72 episodes open (a batch of 64
# plus 8), synthesize 64. Half the cap holds that from one machine and leaves the other half to every other client.
CLIENT_SHARE = 0.5


def default_per_client(max_sessions: int) -> int:
    """The sessions one client may hold by default: `CLIENT_SHARE` of the cap, at least one."""
    return max(1, int(max_sessions * CLIENT_SHARE))


def per_client_limit(max_sessions: int, per_client: int | None = None) -> int:
    """The per-client share a server of `max_sessions` runs with: `per_client`, or the default when None."""
    if per_client is None:
        return default_per_client(max_sessions)
    if not 1 <= per_client <= max_sessions:
        raise ValueError(
            f"--max-sessions-per-client {per_client} must be 1 to --max-sessions ({max_sessions})"
        )
    return per_client
