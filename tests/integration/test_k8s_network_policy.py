"""KubernetesBackend.submit(network_policy=...) over HTTP against the FAKE API server
(tests/support/apiserver/): the policy is created after the TFJob and owned by it; a
refused policy deletes the TFJob again. The real apiserver and garbage collector are in
tests/e2e/test_network_policy.py."""
from __future__ import annotations

import pytest

from launcher.backends.base import BackendError
from launcher.render import render, render_network_policy
from launcher.spec import JobSpec, ReplicaSpec
from tests.support.k8s_backend import WAIT
from tests.support.polling import wait_for

SPEC = JobSpec(name="mnist", replicas={"Worker": ReplicaSpec(2)})


def test_the_policy_is_created_owned_by_the_tfjob(k8s_backend, fake_apiserver):
    k8s_backend.submit(render(SPEC), network_policy=render_network_policy(SPEC))
    job = fake_apiserver.get("tfjobs", "default", "mnist")
    policy = fake_apiserver.get("networkpolicies", "default", "mnist-tf-port")
    assert policy["spec"] == render_network_policy(SPEC)["spec"]
    assert policy["metadata"]["ownerReferences"] == [{
        "apiVersion": "kubeflow.org/v1", "kind": "TFJob", "name": "mnist", "uid": job["metadata"]["uid"],
        "blockOwnerDeletion": True}]
    creates = [r.resource for r in fake_apiserver.requests if r.verb == "create"]
    assert creates == ["tfjobs", "networkpolicies"]  # the owner exists (with its uid) first


def test_a_refused_policy_deletes_the_tfjob_again(k8s_backend, fake_apiserver):
    fake_apiserver.resources.discard("networkpolicies")  # a server without the API (or RBAC forbids it)
    with pytest.raises(BackendError) as err:
        k8s_backend.submit(render(SPEC), network_policy=render_network_policy(SPEC))
    message = str(err.value)
    assert "networkpolicy mnist-tf-port" in message and "--no-network-policy" in message, message
    wait_for(lambda: fake_apiserver.get("tfjobs", "default", "mnist") is None, "the TFJob deleted again", WAIT)


def test_without_a_policy_only_the_tfjob_is_created(k8s_backend, fake_apiserver):
    k8s_backend.submit(render(SPEC))
    assert [r.resource for r in fake_apiserver.requests if r.verb == "create"] == ["tfjobs"]
