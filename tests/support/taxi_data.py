"""The `taxi_dir` fixture: the real Chicago taxi trips (from the tfx 1.21.0 wheel, cached
per machine) written once per session by `python -m trainer.data --dataset taxi`."""
from __future__ import annotations

import pytest

from tests.support.trainer_cluster import run_module


@pytest.fixture(scope="session")
def taxi_dir(tmp_path_factory) -> str:
    out = str(tmp_path_factory.mktemp("taxi") / "data")
    done = run_module("trainer.data", ["--dataset", "taxi", "--out", out], timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"Wrote 12002 train and 3000 eval trips to {out}" in done.stdout
    return out
