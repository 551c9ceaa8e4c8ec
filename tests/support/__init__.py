"""What the tests share, one module per job.

Test modules and conftests import helpers from here (or from ``pathways_airflow``), never from
one another: a test module is a list of tests, not a library. ``tests/unit/test_test_imports.py``
keeps it so.

- ``waiting``: ``wait_for``, polling a predicate until it holds or a timeout fails the test
- ``task_instance``: the fake ``TaskInstance`` and ``StateStore`` an in-process task is given
- ``triggers``: the one trigger runner, reviving a trigger as the triggerer does
- ``connections``: the Airflow connections and environment that point clients at a local cluster
- ``gcs``: an anonymous client of the local cluster's GCS emulator
- ``workloads``: training workloads submitted straight to the cluster, and acting at a step
- ``airflow_cli``: the ``airflow`` command in a fresh ``AIRFLOW_HOME`` (``dags test``, task states)
- ``deployment``: a real Airflow deployment, one process per component
- ``crds``: where the published CRD schemas are
- ``chaos``: the chaos suite's plans, harness, invariants and report
"""
