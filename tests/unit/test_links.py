"""Extra links: GKE console and Cloud Logging URLs from the operator's XCom record."""

from __future__ import annotations

from urllib.parse import unquote

from pathways_airflow.links import cloud_logging_url, gke_workload_url

RECORD = {"name": "train-abc", "namespace": "ml", "backend": "jobset", "project_id": "proj", "location": "us-central2", "cluster_name": "tpu-cluster"}


def test_gke_workload_page():
    assert gke_workload_url(RECORD) == (
        "https://console.cloud.google.com/kubernetes/jobset/us-central2/tpu-cluster/ml/train-abc/details?project=proj"
    )


def test_cloud_logging_query_selects_the_workloads_containers():
    query = unquote(cloud_logging_url(RECORD))
    assert 'resource.labels.cluster_name="tpu-cluster"' in query
    assert 'resource.labels.namespace_name="ml"' in query
    assert 'labels."k8s-pod/jobset_sigs_k8s_io/jobset-name"="train-abc"' in query


def test_no_links_for_a_cluster_reached_without_gke():
    plain = {**RECORD, "cluster_name": None}
    assert gke_workload_url(plain) == "" and cloud_logging_url(plain) == ""
