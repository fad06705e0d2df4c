"""trainer.flags: defaults, environment defaults, one-line errors."""
from __future__ import annotations

import pytest

from trainer import flags


def test_defaults(monkeypatch):
    for name in ("JOB_DIR", "MNIST_DATA_DIR", "TRAINER_THREADS"):
        monkeypatch.delenv(name, raising=False)
    args = flags.parse([])
    assert (args.job_dir, args.data_dir, args.model) == ("runs/mnist", "data/mnist", "mnist")
    assert (args.train_steps, args.batch_size, args.steps_per_execution, args.threads) == (2000, 100, 10, 0)
    assert (args.learning_rate, args.learning_rate_decay, args.warmup_steps) == (3e-3, "cosine", 100)


def test_environment_defaults(monkeypatch):
    monkeypatch.setenv("MNIST_DATA_DIR", "gs://bucket/mnist")
    monkeypatch.setenv("TRAINER_THREADS", "1")
    monkeypatch.setenv("TRAINER_POLL_SECONDS", "not a number")
    args = flags.parse(["--job-dir", "gs://bucket/job"])
    assert (args.data_dir, args.job_dir, args.threads, args.poll_seconds) == ("gs://bucket/mnist", "gs://bucket/job", 1, 5.0)


@pytest.mark.parametrize("argv, expected", [
    (["--train-steps", "0"], "--train-steps: must be > 0"),
    (["--model", "resnet"], "invalid choice: 'resnet'"),
    (["--eval-every-steps", "-1"], "must be >= 0"),
    (["--learning-rate", "0"], "--learning-rate: must be > 0"),
    (["--warmup-steps", "-5"], "--warmup-steps: must be >= 0"),
])
def test_bad_flags_exit_2_with_one_line(argv, expected, capsys):
    with pytest.raises(SystemExit) as exit_info:
        flags.parse(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expected in err
