"""Environments over HTTP, the OpenEnv way: serve any wander environment, use any OpenEnv server as one."""
