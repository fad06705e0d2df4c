"""More of the real image on the real node: MultiWorkerMirrored (--ps 0) trains to
Succeeded; `helm install` of charts/tfjob trains to Succeeded; a job that asks for a GPU
the node does not have stays Pending, and the launcher shows the scheduler's reason."""
from __future__ import annotations

import subprocess

from tests.support.launcher_process import launcher_process, run_launcher
from tests.support.node.jobs import training_namespace
from tests.support.polling import wait_for
from tests.support.tools import ROOT, helm, helm_env

RUN_TIMEOUT_S = 600.0
SHORT = ("--train-steps", "60", "--log-every-steps", "20", "--eval-every-steps", "0", "--warmup-steps", "10")


def test_multiworker_mirrored_trains_to_succeeded(node_cluster, trainer_image):
    with training_namespace(node_cluster, "node-mwms") as ns:
        args = ns.submit_args("mnist-mwms", trainer_image, "--workers", "2", "--ps", "0", trainer=SHORT)
        done = run_launcher(node_cluster, *args, timeout=RUN_TIMEOUT_S)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "Succeeded" in ns.tfjob_conditions("mnist-mwms")
        log = node_cluster.kubectl("logs", "mnist-mwms-worker-0", "-n", ns.name).stdout
        assert "Final metrics after 60 steps" in log, log[-3000:]


def test_helm_install_of_the_chart_trains_to_succeeded(node_cluster, trainer_image, tmp_path):
    with training_namespace(node_cluster, "node-helm") as ns:
        values = tmp_path / "values.yaml"
        render = ns.submit_args("mnist-helm", trainer_image, "--workers", "1", "--ps", "1",
                                "--values-out", str(values), trainer=SHORT)
        render[0:3] = ["render"]  # same flags; render takes no --backend
        done = run_launcher(node_cluster, *render)
        assert done.returncode == 0, done.stderr
        env = {**helm_env(tmp_path / "helm"), **node_cluster.env()}
        install = subprocess.run([helm(), "install", "mnist-helm", str(ROOT / "charts" / "tfjob"), "-n", ns.name,
                                  "-f", str(values)], env=env, capture_output=True, text=True, timeout=120)
        assert install.returncode == 0, install.stderr
        wait_for(lambda: {"Succeeded", "Failed"} & set(ns.tfjob_conditions("mnist-helm")),
                 lambda: f"helm's TFJob did not finish: {ns.tfjob_conditions('mnist-helm')}", RUN_TIMEOUT_S)
        assert "Succeeded" in ns.tfjob_conditions("mnist-helm")
        subprocess.run([helm(), "uninstall", "mnist-helm", "-n", ns.name], env=env, capture_output=True,
                       timeout=120, check=False)


def test_gpu_job_stays_pending_with_the_schedulers_reason(node_cluster, trainer_image):
    with training_namespace(node_cluster, "node-gpu") as ns:
        args = ns.submit_args("mnist-gpu", trainer_image, "--workers", "1", "--ps", "0",
                              "--gpus-per-worker", "1", trainer=SHORT)
        with launcher_process(node_cluster, *args) as submit:
            line = submit.wait_for_line("Unschedulable", 120)
            pod = ns.pod("mnist-gpu-worker-0")
        assert line.startswith("[worker-0] Pending (") and "nvidia.com/gpu" in line, submit.output
        assert pod["status"]["phase"] == "Pending"
        assert pod["spec"].get("nodeName") is None
