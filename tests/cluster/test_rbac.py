"""RBAC mode: a service account can do exactly what its Role grants."""

from __future__ import annotations

import json

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from pathways_airflow.testing import LocalCluster, NodePool


@pytest.fixture(scope="module")
def rbac_cluster():
    with LocalCluster(node_pools=[NodePool("default-pool", "n2-standard-64", nodes=1)], rbac=True, gcs=False, kueue=False) as cluster:
        yield cluster


def test_a_role_grants_exactly_its_verbs(rbac_cluster):
    admin = client.RbacAuthorizationV1Api(config.new_client_from_config(rbac_cluster.kubeconfig))
    admin.create_namespaced_role(
        "default",
        {"metadata": {"name": "cm-reader"}, "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]},
    )
    admin.create_namespaced_role_binding(
        "default",
        {
            "metadata": {"name": "cm-reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "airflow", "namespace": "default"}],
        },
    )
    core = client.CoreV1Api(config.new_client_from_config(rbac_cluster.service_account_kubeconfig("default", "airflow")))
    assert core.list_namespaced_config_map("default").items is not None
    with pytest.raises(ApiException) as denied:
        core.create_namespaced_config_map("default", {"metadata": {"name": "x"}})
    assert denied.value.status == 403
    message = json.loads(denied.value.body)["message"]
    assert message == (
        'configmaps is forbidden: User "system:serviceaccount:default:airflow" cannot create resource '
        '"configmaps" in API group "" in the namespace "default"'
    )
    with pytest.raises(ApiException) as other_kind:
        core.list_namespaced_pod("default")
    assert other_kind.value.status == 403


def test_an_unknown_token_is_401(rbac_cluster):
    configuration = client.Configuration()
    configuration.host = rbac_cluster.server
    configuration.api_key = {"authorization": "Bearer not-a-token"}
    with pytest.raises(ApiException) as unauthorized:
        client.CoreV1Api(client.ApiClient(configuration)).list_namespaced_pod("default")
    assert unauthorized.value.status == 401
