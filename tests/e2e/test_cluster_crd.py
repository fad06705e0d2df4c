"""The k8s backend reads the TFJob CRD the real apiserver has installed, and the launcher
validates with it (what `submit` does when a cluster is reachable)."""
from __future__ import annotations

import pytest

from launcher.backends.base import CRDUnavailable
from launcher.backends.k8s import KubernetesBackend
from launcher.render import render
from launcher.spec import JobSpec, ReplicaSpec
from launcher.validate import SchemaError, validate, version_schema


@pytest.fixture
def backend(control_plane, monkeypatch):
    for var, value in control_plane.env().items():
        if var.lower() in ("no_proxy", "kubeconfig"):
            monkeypatch.setenv(var, value)
    backend = KubernetesBackend(kubeconfig=str(control_plane.kubeconfig))
    yield backend
    backend.close()


def test_the_installed_crd_is_read_and_validates(backend):
    crd = backend.installed_crd("tfjobs.kubeflow.org")
    assert crd["metadata"]["name"] == "tfjobs.kubeflow.org"
    assert version_schema(crd, "cluster")["properties"]["spec"]["properties"]["tfReplicaSpecs"]
    tfjob = render(JobSpec(name="crd-e2e", replicas={"Worker": ReplicaSpec(2)}))
    assert validate(tfjob, crd=crd) is True
    tfjob["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = 10**12
    with pytest.raises(SchemaError, match="int32"):
        validate(tfjob, crd=crd)


def test_a_crd_the_cluster_lacks_is_crd_unavailable(backend):
    with pytest.raises(CRDUnavailable, match="not installed"):
        backend.installed_crd("inferenceservices.serving.kserve.io")
