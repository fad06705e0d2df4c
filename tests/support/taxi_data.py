"""The taxi model's session fixtures and helpers:

    taxi_dir      the real Chicago taxi trips (from the tfx 1.21.0 wheel, cached per
                  machine), written once per session by `python -m trainer.data --dataset taxi`
    taxi_job      TaxiJob: one process (no TF_CONFIG) trained ONE_PROCESS_STEPS on them,
                  evaluating every ONE_PROCESS_EVAL_EVERY; its job dir, export and output
    taxi_flags    the trainer flags of a short taxi run
    predict_raw_trips   an export asked about raw trips through `python -m trainer.predict`
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.trainer_cluster import TrainerCluster, run_module

ONE_PROCESS_STEPS, ONE_PROCESS_EVAL_EVERY = 120, 40
TRAIN_TIMEOUT = 600.0


@pytest.fixture(scope="session")
def taxi_dir(tmp_path_factory) -> str:
    out = str(tmp_path_factory.mktemp("taxi") / "data")
    done = run_module("trainer.data", ["--dataset", "taxi", "--out", out], timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"Wrote 12002 train and 3000 eval trips to {out}" in done.stdout
    return out


def taxi_flags(job: Path, data_dir: str, steps: int) -> list[str]:
    """`python -m trainer.task` flags of a short taxi run (2-core machines): batches of 64,
    a Train line every 20 steps, evaluation and a checkpoint only at the end."""
    return ["--model", "taxi", "--job-dir", str(job), "--data-dir", data_dir, "--train-steps", str(steps),
            "--batch-size", "64", "--steps-per-execution", "5", "--log-every-steps", "20",
            "--eval-every-steps", "0", "--checkpoint-every-steps", "0"]


@dataclass(frozen=True)
class TaxiJob:
    job_dir: Path
    log: str  # the process's output

    @property
    def export(self) -> Path:
        """The export base (numeric version dirs), as `launcher serve --model-dir` takes it."""
        return self.job_dir / "export"


@pytest.fixture(scope="session")
def taxi_job(taxi_dir, tmp_path_factory) -> TaxiJob:
    """One process (a lone chief: no TF_CONFIG, as the operator sets none) trained on the
    real trips."""
    workdir = tmp_path_factory.mktemp("taxi-one-process")
    flags = taxi_flags(workdir / "job", taxi_dir, ONE_PROCESS_STEPS)
    flags[flags.index("--eval-every-steps") + 1] = str(ONE_PROCESS_EVAL_EVERY)
    with TrainerCluster({"Chief": 1}, flags, workdir) as cluster:
        assert cluster.tf_config("Chief", 0) is None
        codes = cluster.wait(TRAIN_TIMEOUT)
        log = cluster.log("chief-0")
        assert codes == {"chief-0": 0}, cluster.tails()
    return TaxiJob(workdir / "job", log)


EVAL_TRIPS = 3000  # the whole eval split, as the chief evaluates it
SHORT_TRIP = {"trip_miles": 1.1, "trip_seconds": 420, "fare": 6.25}  # card trips of $5-7.50: 77% big tippers


def predict_raw_trips(export_dir, data_dir: str, tmp_path) -> tuple[float, float, float]:
    """(accuracy on every eval trip, card probability, cash probability): the export at
    `export_dir` asked, through `python -m trainer.predict` on raw trip fields as a user
    writes them (`trainer.make_request`), about the whole eval split plus one short trip
    paid by card and the same paid cash. The accuracy of the model the chief evaluated
    equals its final figure; cash tips are not recorded (0.04% of cash trips tipped)."""
    trips = tmp_path / "eval-trips.json"
    made = run_module("trainer.make_request", ["--model", "taxi", "--data-dir", str(data_dir),
                                               "--count", str(EVAL_TRIPS), "--out", str(trips)])
    assert made.returncode == 0, made.stderr[-2000:]
    labels = made.stdout.rsplit("(true labels: ", 1)[1].rstrip(")\n").split()
    with trips.open("a") as request:
        request.write(json.dumps(dict(SHORT_TRIP, payment_type="Credit Card", company="Flash Cab")) + "\n"
                      + json.dumps(dict(SHORT_TRIP, payment_type="Cash")) + "\n")
    done = run_module("trainer.predict", ["--model-dir", str(export_dir), "--json-instances", str(trips)])
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line.split(maxsplit=2) for line in done.stdout.splitlines()[1:]]
    assert len(rows) == EVAL_TRIPS + 2 and len(labels) == EVAL_TRIPS, done.stdout[-2000:]
    # the class is probability > 0.5; a probability printed 0.5000 (4 places) may be either
    assert [row[0] for row in rows if row[1] != "0.5000"] == \
        [str(int(float(row[1]) > 0.5)) for row in rows if row[1] != "0.5000"], done.stdout[-2000:]
    accuracy = sum(row[0] == label for row, label in zip(rows, labels)) / EVAL_TRIPS
    card, cash = (float(row[1]) for row in rows[-2:])
    return accuracy, card, cash
