"""A replica with no shared data (a pod's own disk, e.g. on kind): without
--prepare-data the trainer says how to create the records and exits 2; with it, the
replica writes real MNIST into --data-dir itself and trains."""
from __future__ import annotations

import pytest

from tests.support.trainer_cluster import final_metrics, run_module


def test_missing_data_exits_2_naming_the_fix(tmp_path):
    done = run_module("trainer.task", ["--job-dir", str(tmp_path / "job"), "--data-dir", str(tmp_path / "none")],
                      timeout=120)
    assert done.returncode == 2
    assert "python -m trainer.data --out" in done.stderr.splitlines()[-1]


@pytest.mark.slow
def test_prepare_data_writes_mnist_then_trains(tmp_path):
    data_dir = tmp_path / "mnist"
    done = run_module("trainer.task", ["--job-dir", str(tmp_path / "job"), "--data-dir", str(data_dir),
                                       "--prepare-data", "--train-steps", "20", "--eval-every-steps", "0",
                                       "--checkpoint-every-steps", "0", "--log-every-steps", "10"],
                      timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"Preparing MNIST in {data_dir}" in done.stdout
    assert sorted(p.name.split("-")[0] for p in data_dir.iterdir()) == ["test"] * 2 + ["train"] * 8
    assert final_metrics(done.stdout)[0] == 20


def test_a_dataset_that_cannot_be_fetched_is_one_line_exit_1(tmp_path):
    """--prepare-data whose download fails (real pip against an index where nothing listens):
    the model's SourceError was a traceback out of trainer.task; one line naming the flag."""
    from tests.support.ports import free_port

    cache = tmp_path / "cache"
    env = {"TAXI_CACHE_DIR": str(cache), "PIP_CONFIG_FILE": "/dev/null", "PIP_FIND_LINKS": None,
           "PIP_NO_INDEX": None, "PIP_EXTRA_INDEX_URL": None, "PIP_NO_CACHE_DIR": "1", "PIP_RETRIES": "0",
           "PIP_INDEX_URL": f"http://127.0.0.1:{free_port()}/simple"}
    done = run_module("trainer.task", ["--model", "taxi", "--job-dir", str(tmp_path / "job"), "--data-dir",
                                       str(tmp_path / "taxi"), "--prepare-data"], env=env, timeout=300)
    assert done.returncode == 1, done.stderr
    last = done.stderr.splitlines()[-1]
    assert last.startswith("trainer: --prepare-data: pip download tfx==1.21.0 failed: ") and "Traceback" not in \
        done.stderr, done.stderr
    assert not (tmp_path / "taxi").exists() or not any((tmp_path / "taxi").iterdir())
