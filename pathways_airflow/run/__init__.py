"""The task's own books: what it submitted, what it decides after a wait, and what it reports. Pure.

Beside :mod:`pathways_airflow.state`, which reads the cluster, this package keeps what one task
knows of its own run: the submission plan and its rounds, the records that cross processes, the
outcome of a wait, the annotations its triggers write on the workload, the result, timeline,
goodput, failure messages and lineage. It may read ``state``; ``state`` never reads it.
"""
