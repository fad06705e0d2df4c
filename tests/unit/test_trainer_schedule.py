"""trainer.train.step.learning_rate: linear warm-up, then cosine decay or constant."""
from __future__ import annotations

import pytest

from trainer import flags
from trainer.train import step as train_step


def rates(argv: list[str], steps: list[int]) -> list[float]:
    schedule = train_step.learning_rate(flags.parse(argv))
    return [round(float(schedule(step)), 7) for step in steps]


def test_default_warms_up_then_decays_to_one_percent():
    start, half, peak, mid, end, after = rates(["--train-steps", "1100"], [0, 50, 100, 600, 1100, 5000])
    assert (start, half, peak) == (0.0, 0.0015, 0.003)
    assert mid == pytest.approx(0.003 * (0.01 + 0.99 * 0.5), rel=1e-4)  # half-way through the decay
    assert end == after == pytest.approx(0.003 * train_step.COSINE_FLOOR)


def test_constant_after_warm_up():
    assert rates(["--learning-rate-decay", "constant", "--learning-rate", "0.01"], [0, 100, 1999, 9999]) == \
        [0.0, 0.01, 0.01, 0.01]


def test_warm_up_is_capped_at_a_quarter_of_training():
    args = flags.parse(["--train-steps", "40", "--warmup-steps", "100"])
    assert flags.warmup_steps(args) == 10
    assert rates(["--train-steps", "40", "--warmup-steps", "100"], [5, 10]) == [0.0015, 0.003]


def test_no_warm_up():
    assert rates(["--warmup-steps", "0", "--learning-rate-decay", "constant"], [0, 1000]) == [0.003, 0.003]
