"""The Helm chart (charts/tfjob, real helm binary) against the real apiserver: `helm install`
with the values `launcher render --values-out` writes creates the same TFJob the launcher
submits (but for the labels only Helm sets); `helm uninstall` removes it (and the garbage
collector its pods and services)."""
from __future__ import annotations

import pytest

from tests.support.launcher_process import run_launcher
from tests.e2e.tfjobs import owned, tfjob, wait_pods
from tests.support.chart import without_generated_labels  # helm.sh/chart, managed-by
from tests.support.polling import wait_for
from tests.support.tools import ROOT, run_helm

JOB = "helm-e2e"
FLAGS = ("--name", JOB, "--workers", "2", "--ps", "1", "--chief", "1", "--gpus-per-worker", "1",
         "--accelerator", "nvidia-tesla-t4", "--memory", "ps=2Gi", "--env", "MODE=e2e",
         "--label", "team=ml", "--clean-pod-policy", "All", "--", "--train-steps", "50")
GONE_TIMEOUT_S = 120.0


def launcher_args(*head: str) -> tuple[str, ...]:
    split = FLAGS.index("--")
    return (*head, *FLAGS[:split], "--backend", "k8s", *FLAGS[split:])


@pytest.fixture(scope="module")
def installed(control_plane, tmp_path_factory):
    """(namespace of the helm release, namespace of the launcher's job, helm home)."""
    home = tmp_path_factory.mktemp("helm")
    values = home / "values.yaml"
    rendered = run_launcher(control_plane, *launcher_args("render", "--values-out", str(values)))
    assert rendered.returncode == 0, rendered.stderr
    with control_plane.namespace("e2e-helm") as helm_ns, control_plane.namespace("e2e-cli") as launcher_ns:
        install = helm(control_plane, home, "install", JOB, str(ROOT / "charts" / "tfjob"), "-n", helm_ns,
                       "-f", str(values))
        assert install.returncode == 0, install.stdout + install.stderr
        submitted = run_launcher(control_plane, *launcher_args("submit", "-n", launcher_ns, "--detach"))
        assert submitted.returncode == 0, submitted.stdout + submitted.stderr
        yield helm_ns, launcher_ns, home


def helm(cp, home, *args: str):
    return run_helm(["--kubeconfig", str(cp.kubeconfig), *args], home)


def test_helm_install_creates_the_tfjob_the_launcher_submits(control_plane, installed):
    helm_ns, launcher_ns, _ = installed
    from_helm = without_generated_labels(tfjob(control_plane, helm_ns, JOB))
    from_launcher = without_generated_labels(tfjob(control_plane, launcher_ns, JOB))
    assert from_helm["spec"] == from_launcher["spec"]
    assert from_helm["metadata"]["labels"] == from_launcher["metadata"]["labels"]


def test_helm_uninstall_removes_the_tfjob_and_its_pods(control_plane, installed):
    helm_ns, _, home = installed
    wait_pods(control_plane, helm_ns, JOB, lambda pods: len(pods) == 4, "the operator to create 4 pods")
    result = helm(control_plane, home, "uninstall", JOB, "-n", helm_ns)
    assert result.returncode == 0, result.stdout + result.stderr
    wait_for(lambda: control_plane.kubectl("get", "tfjob", JOB, "-n", helm_ns, check=False).returncode != 0,
             lambda: f"tfjob {JOB} still exists after helm uninstall", GONE_TIMEOUT_S)
    wait_pods(control_plane, helm_ns, JOB, lambda pods: not pods, "garbage collection of the pods")
    wait_for(lambda: not owned(control_plane, "services", helm_ns, JOB),
             lambda: "the services of the uninstalled tfjob are still there", GONE_TIMEOUT_S)
