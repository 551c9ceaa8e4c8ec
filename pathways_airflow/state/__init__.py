"""How to read the cluster: pure functions from API objects (plain dicts) to verdicts."""
