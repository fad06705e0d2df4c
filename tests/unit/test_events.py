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


def test_final_metrics_and_export_lines_are_results():
    from launcher.events import TrainingResult, parse_result

    assert parse_result("Final metrics after 300 steps: loss 0.0494, accuracy 0.9844") == TrainingResult(
        step=300, loss=0.0494, accuracy=0.9844)
    assert parse_result("Final metrics after 300 steps: loss 0.1979, accuracy 0.8957, auc 0.9554") == TrainingResult(
        step=300, loss=0.1979, accuracy=0.8957, metrics=(("auc", 0.9554),))  # the taxi model's
    assert parse_result("Exported model to gs://bucket/job/export/17") == TrainingResult(
        export_path="gs://bucket/job/export/17")
    assert parse_result("Train [chief/0] step 1 of 2: loss 1.0, accuracy 0.5") is None
