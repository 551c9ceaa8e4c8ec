"""How far a run got and where it resumed, read from its program's log as MaxText writes it."""

from __future__ import annotations

import pytest

from pathways_airflow.run.progress import FROM_SCRATCH, step_resumed_from

pytestmark = pytest.mark.pure

# maxtext src/maxtext/common/checkpointing.py, load_state_if_possible: the lines it logs at start-up.
LOOKING = "checkpoint manager exists so trying to load this run's existing checkpoint"


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        ([LOOKING, "restoring from this run's directory step 24", "completed step: 25, seconds: 1.0"], 24),
        ([LOOKING, "No existing checkpoints found, not restoring checkpoint."], FROM_SCRATCH),
        # timestamps and logger prefixes around the line, as Cloud Logging keeps them
        (["I1127 10:00:01.1 train.py:1] restoring from this run's directory step 120"], 120),
        # an elastic retry restores again later in the same run: the start-up restore counts
        (["restoring from this run's directory step 10", "Elastic utils: ...", "restoring from this run's directory step 30"], 10),
        ([LOOKING], None),  # not said yet
        ([], None),
    ],
)
def test_the_step_a_program_says_it_restored(lines, expected):
    assert step_resumed_from(lines) == expected
