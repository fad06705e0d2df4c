"""A bad TF_CONFIG is refused by the real trainer process: one line on stderr, exit 2,
nothing written (TensorFlow is not even imported)."""
from __future__ import annotations

import json

import pytest

from tests.support.trainer_cluster import run_module

CLUSTER = {"chief": ["127.0.0.1:2222"], "ps": ["127.0.0.1:2223"], "worker": ["127.0.0.1:2224"]}
CASES = {
    "unknown role": (json.dumps({"cluster": CLUSTER, "task": {"type": "boss", "index": 0}}), "unknown role 'boss'"),
    "index out of range": (json.dumps({"cluster": CLUSTER, "task": {"type": "worker", "index": 3}}), "out of range"),
    "malformed JSON": ('{"cluster": {"chief": ["127.0.0.1:2222"]', "malformed JSON"),
    "ps without chief": (json.dumps({"cluster": {"ps": CLUSTER["ps"], "worker": CLUSTER["worker"]},
                                     "task": {"type": "ps", "index": 0}}), "ps without a chief"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_tf_config_exits_2_with_one_line(case, tmp_path):
    config, expected = CASES[case]
    job_dir = tmp_path / "job"
    done = run_module("trainer.task", ["--job-dir", str(job_dir)], {"TF_CONFIG": config}, timeout=120)
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("trainer: TF_CONFIG") and expected in lines[0]
    assert done.stdout == "" and not job_dir.exists()
