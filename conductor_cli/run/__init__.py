"""The plan -> run path: pool, planning, workflow, engine, events, budget, inputs."""
