"""trainer.progress: the lines the launcher parses, and the TensorBoard scalars."""
from __future__ import annotations

import tensorflow as tf

from launcher.events import parse_progress
from trainer import progress


def events(directory) -> list[tuple[str, int, str, list]]:
    """(tag, step, plugin name, tensor as a list) of every summary value in `directory`."""
    found = []
    for path in sorted(tf.io.gfile.glob(f"{directory}/events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                found.append((value.tag, event.step, value.metadata.plugin_data.plugin_name,
                              tf.make_ndarray(value.tensor).tolist()))
    return found


def scalars(directory) -> dict[str, list[tuple[int, float]]]:
    found: dict[str, list[tuple[int, float]]] = {}
    for tag, step, _, value in events(directory):
        found.setdefault(tag, []).append((step, float(value)))
    return found


def test_train_line_is_what_the_launcher_parses():
    line = progress.train_line("chief/0", 200, 1000, 0.23101, 0.9375, 12.34, 16.2)
    assert line == "Train [chief/0] step 200 of 1000: loss 0.2310, accuracy 0.9375 (12.3 s) 16.20 global steps/s"
    parsed = parse_progress(line)
    assert (parsed.step, parsed.total, parsed.loss, parsed.accuracy, parsed.steps_per_sec) == \
        (200, 1000, 0.231, 0.9375, 16.2)


def test_eval_final_and_export_lines():
    assert progress.eval_line(500, 0.06123, 0.98) == "Eval step 500: loss 0.0612, accuracy 0.9800"
    assert progress.final_line(1000, 0.0441, 0.9862) == "Final metrics after 1000 steps: loss 0.0441, accuracy 0.9862"
    assert progress.export_line("gs://b/job/export/1") == "Exported model to gs://b/job/export/1"
    assert parse_progress(progress.eval_line(500, 0.1, 0.9)) is None


def test_train_report_averages_steps_and_writes_scalars(tmp_path, capsys):
    report = progress.Progress(str(tmp_path), "worker/0", total=100, start=0)
    report.add(10, loss=2.0, accuracy=0.1)
    report.add(30, loss=1.0, accuracy=0.5)
    report.report_train(40)
    report.report_eval(40, 0.5, 0.875)
    out = capsys.readouterr().out.splitlines()
    parsed = parse_progress(out[0])
    assert (parsed.step, parsed.total, parsed.loss, parsed.accuracy) == (40, 100, 1.25, 0.4)
    assert out[1] == "Eval step 40: loss 0.5000, accuracy 0.8750"
    train = scalars(tmp_path / "train")
    assert train["loss"] == [(40, 1.25)] and train["accuracy"] == [(40, 0.4000000059604645)]
    assert scalars(tmp_path / "eval")["accuracy"] == [(40, 0.875)]


def test_each_train_line_averages_a_models_extra_metrics_since_the_line_before(tmp_path, capsys):
    """The taxi model's batch AUC: each line the mean of its own steps, not a sum carried over."""
    report = progress.Progress(str(tmp_path), "chief/0", total=100, start=0)
    report.add(10, loss=0.5, accuracy=0.75, auc=0.8)
    report.report_train(10)
    report.add(5, loss=0.5, accuracy=0.75, auc=0.6)
    report.add(5, loss=0.5, accuracy=0.75, auc=0.7)
    report.report_train(20)
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(": ", 1)[1].split(" (")[0] for line in lines] == [
        "loss 0.5000, accuracy 0.7500, auc 0.8000", "loss 0.5000, accuracy 0.7500, auc 0.6500"]
    assert [value for _, value in scalars(tmp_path / "train")["auc"]] == [0.800000011920929, 0.6499999761581421]


def test_a_worker_that_leaves_train_to_the_chief_writes_no_scalars_and_no_steps_print_nothing(tmp_path, capsys):
    """A MultiWorkerMirrored worker prints its own Train lines, but train/ is the chief's: two
    writers there doubled every point in TensorBoard. A line with no steps since the last is none."""
    report = progress.Progress(str(tmp_path), "worker/1", total=100, start=0, scalars=False)
    report.report_train(0)  # nothing since the start (a resumed run at its last step)
    assert capsys.readouterr().out == ""
    report.add(10, loss=0.5, accuracy=0.75)
    report.report_train(10)
    assert capsys.readouterr().out.startswith("Train [worker/1] step 10 of 100: loss 0.5000, accuracy 0.7500 (")
    assert not (tmp_path / "train").exists()


def test_the_step_rate_of_results_that_come_in_bursts_is_the_rate_of_training(tmp_path, capsys, monkeypatch):
    """A parameter-server chief gets its workers' results in bursts: here two calls of 10
    steps each second (20 global steps/s), a Train line every 10 steps. The rate since the
    last line alternated 10 and 10,000 global steps/s (a real PS job with
    --log-every-steps 10: 18 and 472), and the launcher's ETA with it; measured over the
    last RATE_WINDOW_S it is the 20 the job trains at."""
    clock = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    report = progress.Progress(str(tmp_path), "chief/0", total=400, start=0, scalars=False)
    for second in range(1, 21):
        for burst, step in enumerate((20 * second - 10, 20 * second)):
            clock[0] = second + burst * 0.001
            report.add(10, loss=0.5, accuracy=0.5)
            report.report_train(step)
    rates = [parse_progress(line).steps_per_sec for line in capsys.readouterr().out.splitlines()]
    assert len(rates) == 40
    assert all(10 <= rate <= 20.1 for rate in rates), rates  # within the first RATE_WINDOW_S: since the start
    assert all(19.9 <= rate <= 20.1 for rate in rates[2 * int(progress.RATE_WINDOW_S):]), rates


def test_disabled_report_prints_nothing(tmp_path, capsys):
    report = progress.Progress(str(tmp_path), "worker/1", total=10, start=0, enabled=False)
    report.add(10, 1.0, 1.0)
    report.report_train(10)
    assert capsys.readouterr().out == ""
    assert not (tmp_path / "train").exists()


def test_a_restarted_chief_s_points_replace_those_of_the_run_it_resumes_in_tensorboard(tmp_path):
    """A chief killed at step 300 after its checkpoint at 200 had written Train and Eval points
    up to 300; restarted from 200 it writes 250 and 300 again. TensorBoard's loader for gs://
    job dirs (--load_fast=false, what `launcher tensorboard` runs there) showed both runs'
    points, the line going back at 250 (v2 event files: it purges only on a SessionLog.START,
    never on a step going back). Each run of the chief now starts its train/ and eval/ with
    one, at the step after the checkpoint it resumed from."""
    from tensorboard.backend.event_processing import plugin_event_multiplexer

    killed = progress.Progress(str(tmp_path), "chief/0", total=400, start=0)
    for step, loss in ((200, 0.9), (250, 0.8), (300, 0.7)):
        killed.add(50, loss=loss, accuracy=0.5)
        killed.report_train(step)
    killed.report_eval(300, 0.6, 0.9)
    # TensorBoard reads a run's files in name order: time (s), host, pid, the process's writer
    # count. A restart comes seconds later; in this one process and second the count would
    # decide (10 before 9), so the killed run's files are dated a second back.
    for path in tmp_path.glob("*/events.out.tfevents.*"):
        parts = path.name.split(".")
        parts[3] = str(int(parts[3]) - 1)
        path.rename(path.with_name(".".join(parts)))
    restarted = progress.Progress(str(tmp_path), "chief/0", total=400, start=200)
    for step, loss in ((250, 0.3), (300, 0.2)):
        restarted.add(50, loss=loss, accuracy=0.9)
        restarted.report_train(step)
    restarted.report_eval(300, 0.1, 0.99)
    board = plugin_event_multiplexer.EventMultiplexer(purge_orphaned_data=True)  # TensorBoard's default
    board.AddRunsFromDirectory(str(tmp_path))
    board.Reload()

    def shown(run: str) -> list[tuple[int, float]]:
        return [(event.step, round(float(tf.make_ndarray(event.tensor_proto)), 4))
                for event in board.Tensors(run, "loss")]

    assert shown("train") == [(200, 0.9), (250, 0.3), (300, 0.2)]
    assert shown("eval") == [(300, 0.1)]
    # the event files themselves still hold every point, in the order written
    assert [step for step, _ in scalars(tmp_path / "train")["loss"]] == [200, 250, 300, 250, 300]


def test_histograms_write_what_tensorboards_own_histogram_writes(tmp_path):
    """The same tags, steps, plugin and buckets as tf.summary.histogram (TensorBoard's), for
    spread values, values on the bucket edges, one value, no value, integers and a NaN."""
    tensors = {"dense/kernel": tf.random.stateless_normal([300, 20], seed=[1, 2]),
               "edges": tf.range(0.0, 31.0), "bias": tf.fill([64], 0.25), "empty": tf.zeros([0]),
               "counts": tf.constant([3, 1, 4, 1, 5, 9, 2, 6]), "broken": tf.constant([0.0, float("nan"), 1.0])}
    ours = progress.Progress(str(tmp_path / "ours"), "chief/0", total=100, start=0)
    ours.train.histograms(7, tensors)
    writer = tf.summary.create_file_writer(str(tmp_path / "theirs"))
    with writer.as_default():
        for tag, value in tensors.items():
            tf.summary.histogram(tag, value, step=7)
    writer.flush()
    mine, theirs = events(tmp_path / "ours" / "train"), events(tmp_path / "theirs")
    assert [row[:3] for row in mine] == [(tag, 7, "histograms") for tag in tensors]
    assert repr(mine) == repr(theirs)  # repr: NaN edges compare equal
    assert sum(row[2] for row in mine[0][3]) == 6000


_PEAK = """
import resource
import tensorflow as tf
from trainer import progress
data = tf.random.stateless_normal([4_000_000], seed=[1, 2])
progress.histogram_buckets(tf.zeros([10]) + 1.0)  # kernels loaded
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
rows = progress.histogram_buckets(data)
assert int(tf.reduce_sum(rows[:, 2])) == 4_000_000
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
"""


def test_a_histogram_of_4m_values_needs_far_less_than_tensorboards_one_hot_matrix():
    """TensorBoard's own histogram makes a float64 one-hot matrix of 30 columns per value,
    960 MB for these 4M values (a chief reading the weights of a large model). Counted by
    bucket instead, the peak stays near a few copies of the values (16 MB each)."""
    import subprocess
    import sys

    from tests.support.trainer_cluster import ROOT, trainer_env

    done = subprocess.run([sys.executable, "-c", _PEAK], cwd=ROOT, env=trainer_env(), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    grown_mb = int(done.stdout.split()[-1])
    assert grown_mb < 250, f"the peak grew by {grown_mb} MB"
