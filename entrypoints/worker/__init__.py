"""The worker process (the ECS task's command): `python -m entrypoints.worker`."""
