"""`--model taxi` in real processes on 127.0.0.1 on the real taxi trips: one process (no
TF_CONFIG; its export predicted on raw trip instances), parameter-server training (likewise),
MultiWorkerMirrored, and the seed's Cloud ML config (examples/taxi/config_ps.yaml: 1 ps + 4
workers) through `python -m launcher submit --backend local` to Succeeded. Short runs
(2-core machines)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support.launcher_process import run_launcher
from tests.support.tools import ROOT
from tests.support.taxi_data import ONE_PROCESS_EVAL_EVERY, ONE_PROCESS_STEPS, predict_raw_trips, taxi_flags
from tests.support.trainer_cluster import TrainerCluster, export_path, progress, run_module, summaries
from trainer.models.taxi import features

pytestmark = pytest.mark.slow
WAIT_S = 600
CONFIG_PS = ROOT / "examples" / "taxi" / "config_ps.yaml"
EVAL_STEPS = list(range(ONE_PROCESS_EVAL_EVERY, ONE_PROCESS_STEPS + 1, ONE_PROCESS_EVAL_EVERY))
_FINAL = re.compile(r"^Final metrics after (\d+) steps: loss ([0-9.]+), accuracy ([0-9.]+), auc ([0-9.]+)$", re.M)


def final(log: str) -> tuple[int, float, float, float]:
    match = _FINAL.search(log)
    assert match, log[-3000:]
    return int(match[1]), float(match[2]), float(match[3]), float(match[4])


def test_one_process_learns_and_the_export_predicts_raw_trips(taxi_job, taxi_dir, tmp_path):  # noqa: F811
    log = taxi_job.log
    assert "Variable wide_weights/embeddings (197, 1) on /job:localhost/" in log, log[-3000:]
    lines = progress(log)
    assert [p.step for p in lines] == list(range(20, ONE_PROCESS_STEPS + 1, 20)) and lines[-1].loss < lines[0].loss
    assert re.findall(r"^Eval step (\d+): loss [0-9.]+, accuracy [0-9.]+, auc [0-9.]+$", log, re.M) == \
        [str(step) for step in EVAL_STEPS], log[-3000:]
    step, _, accuracy, auc = final(log)
    assert step == ONE_PROCESS_STEPS and auc > 0.9 and accuracy > 0.8, (accuracy, auc)  # big tippers: 22% of the trips

    export = Path(export_path(log))
    assert export.parent == taxi_job.export
    exported, card, cash = predict_raw_trips(export, taxi_dir, tmp_path)
    assert abs(exported - accuracy) < 0.001, (exported, accuracy)  # the model the process evaluated
    assert cash < 0.05 and card > cash, (card, cash)


def test_tensorboard_gets_auc_accuracy_and_loss_for_train_and_eval(taxi_job):
    train, evaluation = (summaries(str(taxi_job.job_dir / name)) for name in ("train", "eval"))
    for tag in ("auc", "accuracy", "loss"):  # every Train line's means; every Eval line
        assert sorted(train["scalars"].get(tag, [])) == list(range(20, ONE_PROCESS_STEPS + 1, 20)), (tag, train)
        assert sorted(evaluation["scalars"].get(tag, [])) == EVAL_STEPS, (tag, evaluation)


def test_parameter_server_training_learns_and_the_export_predicts_raw_trips(taxi_dir, tmp_path):  # noqa: F811
    job = tmp_path / "job"
    with TrainerCluster({"Chief": 1, "PS": 1, "Worker": 2}, taxi_flags(job, taxi_dir, 120), tmp_path) as cluster:
        codes = cluster.wait(WAIT_S)
        chief = cluster.log("chief-0")
        assert codes == {"chief-0": 0, "ps-0": 0, "worker-0": 0, "worker-1": 0}, cluster.tails()
        assert cluster.lines_with("AutoGraph could not transform") == []  # a user reads these logs
    # the wide table: 16 payment ids + 100 companies + 11 miles and 5 seconds buckets + 64 crosses + 1
    assert "Variable wide_weights/embeddings (197, 1) on /job:ps/replica:0/task:0/" in chief
    lines = progress(chief)  # the Train lines, as the launcher parses them
    assert [p.step for p in lines] == list(range(20, 121, 20)) and lines[-1].loss < lines[0].loss
    step, _, accuracy, auc = final(chief)
    assert step == 120 and auc > 0.9 and accuracy > 0.8, (accuracy, auc)  # big tippers: 22% of the trips
    # the workers' AUC reaches the chief's TensorBoard scalars too
    assert sorted(summaries(str(job / "train"))["scalars"]["auc"]) == list(range(20, 121, 20))
    assert summaries(str(job / "eval"))["scalars"]["auc"] == [120]

    exported, card, cash = predict_raw_trips(export_path(chief), taxi_dir, tmp_path)
    # the export is the model the chief evaluated; the short trip paid by card scores above the same
    # paid cash (120 asynchronous steps land anywhere from 0.13 to 0.83 for the card trip)
    assert abs(exported - accuracy) < 0.001, (exported, accuracy)
    assert cash < 0.05 and card > cash, (card, cash)


def test_replicas_preparing_one_shared_data_dir_at_once_leave_one_whole_copy(taxi_dir, tmp_path):  # noqa: F811
    """--prepare-data where every replica sees the same data dir (the local backend; a shared
    volume or bucket): the chief and both workers find it empty and write the trips at the
    same time. Each writes whole files and moves them in (data.staged), the same bytes in
    every process (data.serialize), so the job trains and the dir holds exactly what
    `trainer.data` writes. Before, the writers truncated each other's files, with records
    serialized in a per-process order, and the chief crash-looped on "corrupted record"."""
    data_dir = tmp_path / "shared-data"
    flags = [*taxi_flags(tmp_path / "job", str(data_dir), 20), "--prepare-data"]
    with TrainerCluster({"Chief": 1, "PS": 1, "Worker": 2}, flags, tmp_path) as cluster:
        assert cluster.wait(WAIT_S, ["chief-0"]) == {"chief-0": 0}, cluster.tails()  # the servers wait for it
        codes = cluster.wait(WAIT_S)
        assert codes == {"chief-0": 0, "ps-0": 0, "worker-0": 0, "worker-1": 0}, cluster.tails()
        assert cluster.lines_with(f"Preparing Chicago taxi trips in {data_dir} (--prepare-data)"), cluster.tails()
    reference = {path.name: path.read_bytes() for path in Path(taxi_dir).iterdir()}
    written = {path.name: path.read_bytes() for path in data_dir.iterdir()}  # hidden names too: no staging left
    assert sorted(written) == sorted(reference)
    assert [name for name in reference if written[name] != reference[name]] == []


def test_with_two_ps_and_small_shards_the_embedding_tables_are_split_across_both(taxi_dir, tmp_path):  # noqa: F811
    """The wide table (197 x 1 floats: 788 bytes) and the deep embeddings lie under the
    default minimum shard (256 KiB) and stay whole; --ps-min-shard-bytes 256 splits each
    over both ps tasks but the weekday table (8 x 8 floats: 256 bytes, one shard; the
    README said every table), and the job trains, checkpoints and restores as usual."""
    job = tmp_path / "job"
    flags = [*taxi_flags(job, taxi_dir, 60), "--ps-min-shard-bytes", "256"]
    with TrainerCluster({"Chief": 1, "PS": 2, "Worker": 1}, flags, tmp_path) as cluster:
        codes = cluster.wait(WAIT_S)
        chief = cluster.log("chief-0")
        assert set(codes.values()) == {0}, cluster.tails()
    tasks = {name: sorted(device.split("/device")[0] for device in devices.split(", "))
             for name, devices in re.findall(r"^Variable (\S+) \(.*\) on (.+)$", chief, re.M)}
    both = ["/job:ps/replica:0/task:0", "/job:ps/replica:0/task:1"]
    tables = {name: tasks[name] for name in tasks if name.startswith(("wide_weights/", "embed_"))}
    assert len(tables) == 1 + len(features.DEEP), tasks
    for table, devices in tables.items():
        assert devices == (both[:1] if table == "embed_day/embeddings" else both), (table, tasks)
    assert final(chief)[0] == 60 and export_path(chief)

    # the sharded checkpoint restores whole into one ps: weights and Adam's state
    probe = run_module("tests.support.restore_probe", [str(job), "--model", "taxi", "--ps", "1"])
    assert probe.returncode == 0, probe.stderr[-3000:]
    restored = json.loads(probe.stdout.splitlines()[-1])["variables"]
    assert {"model/wide_weights.embeddings", "optimizer/wide_weights.embeddings.momentum"} <= restored.keys()
    assert [key for key, v in restored.items() if not v["equal"]] == []
    assert restored["model/wide_weights.embeddings"]["nonzero"] and restored["step"]["value"] == 60


def test_multi_worker_mirrored_training(taxi_dir, tmp_path):  # noqa: F811
    with TrainerCluster({"Chief": 1, "Worker": 1}, taxi_flags(tmp_path / "job", taxi_dir, 40), tmp_path) as cluster:
        codes = cluster.wait(WAIT_S)
        assert set(codes.values()) == {0}, cluster.tails()
        chief = cluster.log("chief-0")
    assert "(sync mode)" in chief and final(chief)[0] == 40


def test_the_seeds_config_ps_submits_to_succeeded(local_env, taxi_dir):  # noqa: F811
    done = run_launcher(local_env, "submit", "--backend", "local", "--name", "taxi-ps", "--config", str(CONFIG_PS),
                        "--", "--model", "taxi", "--data-dir", taxi_dir, "--train-steps", "40", "--batch-size", "32",
                        "--steps-per-execution", "5", "--log-every-steps", "10", "--eval-every-steps", "0",
                        "--checkpoint-every-steps", "0", "--threads", "1", "--poll-seconds", "1", timeout=WAIT_S)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    logs = run_launcher(local_env, "logs", "taxi-ps", "--backend", "local", "--replica", "all").stdout
    for replica in ("chief-0", "ps-0", "worker-0", "worker-1", "worker-2", "worker-3"):
        assert f"[{replica}] Starting {replica.replace('-', '/')}" in logs, replica
    assert re.search(r"^\[chief-0\] Final metrics after 40 steps: .*, auc [0-9.]+$", logs, re.M), logs[-3000:]
    status = run_launcher(local_env, "status", "taxi-ps", "--backend", "local")
    assert status.stdout.splitlines()[0].endswith("Succeeded"), status.stdout
