"""Terminal safety against the real API server: a refusal whose words someone else wrote
(here a ValidatingAdmissionPolicy's message, as a cluster admin's policy or a webhook
would answer) holding control sequences reaches the user's terminal as text, ESC shown as
^[ as kubectl's printers show it, not as a sequence that clears the screen or sets the
window title."""
from __future__ import annotations

import yaml

from tests.support.k8s_backend import manifest
from tests.support.launcher_process import run_launcher
from tests.support.polling import wait_for

POLICY = "e2e-hostile-message"
HOSTILE = "no\x1b]0;pwned\x07\x1b[2J here"
SHOWN = "no^[]0;pwned\\x07^[[2J here"
ENFORCED_S = 60.0  # the API server's admission plugin picks a new policy up from its informer


def policy_documents(namespace: str) -> str:
    rules = [{"apiGroups": ["kubeflow.org"], "apiVersions": ["v1"], "operations": ["CREATE"],
              "resources": ["tfjobs"]}]
    return yaml.safe_dump_all([
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
         "metadata": {"name": POLICY},
         "spec": {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": rules},
                  "validations": [{"expression": "false", "message": HOSTILE}]}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
         "metadata": {"name": POLICY},
         "spec": {"policyName": POLICY, "validationActions": ["Deny"],
                  "matchResources": {"namespaceSelector": {"matchLabels": {
                      "kubernetes.io/metadata.name": namespace}}}}}])


def test_a_refusal_with_control_sequences_is_one_line_of_text(control_plane, tmp_path):
    cp = control_plane
    with cp.namespace("e2e-terminal") as ns:
        manifest = tmp_path / "policy.yaml"
        manifest.write_text(policy_documents(ns))
        cp.kubectl("apply", "-f", str(manifest))
        try:
            submit = ("submit", "--backend", "k8s", "-n", ns, "--name", "hostile", "--workers", "1", "--ps", "0",
                      "--dry-run=server")

            def refused():
                done = run_launcher(cp, *submit)
                return done if done.returncode == 1 else None

            done = wait_for(refused, "the ValidatingAdmissionPolicy enforced", ENFORCED_S, interval=1.0)
            (line,) = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
            assert SHOWN in line, line
            assert "\x1b" not in done.stderr and "\x07" not in done.stderr, repr(done.stderr)
        finally:
            cp.kubectl("delete", "-f", str(manifest), "--ignore-not-found")


def test_a_hostile_replica_type_is_listed_as_text(control_plane, tmp_path):
    """A TFJob someone else created whose replica type (a free map key of tfReplicaSpecs,
    which the API server and the training-operator's webhook take) holds control
    sequences: `list` shows it as text."""
    cp = control_plane
    with cp.namespace("e2e-terminal-list") as ns:
        job = manifest("hostile", workers=1, ps=0, chief=0, namespace=ns)
        specs = job["spec"]["tfReplicaSpecs"]
        specs["Worker\x1b]0;pwned\x07"] = specs.pop("Worker")
        path = tmp_path / "tfjob.yaml"
        path.write_text(yaml.safe_dump(job))
        cp.kubectl("create", "-f", str(path))
        done = run_launcher(cp, "list", "--backend", "k8s", "-n", ns)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "worker^[]0;pwned\\x07=1" in done.stdout, done.stdout
        assert "\x1b" not in done.stdout + done.stderr, repr(done.stdout + done.stderr)
