"""The Pathways view in the Airflow UI (Airflow 3.1+), shipped with the provider.

* :mod:`~pathways_airflow.ui.plugin` — the Airflow plugin the provider info names: the tabs and
  the app the api-server mounts;
* :mod:`~pathways_airflow.ui.app` — the app: pages, and JSON endpoints behind Airflow's auth
  (the imperative shell: it fetches and asks);
* :mod:`~pathways_airflow.ui.view_model` and :mod:`~pathways_airflow.ui.benchmark_view` — what
  the pages draw, from a task's XCom and from a benchmark history (the functional core);
* ``static/`` — the pages, drawn with inline SVG from files in the wheel: no CDN, nothing
  fetched at run time.

Nothing here is imported by the operators: a worker runs tasks without any of it.
"""
