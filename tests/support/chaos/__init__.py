"""The chaos suite's parts: seeded plans, the harness that runs one, the invariants, the report."""
