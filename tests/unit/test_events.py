from launcher.events import JobCondition, parse_progress


def test_progress_line_of_the_trainer_is_parsed():
    line = "Train [chief/0] step 200 of 1000: loss 0.2310, accuracy 0.9375 (12.3 s) 16.2 global steps/s"
    progress = parse_progress(line)
    assert (progress.step, progress.total, progress.loss, progress.accuracy, progress.steps_per_sec) == (
        200, 1000, 0.231, 0.9375, 16.2)


def test_progress_without_total_or_rate():
    progress = parse_progress("Train [worker/0] step 7: loss 1.5, accuracy 0.5")
    assert (progress.step, progress.total, progress.steps_per_sec) == (7, None, None)


def test_other_lines_are_not_progress():
    assert parse_progress("Eval step 200: loss 0.1, accuracy 0.97") is None
    assert parse_progress("random text") is None


def test_terminal_conditions():
    assert JobCondition("Succeeded").terminal
    assert JobCondition("Failed").terminal
    assert not JobCondition("Failed", status="False").terminal
    assert not JobCondition("Running").terminal
