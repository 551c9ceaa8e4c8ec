"""The single-object reads of ``hooks.storage`` against the GCS emulator (fake-gcs-server)."""

from __future__ import annotations

import json
import uuid

import pytest

from pathways_airflow.hooks.storage import (
    bucket_exists_if_permitted,
    object_exists_if_permitted,
    read_object,
    storage_client,
)

BUCKET = "pathways-demo"


@pytest.fixture
def client(pathways_cluster, monkeypatch):
    monkeypatch.setenv(
        "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT",
        json.dumps({"conn_type": "google_cloud_platform", "extra": {"is_anonymous": True, "project": "test"}}),
    )
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", pathways_cluster.gcs_endpoint)
    made = storage_client("google_cloud_default")
    yield made
    made.close()


def test_an_object_is_found_read_and_told_apart_from_a_missing_one(client):
    name = f"storage-reads/{uuid.uuid4().hex[:8]}/result.json"
    client.bucket(BUCKET).blob(name).upload_from_string(b'{"completed": 6}')

    assert object_exists_if_permitted(client, f"gs://{BUCKET}/{name}") is True
    assert read_object(client, f"gs://{BUCKET}/{name}") == b'{"completed": 6}'
    assert object_exists_if_permitted(client, f"gs://{BUCKET}/{name}.missing") is False
    assert read_object(client, f"gs://{BUCKET}/{name}.missing") is None


def test_a_bucket_is_found_or_known_to_be_missing(client):
    assert bucket_exists_if_permitted(client, BUCKET) is True
    assert bucket_exists_if_permitted(client, f"no-such-bucket-{uuid.uuid4().hex[:8]}") is False
