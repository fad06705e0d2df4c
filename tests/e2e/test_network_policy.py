"""The job's NetworkPolicy on the real control plane: `submit` creates it after the TFJob
(the real apiserver validates it), owned by the TFJob, selecting exactly the pods the real
training-operator made for the job; the real garbage collector deletes it with the job;
`--no-network-policy` leaves it out; a user whose RBAC forbids NetworkPolicies gets one line
and the TFJob deleted again (nothing stays applied), and a server dry run refused before
that (it sends the policy too). (Whether traffic is actually filtered
depends on the cluster's network plugin; see the README's Security section.)"""
from __future__ import annotations

from tests.support.launcher_process import run_launcher
from tests.e2e.tfjobs import JOB_NAME_LABEL, log_text, owned, tfjob, wait_pods, wait_running
from tests.support.polling import wait_for

JOB = "netpol"
GC_TIMEOUT_S = 60.0


def policies(cp, namespace: str) -> list[dict]:
    return cp.kubectl_json("get", "networkpolicy", "-n", namespace)["items"]


def test_policy_is_owned_by_the_job_selects_its_pods_and_goes_with_it(control_plane):
    cp = control_plane
    with cp.namespace("e2e-netpol") as ns:
        done = run_launcher(cp, "submit", "--backend", "k8s", "-n", ns, "--name", JOB, "--workers", "1",
                            "--ps", "1", "--detach")
        assert done.returncode == 0, done.stdout + done.stderr
        (policy,) = policies(cp, ns)
        job = tfjob(cp, ns, JOB)
        assert policy["metadata"]["name"] == f"{JOB}-tf-port"
        assert [(o["kind"], o["name"], o["uid"], o.get("blockOwnerDeletion")) for o in
                policy["metadata"]["ownerReferences"]] == [("TFJob", JOB, job["metadata"]["uid"], True)]
        job_pods = {"matchLabels": {JOB_NAME_LABEL: JOB}}
        assert policy["spec"]["podSelector"] == job_pods
        assert policy["spec"]["ingress"] == [{"from": [{"podSelector": job_pods}],
                                              "ports": [{"protocol": "TCP", "port": 2222}]}]
        pods = wait_pods(cp, ns, JOB, lambda ps: len(ps) == 3, "the operator's 3 pods")
        selected = cp.kubectl_json("get", "pods", "-n", ns, "-l", f"{JOB_NAME_LABEL}={JOB}")["items"]
        assert {p["metadata"]["name"] for p in selected} == {p["metadata"]["name"] for p in pods}

        done = run_launcher(cp, "delete", JOB, "--backend", "k8s", "-n", ns, "--wait")
        assert done.returncode == 0, done.stdout + done.stderr
        wait_for(lambda: not policies(cp, ns), lambda: f"the NetworkPolicy outlived its TFJob: {policies(cp, ns)}",
                 GC_TIMEOUT_S)
        assert not owned(cp, "pods", ns, JOB)


def test_no_network_policy_leaves_it_out(control_plane):
    cp = control_plane
    with cp.namespace("e2e-netpol-off") as ns:
        done = run_launcher(cp, "submit", "--backend", "k8s", "-n", ns, "--name", JOB, "--workers", "1",
                            "--ps", "0", "--no-network-policy", "--detach")
        assert done.returncode == 0, done.stdout + done.stderr
        assert tfjob(cp, ns, JOB)["metadata"]["name"] == JOB
        assert policies(cp, ns) == []


def test_a_refused_policy_deletes_the_tfjob_again(control_plane, tmp_path):
    """A Role with TFJobs but no NetworkPolicies: the real apiserver creates the TFJob, then
    forbids the policy; submit deletes the TFJob again and says so in one line, exit 1."""
    cp = control_plane
    with cp.namespace("e2e-netpol-refused") as ns:
        cp.service_account(ns, "submitter", "get,list,watch,create,delete", "tfjobs.kubeflow.org")
        env = {"KUBECONFIG": str(cp.kubeconfig_as(ns, "submitter", tmp_path / "submitter"))}
        dry = run_launcher(cp, "submit", "--backend", "k8s", "-n", ns, "--name", JOB, "--workers", "1", "--ps", "0",
                           "--dry-run=server", env=env)  # a server dry run sends both, as kubectl's: refused
        assert (dry.returncode, dry.stdout) == (1, ""), dry.stdout + dry.stderr
        (line,) = [line for line in dry.stderr.splitlines() if line.startswith("error: ")]
        assert line.startswith(f"error: the server refused networkpolicy {JOB}-tf-port (Forbidden") and \
            line.endswith("submit with --no-network-policy to run without one") and "deleted again" not in line, line
        assert cp.kubectl_json("get", "tfjobs", "-n", ns)["items"] == []
        done = run_launcher(cp, "submit", "--backend", "k8s", "-n", ns, "--name", JOB, "--workers", "1", "--ps", "0",
                            "--detach", env=env)
        assert done.returncode == 1, done.stdout + done.stderr
        (line,) = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
        assert f"networkpolicy {JOB}-tf-port" in line and "forbidden" in line.lower(), line
        assert f"tfjob {JOB} was deleted again (nothing applied)" in line and "--no-network-policy" in line, line
        wait_for(lambda: not cp.kubectl_json("get", "tfjobs", "-n", ns)["items"], "the TFJob deleted again",
                 GC_TIMEOUT_S)
        assert policies(cp, ns) == []


def test_the_shipped_launcher_role_is_enough(control_plane, tmp_path):
    """k8s/rbac.yaml's least-privilege Role (as the tfjob-launcher service account, with a
    real token; no update or patch of TFJobs, no get of NetworkPolicies) lets every job
    command do its work: a server dry run, `submit` (the TFJob and its NetworkPolicy),
    `status`, `list`, `logs`, `submit --replace` and `delete`."""
    cp = control_plane
    with cp.namespace("e2e-netpol-rbac") as ns:
        env = cp.launcher_account(ns, tmp_path / "launcher.kubeconfig")

        def launcher(*args: str):
            done = run_launcher(cp, *args, "--backend", "k8s", "-n", ns, env=env)
            assert done.returncode == 0, (args, done.stdout + done.stderr)
            return done

        submit = ("submit", "--name", JOB, "--workers", "1", "--ps", "0")
        launcher(*submit, "--dry-run=server")
        launcher(*submit, "--detach")
        (policy,) = policies(cp, ns)
        assert policy["metadata"]["ownerReferences"][0]["uid"] == tfjob(cp, ns, JOB)["metadata"]["uid"]
        wait_running(cp, ns, JOB, 1)
        assert "worker-0" in launcher("status", JOB).stdout
        assert JOB in launcher("list").stdout
        assert launcher("logs", JOB).stdout.splitlines() == [f"[worker-0] {line}" for line in log_text()]
        first = tfjob(cp, ns, JOB)["metadata"]["uid"]
        launcher(*submit, "--replace", "--detach")
        (policy,) = policies(cp, ns)
        assert policy["metadata"]["ownerReferences"][0]["uid"] == tfjob(cp, ns, JOB)["metadata"]["uid"] != first
        launcher("delete", JOB, "--wait")
        wait_for(lambda: not policies(cp, ns), lambda: f"the NetworkPolicy outlived its TFJob: {policies(cp, ns)}",
                 GC_TIMEOUT_S)
