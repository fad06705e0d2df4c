"""The seed's run on the real node: `launcher submit --config examples/taxi/config_ps.yaml
-- --model taxi` (Cloud ML CUSTOM: masterType standard, 1 ps, 4 workers) of the real trainer
image trains the Chicago taxi wide & deep model in 6 real pods on the real taxi records
(prepared on the host by `python -m trainer.data --dataset taxi`, on the claim) to
Succeeded, and the SavedModel it exported answers raw trip instances with
`python -m trainer.predict` on the host.

Requests: the config's legacy machine type `standard` is not translated into CPU or memory
requests (launcher/cloudml.py), so the 6 pods request nothing and fit the 2-core node;
the test checks that, since a request per replica would not fit."""
from __future__ import annotations

import json
import os
import re
import shutil

from tests.support.launcher_process import run_launcher
from tests.support.node.jobs import training_namespace
from tests.support.tools import ROOT
from tests.support.taxi_data import predict_raw_trips

JOB = "taxi-ps"
STEPS = 120
RUN_TIMEOUT_S = 900.0
CONFIG_PS = ROOT / "examples" / "taxi" / "config_ps.yaml"
TRAINER_ARGS = ("--model", "taxi", "--train-steps", str(STEPS), "--batch-size", "64", "--steps-per-execution", "5",
                "--log-every-steps", "20", "--eval-every-steps", "0", "--checkpoint-every-steps", "0",
                "--threads", "1")


def test_the_seeds_config_ps_trains_taxi_to_succeeded_and_the_export_predicts_raw_trips(
        node_cluster, trainer_image, taxi_dir, tmp_path):  # noqa: F811
    with training_namespace(node_cluster, "node-taxi") as ns:
        shutil.copytree(taxi_dir, ns.shared / "taxi")
        os.chmod(ns.shared / "taxi", 0o755)  # a pytest tmp folder is 0700; the pods run as uid 1000
        args = ns.submit_args(JOB, trainer_image, "--config", str(CONFIG_PS), trainer=TRAINER_ARGS, data="taxi")
        done = run_launcher(node_cluster, *args, timeout=RUN_TIMEOUT_S)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert "Succeeded" in ns.tfjob_conditions(JOB)

        chief = ns.pod(f"{JOB}-chief-0")  # kept: cleanPodPolicy Running deletes only pods still running
        container = chief["spec"]["containers"][0]
        env = {e["name"]: e.get("value") for e in container.get("env", [])}
        cluster = json.loads(env["TF_CONFIG"])["cluster"]
        assert {role: len(hosts) for role, hosts in cluster.items()} == {"chief": 1, "ps": 1, "worker": 4}
        tfjob = node_cluster.kubectl_json("get", "tfjob", JOB, "-n", ns.name)
        for role, spec in tfjob["spec"]["tfReplicaSpecs"].items():
            resources = spec["template"]["spec"]["containers"][0].get("resources") or {}
            assert not resources.get("requests"), (role, resources)  # `standard` asks for no CPU

        log = node_cluster.kubectl("logs", f"{JOB}-chief-0", "-n", ns.name).stdout
        assert f"Final metrics after {STEPS} steps" in log, log[-3000:]
        exports = sorted((ns.job_dir(JOB) / "export").iterdir())
        assert exports, f"no export in {ns.job_dir(JOB)}:\n{log[-3000:]}"

        accuracy, card, cash = predict_raw_trips(exports[-1], taxi_dir, tmp_path)
    # The export is the model the chief evaluated (about 0.89 after 120 steps; always 0 scores 0.767);
    # the short trip paid by card scores above the same paid cash (by how much varies from run to run
    # after 120 asynchronous steps: 0.13-0.83 in six runs).
    final = float(re.search(rf"Final metrics after {STEPS} steps: loss \S+, accuracy (\S+?),", log).group(1))
    assert abs(accuracy - final) < 0.001 and accuracy > 0.85, (accuracy, final)
    assert cash < 0.05 and card > cash, (card, cash)
