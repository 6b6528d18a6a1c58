"""Dagster wiring: the only place that imports dagster."""
