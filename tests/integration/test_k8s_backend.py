"""KubernetesBackend over HTTP against the FAKE API server (tests/support/apiserver/): what
needs the double: a garbage collector held back (delete --wait), a cluster without the
TFJob CRD, kubeconfig errors without a server, an unreachable server, a Kueue job's status
before the operator has written Suspended. Submit, replace, dry run, refusals, status (also
with an unschedulable and a failed replica), list, delete and manifest run against the real
control plane in tests/e2e/test_k8s_backend.py (a restarted container's count in status:
tests/node/test_replica_states.py); credentials, accepted (an exec plugin's token,
$KUBECONFIG) and refused, in tests/e2e/test_kubeconfig_secrets.py."""
from __future__ import annotations

import threading

import pytest

from launcher.backends.base import BackendError
from launcher.backends.k8s import KubernetesBackend
from tests.support.k8s_backend import WAIT, manifest
from tests.support.polling import wait_for


# ---- submit --------------------------------------------------------------------------------------
def test_a_cluster_without_the_tfjob_crd_says_to_install_the_operator(k8s_backend, fake_apiserver):
    fake_apiserver.resources.discard("tfjobs")
    with pytest.raises(BackendError, match="install the Kubeflow training-operator v1.9"):
        k8s_backend.submit(manifest())


# ---- status / list -----------------------------------------------------------------------------
def test_a_job_created_suspended_for_kueue_is_suspended_before_the_operator_says_so(k8s_backend, fake_operator):
    """The operator writes Created before Suspended; status and list read the TFJob's own
    runPolicy.suspend and queue label, so the job never shows as Pending or Created."""
    k8s_backend.submit(manifest(name="queued", ps=0, chief=0, workers=1, queue_name="team-a"))
    status = k8s_backend.status("queued", "default")
    assert (status.phase, status.queue, status.suspended) == ("Suspended", "team-a", True)
    fake_operator.set_condition("queued", "Created")
    assert k8s_backend.status("queued", "default").phase == "Suspended"
    assert [(j.name, j.phase, j.queue) for j in k8s_backend.list("default")] == [("queued", "Suspended", "team-a")]


# ---- delete ----------------------------------------------------------------------------------
def test_delete_wait_returns_once_the_foreground_deletion_finished(k8s_backend, fake_apiserver, fake_operator):
    fake_apiserver.auto_gc = False  # the garbage collector runs when the test says
    k8s_backend.submit(manifest())
    fake_operator.create_pods("mnist")
    done = threading.Event()
    waiter = threading.Thread(target=lambda: (k8s_backend.delete("mnist", "default", wait=True), done.set()),
                              daemon=True)
    waiter.start()
    wait_for(lambda: fake_apiserver.count("tfjobs", "get") >= 2, "the backend polling the deleted job", WAIT)
    assert not done.is_set()
    assert "deletionTimestamp" in fake_apiserver.get("tfjobs", "default", "mnist")["metadata"]
    fake_apiserver.collect_garbage()
    waiter.join(WAIT)
    assert done.is_set() and not fake_apiserver.objects


def test_delete_wait_gives_up_with_a_clear_message(k8s_backend, fake_apiserver):
    fake_apiserver.auto_gc = False
    k8s_backend.delete_timeout = 1.0
    k8s_backend.submit(manifest())
    with pytest.raises(BackendError, match="tfjob mnist in default still exists after 1 s"):
        k8s_backend.delete("mnist", "default", wait=True)


# ---- configuration and reachability ----------------------------------------------------------
def test_a_missing_kubeconfig_is_a_usage_error_naming_the_flag(tmp_path):
    from launcher.spec import SpecError

    with pytest.raises(SpecError) as err:
        KubernetesBackend(kubeconfig=str(tmp_path / "absent"))
    assert err.value.field == "--kubeconfig" and str(tmp_path / "absent") in str(err.value)


def test_no_kubeconfig_and_no_cluster_points_at_the_local_backend(tmp_path, monkeypatch):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(BackendError) as err:
        KubernetesBackend()
    assert "not in a cluster" in str(err.value) and "--backend local" in str(err.value)


def test_an_unreachable_server_points_at_the_local_backend(fake_apiserver, tmp_path):
    kubeconfig = fake_apiserver.write_kubeconfig(tmp_path / "kubeconfig")
    fake_apiserver.stop()  # nothing listens on that port any more
    backend = KubernetesBackend(kubeconfig=str(kubeconfig))
    try:
        with pytest.raises(BackendError) as err:
            backend.list(None)
    finally:
        backend.close()
    message = str(err.value)
    assert message.startswith(f"cannot reach the Kubernetes API server at {fake_apiserver.url}")
    assert "--backend local" in message and "\n" not in message


# ---- the cluster's CRD ---------------------------------------------------------------------------
def test_a_cluster_without_the_tfjob_crd_is_crd_unavailable(k8s_backend, fake_apiserver):
    from launcher.backends.base import CRDUnavailable

    with pytest.raises(CRDUnavailable) as err:
        k8s_backend.installed_crd("tfjobs.kubeflow.org")
    assert str(err.value) == f"cannot read CRD tfjobs.kubeflow.org from {k8s_backend.api.host} (not installed)"


