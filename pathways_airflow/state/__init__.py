"""How to read the cluster: pure functions from API objects (plain dicts) to what they show.

The task's own bookkeeping (submission, outcome, records, result, goodput, ...) is
:mod:`pathways_airflow.run`; this package never imports it.
"""
