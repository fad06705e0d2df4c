"""`submit --server-dry-run` sends the TFJob and its NetworkPolicy to the real apiserver with
dryRun=All: a valid job is accepted and nothing is created; one the cluster refuses is refused with the
server's reason.

The launcher's own rules (the spec, then the CRD schema) refuse every bad field the CRD
would, so the cluster refuses for a reason the launcher cannot know, as clusters do: a
real ValidatingAdmissionPolicy (CEL, admissionregistration.k8s.io/v1) of the test's,
bound to the test's namespace, that denies TFJobs with a given label."""
from __future__ import annotations

import contextlib

import pytest
import yaml

from tests.support.launcher_process import run_launcher
from tests.support.polling import wait_for

JOB = "dry-run-e2e"
BAD_CPU = "1.2.3"  # not a Kubernetes quantity: the launcher refuses it before any request
DENIED_LABEL = "e2e-admission=deny"
DENIAL = "TFJobs labelled e2e-admission=deny are not admitted in this namespace"
POLICY_ENFORCED_S = 60.0


def submit_dry_run(cp, namespace: str, *flags: str, env=None):
    return run_launcher(cp, "submit", "--backend", "k8s", "-n", namespace, "--name", JOB,
                        "--workers", "2", "--server-dry-run", *flags, env=env)


@contextlib.contextmanager
def admission_policy(cp, namespace: str, tmp_path):
    """A ValidatingAdmissionPolicy denying labelled TFJobs, bound to `namespace` only;
    deleted afterwards (cluster-scoped: the namespace's deletion would not take it)."""
    name = f"deny-labelled-tfjobs-{namespace}"
    policy = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
              "metadata": {"name": name},
              "spec": {"failurePolicy": "Fail",
                       "matchConstraints": {"resourceRules": [{
                           "apiGroups": ["kubeflow.org"], "apiVersions": ["v1"], "operations": ["CREATE"],
                           "resources": ["tfjobs"]}]},
                       "validations": [{
                           "expression": "!has(object.metadata.labels) || "
                                         "!('e2e-admission' in object.metadata.labels) || "
                                         "object.metadata.labels['e2e-admission'] != 'deny'",
                           "message": DENIAL}]}}
    binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": name},
               "spec": {"policyName": name, "validationActions": ["Deny"],
                        "matchResources": {"namespaceSelector": {"matchLabels": {
                            "kubernetes.io/metadata.name": namespace}}}}}
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump_all([policy, binding]))
    probe = tmp_path / "probe.yaml"  # a labelled TFJob, to see the policy enforced
    probe.write_text(yaml.safe_dump({
        "apiVersion": "kubeflow.org/v1", "kind": "TFJob",
        "metadata": {"name": "probe", "namespace": namespace, "labels": dict([DENIED_LABEL.split("=")])},
        "spec": {"tfReplicaSpecs": {"Worker": {"replicas": 1, "template": {"spec": {"containers": [
            {"name": "tensorflow", "image": "probe"}]}}}}}}))
    cp.kubectl("apply", "-f", str(path))
    try:
        # the API server compiles admitted policies in a loop of its own (about 1 s): an applied
        # policy is enforced a moment later, not when apply returns
        wait_for(lambda: DENIAL in cp.kubectl("create", "--dry-run=server", "-f", str(probe), check=False).stderr,
                 "the admission policy enforced", POLICY_ENFORCED_S)
        yield
    finally:
        cp.kubectl("delete", "-f", str(path), "--ignore-not-found", check=False)


def test_valid_job_is_accepted_and_nothing_is_created(control_plane):
    with control_plane.namespace("e2e-dry") as namespace:
        result = submit_dry_run(control_plane, namespace)
        assert result.returncode == 0, result.stdout + result.stderr
        job, policy = yaml.safe_load_all(result.stdout)  # the server's copies: the TFJob, then its policy
        assert job["metadata"]["name"] == JOB and job["metadata"]["uid"]
        assert policy["kind"] == "NetworkPolicy" and policy["metadata"]["ownerReferences"][0]["uid"] == \
            job["metadata"]["uid"] and policy["metadata"]["uid"] != job["metadata"]["uid"]
        assert control_plane.kubectl_json("get", "tfjobs", "-n", namespace)["items"] == []
        assert control_plane.kubectl_json("get", "networkpolicies", "-n", namespace)["items"] == []


def test_the_launchers_own_check_refuses_the_bad_field_first(control_plane):
    with control_plane.namespace("e2e-dry") as namespace:
        result = submit_dry_run(control_plane, namespace, "--cpu", f"worker={BAD_CPU}")
        assert result.returncode == 2, result.stdout + result.stderr
        assert result.stderr.startswith("error: --cpu worker=: '1.2.3' is not a Kubernetes quantity")
        assert "is invalid" not in result.stderr


def test_a_job_the_cluster_refuses_is_refused_with_its_reason(control_plane, tmp_path):
    with control_plane.namespace("e2e-dry") as namespace, admission_policy(control_plane, namespace, tmp_path):
        result = submit_dry_run(control_plane, namespace, "--label", DENIED_LABEL)
        assert result.returncode == 1, result.stdout + result.stderr
        assert DENIAL in result.stderr and result.stderr.count("\n") == 1, result.stderr  # the server's words, one line
        assert control_plane.kubectl_json("get", "tfjobs", "-n", namespace)["items"] == []
        allowed = submit_dry_run(control_plane, namespace)  # the same job without the label passes the policy
        assert allowed.returncode == 0, allowed.stdout + allowed.stderr
