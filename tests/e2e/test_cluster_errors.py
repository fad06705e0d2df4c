"""A cluster that answers badly, against the real kube-apiserver and training-operator: each
refusal is one line that names the problem and what to do about it. Credentials it does not
accept (401: renew them) and a right RBAC does not grant (403: the Role to ask for), for
TFJobs and serving's InferenceServices alike; a server certificate the kubeconfig's CA does
not verify (not "cannot reach"), a namespace that does not exist (create it), an admission
webhook whose server is down (which one, what to check), a TFJob no training-operator takes
up (the real operator leaves one with runPolicy.managedBy set to Kueue's MultiKueue alone,
as it would a job it does not watch: a note instead of a silent wait) or one whose pod the
apiserver refuses (the operator's FailedCreatePod, in `status` and while followed), `logs`
of a replica that has not started (a note saying so, not silence), and the API server lost
while a job is followed (the job goes on; not "check your kubeconfig")."""
from __future__ import annotations

import threading
from urllib.parse import urlsplit

import pytest
import yaml

from launcher.backends.base import BackendError
from launcher.events import JobCondition
from launcher.render import render
from launcher.spec import JobSpec, ReplicaSpec
from tests.support.certs import Authority
from tests.support.faults import TcpRelay
from tests.support.k8s_backend import Collector, manifest
from tests.support.launcher_process import run_launcher
from tests.support.polling import wait_for
from tests.support.ports import free_port

WAIT_S = 60.0


def kubeconfig_with(cp, path, cluster: dict | None = None, user: dict | None = None):
    """The control plane's kubeconfig with the cluster's and/or the user's fields changed."""
    config = yaml.safe_load(cp.kubeconfig.read_text())
    config["clusters"][0]["cluster"].update(cluster or {})
    if user is not None:
        config["users"][0]["user"] = user
    path.write_text(yaml.safe_dump(config))
    return path


def one_error_line(result) -> str:
    """The command's one error line (exit 1); notes may come before it, nothing else."""
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stderr.splitlines()
    assert lines and lines[-1].startswith("error: "), result.stderr
    assert all(line.startswith("note: ") for line in lines[:-1]), result.stderr
    return lines[-1]


def test_credentials_the_server_refuses_say_to_renew_them(control_plane, tmp_path):
    cp = control_plane
    config = kubeconfig_with(cp, tmp_path / "config", user={"token": "expired-or-unknown-token"})
    for command in (("list",), ("status", "job"), ("submit", "--name", "job", "--workers", "1", "--detach"),
                    ("models", "list", "--backend", "k8s")):  # serving's calls read refusals the same way
        line = one_error_line(run_launcher(cp, *command, "--kubeconfig", str(config)))
        assert "Unauthorized" in line and cp.server in line and "renew them" in line, (command, line)


def test_a_right_rbac_does_not_grant_names_the_role_to_ask_for(control_plane, tmp_path):
    """A user who may read TFJobs but not pods, nor create or delete TFJobs."""
    cp = control_plane
    with cp.namespace("rbac") as ns:
        assert run_launcher(cp, "submit", "--backend", "k8s", "-n", ns, "--name", "job", "--workers", "1",
                            "--detach").returncode == 0
        cp.service_account(ns, "reader", "get,list,watch", "tfjobs.kubeflow.org")
        env = {"KUBECONFIG": str(cp.kubeconfig_as(ns, "reader", tmp_path / "reader"))}
        for command, words in ((("status", "job"), 'cannot list resource "pods"'),
                               (("delete", "job"), 'cannot delete resource "tfjobs"'),
                               (("submit", "--name", "other", "--workers", "1", "--detach"),
                                'cannot create resource "tfjobs"'),
                               (("models", "list", "--backend", "k8s"), 'cannot list resource "inferenceservices"')):
            line = one_error_line(run_launcher(cp, *command, env=env))
            assert words in line and line.endswith("; ask the cluster's admin for that right (the launcher's "
                                                   "k8s/rbac.yaml has the Role it needs)"), (command, line)
        assert [j["metadata"]["name"] for j in cp.kubectl_json("get", "tfjobs", "-n", ns)["items"]] == ["job"]


def test_a_server_certificate_the_kubeconfig_does_not_trust_is_said_so(control_plane, tmp_path):
    cp = control_plane
    other_ca = Authority().write(tmp_path / "other-ca.pem")
    config = kubeconfig_with(cp, tmp_path / "config", cluster={"certificate-authority": str(other_ca)})
    line = one_error_line(run_launcher(cp, "list", "--kubeconfig", str(config)))
    assert f"the Kubernetes API server at {cp.server} answered with a certificate the kubeconfig does not trust" \
        in line and "CERTIFICATE_VERIFY_FAILED" in line and "certificate-authority" in line, line
    assert "cannot reach" not in line and "--backend local" not in line, line


def test_a_namespace_that_does_not_exist_says_to_create_it(control_plane):
    cp = control_plane
    line = one_error_line(run_launcher(cp, "submit", "--backend", "k8s", "-n", "absent-ns", "--name", "job",
                                       "--workers", "1", "--detach"))
    assert 'namespaces "absent-ns" not found' in line and "kubectl create namespace absent-ns" in line, line


def test_an_admission_webhook_nobody_serves_names_it_and_what_to_check(control_plane, tmp_path):
    """A validating webhook for TFJobs whose server is down (its address refuses
    connections), as training-operator's own is while the operator is not running;
    failurePolicy Fail, so the apiserver refuses the TFJob. Only this test's namespace is
    selected, so no other test meets it."""
    cp = control_plane
    hook = "down.e2e.tfjob-launcher.test"
    with cp.namespace("webhook-down") as ns:
        cp.kubectl("label", "namespace", ns, f"e2e-webhook-down={ns}")
        config = tmp_path / "webhook.yaml"
        config.write_text(yaml.safe_dump({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": ns},
            "webhooks": [{"name": hook, "admissionReviewVersions": ["v1"], "sideEffects": "None",
                          "failurePolicy": "Fail", "timeoutSeconds": 5,
                          "clientConfig": {"url": f"https://127.0.0.1:{free_port()}/validate"},
                          "namespaceSelector": {"matchLabels": {"e2e-webhook-down": ns}},
                          "rules": [{"apiGroups": ["kubeflow.org"], "apiVersions": ["v1"], "operations": ["CREATE"],
                                     "resources": ["tfjobs"]}]}]}))
        cp.kubectl("apply", "-f", str(config))
        try:
            line = wait_for(lambda: refused_by_webhook(cp, ns, hook), f"the apiserver calling webhook {hook}", WAIT_S)
        finally:
            cp.kubectl("delete", "-f", str(config), "--ignore-not-found")
        assert line.endswith(f"; the admission webhook {hook} could not be called: the controller that serves it is "
                             "down or unreachable; check that it runs (the training-operator's: kubectl get pods -n "
                             "kubeflow) or ask the cluster's admin"), line
        assert cp.kubectl_json("get", "tfjobs", "-n", ns)["items"] == []


def refused_by_webhook(cp, namespace: str, hook: str) -> str | None:
    """The launcher's error line once the apiserver calls the webhook (its configuration
    takes effect a moment after it is created); None before."""
    result = run_launcher(cp, "submit", "--backend", "k8s", "-n", namespace, "--name", "job", "--workers", "1",
                          "--detach")
    if result.returncode == 0:  # admitted before the webhook was in force: try again
        cp.kubectl("delete", "tfjob", "job", "-n", namespace, "--wait=true")
        return None
    line = one_error_line(result)
    return line if f'failed calling webhook "{hook}"' in line else None


@pytest.fixture
def backend(control_plane):
    from launcher.backends.k8s import KubernetesBackend

    with control_plane.in_process():
        made = []

        def make(kubeconfig=control_plane.kubeconfig):
            made.append(KubernetesBackend(kubeconfig=str(kubeconfig), note=notes.append))
            return made[-1]

        notes: list[str] = []
        make.notes = notes
        try:
            yield make
        finally:
            for one in made:
                one.close()


def test_a_tfjob_no_operator_takes_up_is_noted_while_followed(control_plane, backend):
    cp = control_plane
    k8s = backend()
    k8s.unclaimed_seconds = 2.0
    with cp.namespace("unclaimed", wait=False) as ns:
        job = manifest(namespace=ns, workers=1)
        job["spec"]["runPolicy"]["managedBy"] = "kueue.x-k8s.io/multikueue"  # training-operator leaves it alone
        k8s.submit(job)
        stop = threading.Event()
        events = Collector(k8s.events("mnist", ns, stop))
        try:
            note = wait_for(lambda: backend.notes, "a note on the TFJob nobody took up", WAIT_S)
        finally:
            stop.set()
        assert events.wait_done(timeout=WAIT_S) == []
        assert note == [f"note: tfjob mnist has no status after 2 s: no training-operator has taken it up; check "
                        f"that the Kubeflow training-operator runs (kubectl get pods -n kubeflow), watches namespace "
                        f"{ns} and has tfjob among its --enable-scheme"]
        assert not cp.kubectl_json("get", "tfjob", "mnist", "-n", ns).get("status")


def test_a_pod_the_api_server_refuses_is_named_with_the_operators_reason(control_plane, backend, tmp_path):
    """A LimitRange whose CPU maximum (the containers' default limit too) is below the
    worker's request: the apiserver refuses the worker's pod, and the operator records
    FailedCreatePod on the TFJob and writes no status (each reconcile ends at that error).
    `status` and the followed events name the operator's reason."""
    cp = control_plane
    k8s = backend()
    k8s.unclaimed_seconds = 1.0
    limits = tmp_path / "limits.yaml"
    limits.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "max-cpu"},
                                      "spec": {"limits": [{"type": "Container", "max": {"cpu": "1"}}]}}))
    with cp.namespace("limited", wait=False) as ns:
        cp.kubectl("apply", "-n", ns, "-f", str(limits))
        k8s.submit(render(JobSpec(name="mnist", namespace=ns, replicas={"Chief": ReplicaSpec(1),
                                                                       "Worker": ReplicaSpec(1, cpu="2")})))
        wait_for(lambda: any(e.get("reason") == "FailedCreatePod" for e in
                             cp.kubectl_json("get", "events", "-n", ns)["items"]), "the operator's FailedCreatePod",
                 WAIT_S)
        why = ('the training-operator reports FailedCreatePod: Error creating: Pod "mnist-worker-0" is invalid: '
               'spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to cpu limit '
               f'of 1; fix that and submit again with --replace (kubectl describe tfjob mnist -n {ns} lists its '
               'events)')
        assert k8s.status("mnist", ns).phase == "Pending"
        assert backend.notes == [f"note: tfjob mnist has no status: {why}"]
        assert list(k8s.logs("mnist", ns, replica="worker-0")) == []
        assert backend.notes.pop() == "note: worker-0 has not started (it has no pod yet): no log yet; follow it with -f"
        stop = threading.Event()
        events = Collector(k8s.events("mnist", ns, stop))
        try:
            wait_for(lambda: len(backend.notes) == 2, "a note while following", WAIT_S)
        finally:
            stop.set()
        events.wait_done(timeout=WAIT_S)
        assert backend.notes[1] == f"note: tfjob mnist has no status after 1 s: {why}"


def test_the_log_of_a_replica_whose_pod_waits_is_a_note_not_nothing(control_plane, backend):
    """The ps cannot be placed (a node selector no node has): its pod stays Pending."""
    cp = control_plane
    k8s = backend()
    with cp.namespace("waiting", wait=False) as ns:
        k8s.submit(manifest(namespace=ns, workers=1, role_node_selectors={"PS": {"pool": "absent"}}))
        wait_for(lambda: [r.phase for r in k8s.status("mnist", ns).replicas if r.replica == "ps-0"] == ["Pending"],
                 "ps-0 Pending", WAIT_S)
        # no status poll above noted the operator's Unschedulable warning (under load it comes
        # before the TFJob's first condition): it is no reason to submit again
        assert list(k8s.logs("mnist", ns, replica="ps-0")) == []
        assert backend.notes == ["note: ps-0 has not started (its pod is Pending): no log yet; follow it with -f"]


def test_the_api_server_lost_while_a_job_is_followed_says_the_job_goes_on(control_plane, backend, tmp_path,
                                                                          monkeypatch):
    """Through a relay in front of the real apiserver that resets every connection and
    refuses new ones, as a restarting apiserver does; the watches give up after one retry."""
    from launcher.backends.k8s import watch as k8s_watch

    cp = control_plane
    monkeypatch.setattr(k8s_watch, "MAX_FAILURES", 1)
    with TcpRelay(urlsplit(cp.server).port) as relay, cp.namespace("lost", wait=False) as ns:
        through = f"https://127.0.0.1:{relay.port}"
        k8s = backend(kubeconfig_with(cp, tmp_path / "relayed", cluster={"server": through}))
        k8s.submit(manifest(namespace=ns, workers=1))
        events = Collector(k8s.events("mnist", ns))
        events.wait_for(lambda items: any(isinstance(e, JobCondition) for e in items), "a condition", WAIT_S)
        listed = lambda: all(k8s.api.received.snapshot().get(kind, {}).get("lists")  # noqa: E731
                             for kind in ("tfjob", "pod", "event"))
        wait_for(listed, "the three watches listed", WAIT_S)  # the server has answered each of them
        relay.down()
        with pytest.raises(BackendError) as error:
            events.wait_done(timeout=WAIT_S)
        message = str(error.value)
        assert message.startswith(f"lost the Kubernetes API server at {through}: ") and \
            "the job goes on in the cluster" in message and "status -w" in message, message
        assert "--backend local" not in message and "kubeconfig" not in message, message
