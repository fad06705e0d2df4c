"""The k8s backend reads the TFJob CRD the real apiserver has installed, and the launcher
validates with it (what `submit` does when a cluster is reachable)."""
from __future__ import annotations

import json

import pytest

from launcher.backends.base import CRDUnavailable
from launcher.backends.k8s import KubernetesBackend
from launcher.render import render
from launcher.spec import JobSpec, ReplicaSpec
from launcher.validate import SchemaError, validate, version_schema
from tests.support.polling import wait_for


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


def test_the_real_apiserver_accepts_the_new_fields(control_plane):
    """--volume, per-role node selectors, Kueue, priority class, success policy, gang scheduling
    and the Istio annotation, through the launcher CLI (validated with the cluster's CRD) and a server dry run."""
    import yaml

    from tests.support.launcher_process import run_launcher

    with control_plane.namespace("e2e-fields") as namespace:
        result = run_launcher(control_plane, "submit", "--backend", "k8s", "-n", namespace, "--name", "fields",
                              "--workers", "2", "--ps", "1", "--dry-run=server",
                              "--volume", "runs:/mnt/runs", "--volume", "data:/mnt/data:ro",
                              "--node-selector", "ps:pool=cpu", "--queue-name", "team-a",
                              "--priority-class", "high", "--success-policy", "AllWorkers",
                              "--gang", "--gang-timeout-seconds", "300", "--gang-queue", "research",
                              "--gang-min-available", "3")
        assert result.returncode == 0, result.stdout + result.stderr
        assert "cannot read CRD" not in result.stderr  # validated with the cluster's own CRD
        stored, policy = yaml.safe_load_all(result.stdout)  # the TFJob as stored, then its NetworkPolicy
        assert policy["kind"] == "NetworkPolicy"
        assert stored["spec"]["successPolicy"] == "AllWorkers" and stored["spec"]["runPolicy"]["suspend"] is True
        assert stored["spec"]["runPolicy"]["schedulingPolicy"] == {"minAvailable": 3, "queue": "research",
                                                                   "priorityClass": "high",
                                                                   "scheduleTimeoutSeconds": 300}
        ps = stored["spec"]["tfReplicaSpecs"]["PS"]["template"]
        assert ps["spec"]["nodeSelector"] == {"pool": "cpu"} and ps["spec"]["priorityClassName"] == "high"
        assert ps["spec"]["volumes"][1] == {"name": "pvc-1", "persistentVolumeClaim": {"claimName": "data"}}
        assert ps["metadata"]["annotations"] == {"sidecar.istio.io/inject": "false"}
        assert control_plane.kubectl_json("get", "tfjobs", "-n", namespace)["items"] == []


def test_without_permission_to_read_crds_the_packaged_copy_is_used_with_a_note(control_plane, tmp_path):
    """A user whose RBAC allows TFJobs but not CustomResourceDefinitions (the usual namespace
    role): one note, then the packaged CRD; the server dry run still goes through."""
    import yaml

    from launcher.schemas import describe
    from tests.support.launcher_process import run_launcher

    with control_plane.namespace("e2e-rbac") as namespace:
        control_plane.service_account(namespace, "submitter", "get,list,watch,create,delete",
                                      "tfjobs.kubeflow.org,networkpolicies.networking.k8s.io,pods,pods/log")
        kubeconfig = control_plane.kubeconfig_as(namespace, "submitter", tmp_path / "submitter")

        result = run_launcher(control_plane, "submit", "--kubeconfig", str(kubeconfig), "-n", namespace,
                              "--name", "rbac", "--workers", "1", "--dry-run=server")
        assert result.returncode == 0, result.stdout + result.stderr
        assert (f"note: cannot read CRD tfjobs.kubeflow.org from {control_plane.server} (not permitted to read it); "
                f"validating with the packaged CRD of {describe('tfjob')}") in result.stderr.splitlines()
        assert [d["metadata"]["name"] for d in yaml.safe_load_all(result.stdout)] == ["rbac", "rbac-tf-port"]
        refused = run_launcher(control_plane, "submit", "--kubeconfig", str(kubeconfig), "-n", namespace,
                               "--name", "rbac", "--workers", "1000000000000", "--dry-run=server")
        # refused before any request, by the launcher's own rules (the spec's, then the packaged CRD's)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert refused.stderr == "error: --workers: replica count 1000000000000 is too large; use at most 2147483647\n"
        assert control_plane.kubectl_json("get", "tfjobs", "-n", namespace)["items"] == []


def test_a_job_for_a_kueue_queue_waits_suspended(control_plane):
    """Without Kueue to admit it, a --queue-name job stays suspended: the real operator
    creates no pods and says Suspended, which `status` shows."""
    from tests.support.launcher_process import run_launcher

    with control_plane.namespace("e2e-queue") as namespace:
        submitted = run_launcher(control_plane, "submit", "--backend", "k8s", "-n", namespace, "--name", "queued",
                                 "--workers", "1", "--ps", "0", "--queue-name", "team-a", "--detach")
        assert submitted.returncode == 0, submitted.stdout + submitted.stderr

        def phase() -> str:
            shown = run_launcher(control_plane, "status", "queued", "--backend", "k8s", "-n", namespace, "-o", "json")
            return json.loads(shown.stdout)["phase"] if shown.returncode == 0 else ""

        wait_for(lambda: phase() == "Suspended", "the operator to mark the job Suspended", timeout=60)
        assert control_plane.kubectl_json("get", "pods", "-n", namespace)["items"] == []


def test_the_live_view_shows_a_queued_job_suspended_until_admitted(control_plane):
    """submit --queue-name follows the job through the real operator's conditions: Suspended
    (queued) from the start, then Resumed when admitted (here: suspend set to false by hand,
    what Kueue does), then pods; status and list -o wide name the queue."""
    from tests.support.launcher_process import launcher_process, run_launcher

    with control_plane.namespace("e2e-admit") as namespace:
        with launcher_process(control_plane, "submit", "--backend", "k8s", "-n", namespace, "--name", "admit",
                              "--workers", "1", "--ps", "0", "--queue-name", "team-a") as live:
            live.wait_for_line("admit: Suspended (queued in Kueue LocalQueue team-a: no pods until Kueue admits it",
                               timeout=60)
            shown = run_launcher(control_plane, "status", "admit", "--backend", "k8s", "-n", namespace)
            assert shown.stdout.splitlines()[:2] == [
                f"TFJob admit (namespace {namespace}, k8s backend): Suspended",
                f"  queued in Kueue LocalQueue team-a: no pods until Kueue admits it (kubectl get workloads -n "
                f"{namespace})"], shown.stdout + shown.stderr
            listed = run_launcher(control_plane, "list", "--backend", "k8s", "-n", namespace, "-o", "wide")
            assert listed.stdout.splitlines()[1].split()[-1] == "team-a", listed.stdout
            assert control_plane.kubectl_json("get", "pods", "-n", namespace)["items"] == []

            control_plane.kubectl("patch", "tfjob", "admit", "-n", namespace, "--type", "merge",
                                  "-p", '{"spec": {"runPolicy": {"suspend": false}}}')
            live.wait_for_line("admit: Resumed (admitted by Kueue)", timeout=60)
            wait_for(lambda: control_plane.kubectl_json("get", "pods", "-n", namespace)["items"],
                     "the operator to create the admitted job's pods", timeout=60)
            lines = live.lines[:]
        states = [line.split(": ", 1)[1].split(" ")[0] for line in lines if line.startswith("admit: ")]
        assert states[:3] == ["Created", "Suspended", "Resumed"], lines  # the real operator's order
