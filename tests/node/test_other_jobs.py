"""More of the real image on the real node: MultiWorkerMirrored (--ps 0) trains to
Succeeded; `helm install` of charts/tfjob trains to Succeeded; a job that asks for a GPU
the node does not have stays Pending, and the launcher shows the scheduler's reason; a
user's own package on the claim runs instead of the image's trainer (--module-name,
--package-path), with the operator's TF_CONFIG."""
from __future__ import annotations

import json
import subprocess

from tests.support.launcher_process import launcher_process, run_launcher
from tests.support.node.jobs import MOUNT, training_namespace
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


# A user's trainer package, as gcloud's --package-path would upload it: each replica writes
# what it saw (the operator's TF_CONFIG task, its working directory, its arguments, where its
# module was imported from) to the job dir; the chief ends the job once the worker has written.
USER_TASK = """\
import argparse, json, os, sys, time

parser = argparse.ArgumentParser()
parser.add_argument("--job-dir")
parser.add_argument("--data-dir")
args, rest = parser.parse_known_args()
task = json.loads(os.environ["TF_CONFIG"])["task"]
me = f"{task['type']}-{task['index']}"
os.makedirs(args.job_dir, exist_ok=True)
seen = {"task": task, "cwd": os.getcwd(), "data_dir": args.data_dir, "rest": rest, "module": __file__,
        "uid": os.getuid()}
with open(os.path.join(args.job_dir, me + ".json"), "w") as out:
    json.dump(seen, out)
print(f"my_trainer.task ran as {me}", flush=True)
if task["type"] == "chief":
    deadline = time.monotonic() + 120
    while not os.path.exists(os.path.join(args.job_dir, "worker-0.json")):
        if time.monotonic() > deadline:
            sys.exit("no worker-0.json after 120 s")
        time.sleep(0.2)
"""


def test_a_users_own_package_runs_with_module_name(node_cluster, trainer_image):
    job = "own-pkg"
    with training_namespace(node_cluster, "node-module") as ns:
        package = ns.shared / "code" / "my_trainer"
        package.mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "task.py").write_text(USER_TASK)
        args = ns.submit_args(job, trainer_image, "--chief", "1", "--workers", "1", "--ps", "0",
                              "--module-name", "my_trainer.task", "--package-path", f"{MOUNT}/code/my_trainer",
                              trainer=("--extra", "1"))
        done = run_launcher(node_cluster, *args, timeout=RUN_TIMEOUT_S)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "[chief-0] my_trainer.task ran as chief-0" in done.stdout, done.stdout
        assert "Succeeded" in ns.tfjob_conditions(job)
        for rtype in ("chief", "worker"):
            seen = json.loads((ns.job_dir(job) / f"{rtype}-0.json").read_text())
            assert seen == {"task": {"type": rtype, "index": 0}, "cwd": f"{MOUNT}/code", "data_dir": f"{MOUNT}/mnist",
                            "rest": ["--extra", "1"], "module": f"{MOUNT}/code/my_trainer/task.py", "uid": 1000}, seen
