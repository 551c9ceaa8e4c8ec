"""Hooks: Kubernetes clients for Pathways workloads from Airflow connections."""
