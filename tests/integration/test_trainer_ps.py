"""Parameter-server training across real processes on 127.0.0.1 (real MNIST slice)."""
from __future__ import annotations

import json
import math
import re
import signal
from pathlib import Path

import pytest

from tests.support.polling import wait_for
from tests.support.ports import listening
from tests.support.trainer_cluster import (TEST_SLICE, TrainerCluster, evaluate_export, export_path, final_metrics,
                                           progress, run_module, summaries)

pytestmark = pytest.mark.slow
WAIT_S = 540
_VARIABLE = re.compile(r"^Variable (\S+) \((.*)\) on (.+)$", re.M)


def placements(log: str) -> dict[str, list[str]]:
    return {name: devices.split(", ") for name, _, devices in _VARIABLE.findall(log)}


def sizes(log: str) -> dict[str, int]:
    """{weight: how many numbers it holds}, from the chief's Variable lines."""
    return {name: math.prod(int(d) for d in re.findall(r"\d+", shape)) for name, shape, _ in _VARIABLE.findall(log)}


def args(job_dir: Path, data_dir: str, steps: int, every: int) -> list[str]:
    return ["--job-dir", str(job_dir), "--data-dir", data_dir, "--train-steps", str(steps),
            "--batch-size", "16", "--steps-per-execution", "5", "--log-every-steps", "20",
            "--eval-every-steps", str(every), "--checkpoint-every-steps", str(every)]


def test_chief_ps_and_two_workers_train_and_all_exit_0(mnist_dir, tmp_path):  # noqa: F811
    job = tmp_path / "job"
    # 5 saves: TensorFlow's saver, given variables on the ps, warns of retracing at the 5th
    flags = [*args(job, mnist_dir, 200, 100), "--histogram-every-steps", "100", "--checkpoint-every-steps", "40"]
    scratch = tmp_path / "tmp"  # the replicas' TMPDIR
    scratch.mkdir()
    with TrainerCluster({"Chief": 1, "PS": 1, "Worker": 2}, flags, tmp_path, env={"TMPDIR": str(scratch)}) as cluster:
        codes = cluster.wait(WAIT_S)
        chief = cluster.log("chief-0")
        assert codes == {"chief-0": 0, "ps-0": 0, "worker-0": 0, "worker-1": 0}, cluster.tails()
        assert cluster.lines_with("AutoGraph could not transform") == []  # a user reads these logs
        assert cluster.lines_with("triggered tf.function retracing") == []
        assert list(scratch.iterdir()) == []  # AutoGraph's temporary files went with the processes

        variables = placements(chief)
        assert len(variables) == 8
        assert all(device.startswith("/job:ps/replica:0/task:0/") for devices in variables.values()
                   for device in devices), variables

        lines = progress(chief)
        assert [p.step for p in lines] == list(range(20, 201, 20)) and {p.total for p in lines} == {200}
        assert lines[-1].loss < lines[0].loss, [p.loss for p in lines]
        step, _, accuracy = final_metrics(chief)
        assert step == 200 and accuracy > 0.5

        for name in ("ps-0", "worker-0", "worker-1"):
            assert "Chief marked the job done" in cluster.log(name)

        # each worker prints its own Train lines, every --log-every-steps of its own steps
        # (the chief's lines above are the chief's only: its log has no worker lines)
        worker_steps = 0
        for index in (0, 1):
            log = cluster.log(f"worker-{index}")
            assert f"Train [worker/{1 - index}]" not in log
            mine = [line for line in log.splitlines() if line.startswith(f"Train [worker/{index}] step ")]
            lines = progress("\n".join(mine))
            assert len(lines) == len(mine) >= 1, log[-3000:]  # the launcher's parser reads them
            assert [p.step for p in lines] == list(range(20, 20 * len(lines) + 1, 20))
            assert all(p.total is None and 0 < p.loss < 10 and 0 <= p.accuracy <= 1 for p in lines)
            for line in mine:  # the worker's clock: time since its first call, its own step rate
                elapsed, rate = map(float, re.search(r"\((\d+\.\d) s\) (\d+\.\d\d) steps/s$", line).groups())
                assert 0 < elapsed < WAIT_S and 0 < rate < 10_000, line
            worker_steps += lines[-1].step
        assert worker_steps <= 200

    export = Path(export_path(chief))
    assert export.parent == job / "export" and (export / "saved_model.pb").is_file()
    # the exported model is the trained one: its test accuracy is the chief's final Eval line
    exported_accuracy, examples = evaluate_export(str(export), mnist_dir)
    assert examples == TEST_SLICE and abs(exported_accuracy - accuracy) <= 0.00005 + 1e-9, (exported_accuracy, accuracy)
    assert f"Eval step 200: loss {final_metrics(chief)[1]:.4f}, accuracy {accuracy:.4f}" in chief
    assert (job / "checkpoints" / "ckpt-200.index").is_file()
    assert list((job / "eval").glob("events.out.tfevents.*"))
    assert json.loads((job / "done.json").read_text())["step"] == 200

    # TensorBoard from the coordinator: the model graph, the learning rate with every Train
    # line (Adam's schedule at its step count on the ps: warm-up over 50 steps, then cosine
    # to 1% at step 200) and every weight's histogram, read whole from the ps, every 100 steps
    board = summaries(str(job / "train"))
    assert board["graph"] and board["scalars"]["learning_rate"] == list(range(20, 201, 20))
    rates = board["values"]["learning_rate"]
    assert 0 < rates[0] < 0.003 and max(rates) <= 0.003 * (1 + 1e-6), rates
    assert rates[-1] == pytest.approx(0.003 * 0.01, rel=1e-3), rates
    weights = sizes(chief)
    assert board["histograms"] == {name: [100, 200] for name in weights}
    assert all(board["values"][name] == [weights[name]] * 2 for name in weights), board["values"]

    request = tmp_path / "request.json"
    assert run_module("trainer.make_request", ["--data-dir", mnist_dir, "--count", "4", "--out", str(request)]).returncode == 0
    done = run_module("trainer.predict", ["--model-dir", str(export), "--json-instances", str(request)])
    assert done.returncode == 0, done.stderr[-2000:]
    rows = done.stdout.splitlines()
    assert rows[0] == "KEY  CLASSES  PROBABILITIES" and len(rows) == 5
    for key, row in enumerate(rows[1:]):
        fields = row.split(maxsplit=2)
        probabilities = json.loads(fields[2])
        assert int(fields[0]) == key and 0 <= int(fields[1]) <= 9 and len(probabilities) == 10
        assert abs(sum(probabilities) - 1) < 0.01


def test_variables_partition_across_two_ps_and_the_evaluator_follows(mnist_dir, tmp_path):  # noqa: F811
    job = tmp_path / "job"
    counts = {"Chief": 1, "PS": 2, "Worker": 1, "Evaluator": 1}
    # every replica polls each 4 s: the evaluator finds the last checkpoint seconds after the
    # chief wrote it, which without the chief's wait is after the job was marked done
    flags = [*args(job, mnist_dir, 40, 20), "--histogram-every-steps", "40", "--poll-seconds", "4"]
    with TrainerCluster(counts, flags, tmp_path) as cluster:
        codes = cluster.wait(WAIT_S)
        assert set(codes.values()) == {0}, cluster.tails()
        variables = placements(cluster.log("chief-0"))
        dense = sizes(cluster.log("chief-0"))["mnist/dense/kernel"]
        # the 12.8 MB dense kernel is split by MinSizePartitioner, one shard per ps task
        assert sorted(d.split("/device")[0] for d in variables["mnist/dense/kernel"]) == \
            ["/job:ps/replica:0/task:0", "/job:ps/replica:0/task:1"]
        assert {d.split("/device")[0] for devices in variables.values() for d in devices} == \
            {"/job:ps/replica:0/task:0", "/job:ps/replica:0/task:1"}
        evaluator = cluster.log("evaluator-0")
        assert re.findall(r"^Eval step (\d+): loss", evaluator, re.M) == ["20", "40"]  # each once, in order
        assert "Chief marked the job done" in evaluator
    assert list((job / "evaluator").glob("events.out.tfevents.*"))
    # the last checkpoint was evaluated before the chief marked the job done (a TFJob ends
    # with its chief: the operator or the local backend then stops the evaluator)
    evaluated = job / "evaluator" / "evaluated.json"
    assert json.loads(evaluated.read_text()) == {"step": 40}
    assert evaluated.stat().st_mtime_ns <= (job / "done.json").stat().st_mtime_ns
    # the histogram of the kernel split over both ps holds all of it, not one shard
    board = summaries(str(job / "train"))
    assert board["histograms"]["mnist/dense/kernel"] == [40] and board["values"]["mnist/dense/kernel"] == [dense]

    # the 2-ps checkpoint restores whole into 1 ps: weights and Adam's state (m, v, iterations)
    probe = run_module("tests.support.restore_probe", [str(job), "--model", "mnist", "--ps", "1"])
    assert probe.returncode == 0, probe.stderr[-3000:]
    report = json.loads(probe.stdout.splitlines()[-1])
    assert report["checkpoint"].endswith("/checkpoints/ckpt-40")
    restored = report["variables"]
    assert {"model/mnist.dense.kernel", "optimizer/mnist.dense.kernel.momentum",
            "optimizer/mnist.dense.kernel.velocity", "optimizer/iteration", "step"} <= restored.keys()
    assert [key for key, v in restored.items() if not v["equal"]] == []
    slots = [key for key in restored if key.endswith((".momentum", ".velocity"))]
    assert len(slots) == 16 and all(restored[key]["nonzero"] for key in slots)  # trained, not zeros
    assert restored["optimizer/iteration"]["value"] >= 40 and restored["step"]["value"] == 40
    assert report["slots"].keys() == set(slots) and all(report["slots"].values())

    # and each shard's slots are stored at that shard's rows: restored into the 2 ps it was
    # written from, the slot Adam updates for each shard is that block of the stored slot
    # (a mix-up would restore each block into the other shard's rows on a change of ps count)
    probe = run_module("tests.support.restore_probe", [str(job), "--model", "mnist", "--ps", "2"])
    assert probe.returncode == 0, probe.stderr[-3000:]
    report = json.loads(probe.stdout.splitlines()[-1])
    assert report["variables"]["optimizer/mnist.dense.kernel.momentum"]["shards"] == 2
    assert [key for key, v in report["variables"].items() if not v["equal"]] == []
    assert report["slots"].keys() == set(slots) and all(report["slots"].values()), report["slots"]


def test_servers_exit_1_when_the_chief_is_gone_for_good(mnist_dir, tmp_path):  # noqa: F811
    """The servers are started once the chief listens: a ps or worker starts in about a
    second, the chief in several (it imports all of TensorFlow and Keras), and a chief not
    there yet for 3 s is gone too (the orphan rule: "or never came")."""
    env = {"TRAINER_ORPHAN_SECONDS": "3"}
    cluster = TrainerCluster({"Chief": 1, "PS": 1, "Worker": 1}, args(tmp_path / "job", mnist_dir, 100000, 0),
                             tmp_path, env=env)
    cluster.start(["chief-0"])

    def chief_alive() -> None:
        assert cluster.replicas["chief-0"].process.poll() is None, cluster.tails()

    try:
        wait_for(lambda: listening(cluster.address("chief", 0)), "the chief's port", WAIT_S, check=chief_alive)
        cluster.start()
        cluster.wait_for_line("chief-0", "Variable mnist/conv1/kernel", WAIT_S)
        cluster.replicas["chief-0"].process.send_signal(signal.SIGKILL)
        codes = cluster.wait(120, names=["ps-0", "worker-0"])
        assert codes == {"ps-0": 1, "worker-0": 1}
        for name in codes:
            assert "unreachable for 3 s (job not marked done); exiting" in cluster.log(name)
    finally:
        cluster.stop()
