"""trainer.evaluator.SideCar on real checkpoints in a temporary job dir: every checkpoint
once, in order; nothing repeated after its own restart; a failed read retried."""
from __future__ import annotations

import json
import shutil
import threading

import numpy as np
import pytest

from trainer import checkpoints, data, evaluator, flags, models, variables


@pytest.fixture
def job(tmp_path):
    """(job dir, args, save(step)): checkpoints of one model written as the chief does."""
    images = (np.arange(20 * 784) % 256).astype(np.uint8).reshape(20, 28, 28)
    (tmp_path / "data").mkdir()
    data.write_split(str(tmp_path / "data"), "test", images, np.arange(20) % 10)
    job_dir = str(tmp_path / "job")
    args = flags.parse(["--job-dir", job_dir, "--data-dir", str(tmp_path / "data"), "--eval-batch-size", "10"])
    model = models.build("mnist")
    saver = checkpoints.Checkpointer(job_dir, {"model": variables.named(model.weights)}, "mnist")
    return job_dir, args, saver.save


def drain(sidecar, bound: int = 10) -> None:
    """evaluate_next until it finds nothing new, at most `bound` times (a sidecar that never
    ran out fails here instead of looping until pytest's timeout)."""
    for _ in range(bound):
        if not sidecar.evaluate_next():
            return
    raise AssertionError(f"evaluate_next still found checkpoints after {bound} calls")


def evaluated(capsys) -> list[int]:
    return [int(line.split()[2].rstrip(":")) for line in capsys.readouterr().out.splitlines()
            if line.startswith("Eval step ")]


def test_every_checkpoint_once_in_order_and_not_again_after_a_restart(job, capsys):
    job_dir, args, save = job
    for step in (10, 20, 30):
        save(step)
    sidecar = evaluator.SideCar(args)
    drain(sidecar)
    assert evaluated(capsys) == [10, 20, 30]  # not only the newest

    save(40)
    again = evaluator.SideCar(args)  # the evaluator restarted
    assert again.last_step == 30
    drain(again)
    assert evaluated(capsys) == [40]
    with open(evaluator.state_path(job_dir)) as handle:
        assert json.load(handle) == {"step": 40}


def test_a_checkpoint_that_fails_to_read_is_retried(job, capsys, tmp_path):
    job_dir, args, save = job
    path = save(50)
    [shard] = [p for p in (tmp_path / "job" / "checkpoints").iterdir() if p.name.startswith("ckpt-50.data")]
    shard.rename(tmp_path / "aside")  # being written / a storage hiccup: its data is not there yet
    sidecar = evaluator.SideCar(args)
    assert not sidecar.evaluate_next()
    out = capsys.readouterr().out
    assert f"Could not read {path} (" in out and "); retrying (attempt 1 of 3)" in out
    shutil.move(tmp_path / "aside", shard)
    assert sidecar.evaluate_next()
    assert evaluated(capsys) == [50]


def test_a_checkpoint_that_stays_unreadable_is_given_up_after_the_bounded_attempts(job, capsys, tmp_path):
    """The last checkpoint never becomes readable (its data lost): after READ_ATTEMPTS
    tries it is recorded as done, so that the evaluator's last round at the end of the
    job (run: `while sidecar.pending()`) ends and the chief's wait for it (await_step)
    does not run out; a restarted evaluator does not try it again."""
    job_dir, args, save = job
    path = save(50)
    for shard in (tmp_path / "job" / "checkpoints").glob("ckpt-50.data*"):
        shard.unlink()
    sidecar = evaluator.SideCar(args)
    for _ in range(evaluator.READ_ATTEMPTS):
        assert not sidecar.evaluate_next()
    out = capsys.readouterr().out
    assert f"Skipped {path}: " in out and f"after {evaluator.READ_ATTEMPTS} attempts" in out
    assert "Eval step" not in out
    assert sidecar.pending() == [] and evaluator.evaluated(job_dir) == 50
    assert evaluator.SideCar(args).pending() == []


def test_the_chief_counts_on_an_evaluator_with_a_fresh_heartbeat(job):
    job_dir, args, _ = job
    assert not evaluator.alive(job_dir)
    sidecar = evaluator.SideCar(args)
    sidecar.heartbeat()
    with open(evaluator.alive_path(job_dir)) as handle:
        beat = json.load(handle)["time"]
    assert evaluator.alive(job_dir, now=beat + 1)
    assert not evaluator.alive(job_dir, now=beat + evaluator.ALIVE_FOR_S + 1)  # gone: the chief evaluates
    evaluator.gone(job_dir)  # it left (task.exit_now): at once, not ALIVE_FOR_S later
    assert not evaluator.alive(job_dir, now=beat + 1)
    evaluator.gone(job_dir)  # nothing to remove: no error


def test_the_chief_gives_a_running_evaluator_the_last_checkpoint_and_goes_on_without_it_when_bounded(job, capsys):
    """A TFJob ends with its chief and the evaluator is stopped then: the chief waits, at
    most its bound, for the evaluator's result on the last checkpoint."""
    job_dir, args, save = job
    assert evaluator.await_step(job_dir, 20, seconds=60, poll=0.01) is None  # no evaluator: nothing to wait for
    assert capsys.readouterr().out == ""
    save(10)
    save(20)
    sidecar = evaluator.SideCar(args)
    sidecar.heartbeat()
    assert evaluator.await_step(job_dir, 20, seconds=0.2, poll=0.01) is False  # it evaluates nothing meanwhile
    assert capsys.readouterr().out == (
        "Waiting up to 0.2 s for the side-car evaluator to evaluate step 20\n"
        "The side-car evaluator has not evaluated step 20 after 0.2 s; finishing without it\n")

    worker = threading.Thread(target=lambda: [sidecar.evaluate_next() for _ in range(2)], daemon=True)
    worker.start()
    assert evaluator.await_step(job_dir, 20, seconds=60, poll=0.01) is True
    worker.join(60)
    assert evaluated(capsys) == [10, 20] and evaluator.evaluated(job_dir) == 20
    assert evaluator.await_step(job_dir, 20, seconds=60, poll=0.01) is True  # done already: no line
    assert capsys.readouterr().out == ""


def test_a_write_cut_short_leaves_the_last_record_whole(job, monkeypatch, capsys):
    """An evaluator killed while it records a step: its restart goes on after the step
    recorded before, instead of evaluating every kept checkpoint again (points twice in
    TensorBoard), and the chief reading meanwhile sees that step."""
    job_dir, args, save = job
    save(10)
    sidecar = evaluator.SideCar(args)
    assert sidecar.evaluate_next() and evaluated(capsys) == [10]
    save(20)

    class Killed(BaseException):
        pass

    real = evaluator.tf.io.gfile.GFile

    class CutShort:  # a file whose writer is killed halfway through its one write
        def __init__(self, path, mode="r"):
            self.handle = real(path, mode)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

        def write(self, text):
            self.handle.write(text[:len(text) // 2])
            self.handle.flush()
            raise Killed

    def cut_short(path, mode="r"):
        return CutShort(path, mode) if "w" in mode else real(path, mode)

    monkeypatch.setattr(evaluator.tf.io.gfile, "GFile", cut_short)
    with pytest.raises(Killed):
        sidecar.evaluate_next()  # evaluates 20, is killed recording it
    monkeypatch.undo()
    assert evaluator.evaluated(job_dir) == 10
    again = evaluator.SideCar(args)
    assert again.last_step == 10
    capsys.readouterr()
    drain(again)
    assert evaluated(capsys) == [20]


def test_a_record_cut_short_reads_as_nothing_evaluated_yet(job):
    """A record an earlier evaluator left cut short (it wrote in place): no error, and the
    chief's wait goes on."""
    job_dir, _, _ = job
    path = evaluator.state_path(job_dir)
    evaluator._write(path, {"step": 20})
    assert evaluator.evaluated(job_dir) == 20
    for text in ("", '{"st', "[]", '{"step": null}'):
        with open(path, "w") as handle:
            handle.write(text)
        assert evaluator.evaluated(job_dir) == -1


def test_the_evaluator_evaluates_the_last_checkpoint_saved_as_the_chief_marks_the_job_done(job, capsys, monkeypatch,
                                                                                          tmp_path):
    """The chief saves its last checkpoint and writes the done marker between two polls of
    the evaluator: the evaluator still evaluates that checkpoint before it leaves (exit 0).
    Started again on the same job dir, it says where it goes on from."""
    from trainer import lifecycle
    from trainer.cluster import Cluster

    job_dir, args, save = job
    images = (np.arange(20 * 784) % 256).astype(np.uint8).reshape(20, 28, 28)
    data.write_split(str(tmp_path / "data"), "train", images, np.arange(20) % 10)  # data.check reads both splits
    args.poll_seconds = 0.01
    save(10)
    check = lifecycle.Watch.check

    def chief_finishes_meanwhile(watch):  # the timing of a real chief, which nothing else can force
        if lifecycle.read_done(job_dir) is None:
            save(20)
            lifecycle.write_done(job_dir, 20, None)
        return check(watch)

    monkeypatch.setattr(lifecycle.Watch, "check", chief_finishes_meanwhile)
    assert evaluator.run(args, Cluster(role="evaluator", index=0, spec={})) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Evaluator watching {job_dir}/checkpoints\n"), out
    assert [line.split(":")[0] for line in out.splitlines() if line.startswith("Eval step ")] == [
        "Eval step 10", "Eval step 20"]
    assert out.endswith(f"Chief marked the job done in {job_dir}/done.json; exiting\n")

    save(30)  # a later run of the job, which ends at once
    monkeypatch.setattr(lifecycle.Watch, "check", lambda watch: lifecycle.DONE)
    assert evaluator.run(args, Cluster(role="evaluator", index=0, spec={})) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Evaluator watching {job_dir}/checkpoints; evaluated up to step 20 before\nEval step 30:"), out


def test_each_evaluation_measures_the_weights_it_was_given_alone(taxi_dir):  # noqa: F811
    """The chief evaluates one plain model again and again (session.Session.evaluation):
    the taxi model's AUC of a later evaluation must not count the earlier ones' scores."""
    from trainer.evaluate import Evaluation

    model = models.build("taxi")
    evaluation = Evaluation(model, data.Source(taxi_dir), 500, name="taxi")
    evaluation.evaluate()  # the weights as built
    layer = model.get_layer("deep_logit")
    layer.kernel.assign(0.3 * np.random.RandomState(0).normal(size=layer.kernel.shape).astype("float32"))
    later = evaluation.evaluate()
    alone = Evaluation(model, data.Source(taxi_dir), 500, name="taxi").evaluate()
    assert later == pytest.approx(alone, abs=1e-6)
