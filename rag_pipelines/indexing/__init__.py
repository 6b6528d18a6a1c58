"""Keeping a collection in step with its sources, outside Dagster's wiring: scan the sources, plan what changed,
write items, report progress, run the jobs in-process (CLI, watcher) and mend runs whose process died."""
