"""Sensors: wait on workload phases, TPU slice readiness and committed checkpoints."""
