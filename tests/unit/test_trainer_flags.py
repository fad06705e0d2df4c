"""trainer.flags: defaults, environment defaults, one-line errors."""
from __future__ import annotations

import re

import pytest

from trainer import flags


def test_defaults(monkeypatch):
    for name in ("JOB_DIR", "MNIST_DATA_DIR", "TRAINER_THREADS"):
        monkeypatch.delenv(name, raising=False)
    args = flags.parse([])
    assert (args.job_dir, args.data_dir, args.model) == ("runs/mnist", "data/mnist", "mnist")
    assert (args.train_steps, args.batch_size, args.steps_per_execution, args.threads) == (2000, 100, 10, 0)
    assert (args.learning_rate, args.learning_rate_decay, args.warmup_steps) == (3e-3, "cosine", 100)
    assert args.ps_min_shard_bytes == 256 << 10  # variables under 256 KiB stay whole on one ps
    assert (args.log_every_steps, args.eval_every_steps, args.histogram_every_steps, args.checkpoint_every_steps,
            args.eval_batch_size) == (100, 500, 500, 500, 500)  # the README's and --help's numbers


def test_train_steps_default_to_the_models_own():
    """The taxi model's eval AUC peaks near 500 steps and falls after (models.TRAIN_STEPS)."""
    assert [flags.parse(argv).train_steps for argv in ([], ["--model", "mnist-cloudml"], ["--model", "taxi"])] \
        == [2000, 2000, 500]
    assert flags.parse(["--model", "taxi", "--max_steps", "2000"]).train_steps == 2000  # a given value wins


def test_the_default_job_dir_is_the_models(monkeypatch):
    """A taxi job's checkpoints went to runs/mnist, where an MNIST job's are refused as another model's."""
    monkeypatch.delenv("JOB_DIR", raising=False)
    assert [flags.parse(argv).job_dir for argv in ([], ["--model", "taxi"])] == ["runs/mnist", "runs/taxi"]
    monkeypatch.setenv("JOB_DIR", "gs://bkt/j")
    assert flags.parse(["--model", "taxi"]).job_dir == "gs://bkt/j"


@pytest.mark.parametrize("argv, line", [
    (["--job-dir", "a", "--model_dir", "b"], "argument --model_dir: given twice, also as --job-dir; give it once"),
    (["--train-files", "a", "--train_data_paths", "b"],
     "argument --train_data_paths: given twice, also as --train-files; give it once"),  # files dropped unseen
    (["--train-steps=5", "--max_steps", "50"], "argument --max_steps: given twice, also as --train-steps"),
    (["--prepare-data", "--train_data_paths", "a", "--eval_data_paths", "b"],
     "argument --prepare-data: writes --data-dir's records, and both --train_data_paths and --eval_data_paths are "
     "read instead; drop one of them"),
    (["--model", "taxi", "--eval_data_paths", "gs://bkt/eval-*"],
     "argument --eval_data_paths: the taxi model takes its vocabularies and statistics from --data-dir's"),
    (["--model", "taxi", "--train_data_paths", "gs://bkt/trips-*"],  # the default dir's metadata, not theirs
     "argument --train_data_paths: the taxi model takes its vocabularies and statistics from --data-dir's "
     "metadata.json, and none was given for these records; give --data-dir, the dir that holds theirs"),
    (["--model", "taxi", "--image_feature", "image_raw"],  # the taxi model reads no image: dropped unseen before
     "argument --image-feature: names the image feature of an image model's records, and --model taxi reads no "
     "image; drop it"),
])
def test_a_flag_given_by_two_spellings_or_with_a_flag_it_cannot_go_with_is_refused(argv, line, capsys, monkeypatch):
    monkeypatch.delenv("TAXI_DATA_DIR", raising=False)
    with pytest.raises(flags.FlagError, match=re.escape(line)):
        flags.check(argv)  # what the launcher asks before it runs the trainer
    with pytest.raises(SystemExit) as exit_info:
        flags.parse(argv)
    assert exit_info.value.code == 2 and line in capsys.readouterr().err
    assert flags.parse(["--train-steps", "5", "--train-steps", "6"]).train_steps == 6  # one spelling: the last, as argparse


def test_environment_defaults(monkeypatch):
    monkeypatch.setenv("MNIST_DATA_DIR", "gs://bucket/mnist")
    monkeypatch.setenv("TRAINER_THREADS", "1")
    monkeypatch.setenv("TRAINER_POLL_SECONDS", "not a number")
    args = flags.parse(["--job-dir", "gs://bucket/job"])
    assert (args.data_dir, args.job_dir, args.threads, args.poll_seconds) == ("gs://bucket/mnist", "gs://bucket/job", 1, 5.0)


def test_environment_defaults_out_of_range_fall_back(monkeypatch):
    """As an unparsable value: the flag's own default, not a negative sleep or thread count."""
    monkeypatch.setenv("TRAINER_THREADS", "-1")
    monkeypatch.setenv("TRAINER_POLL_SECONDS", "-3")
    monkeypatch.setenv("TRAINER_ORPHAN_SECONDS", "inf")
    args = flags.parse([])
    assert (args.threads, args.poll_seconds, args.orphan_seconds) == (0, 5.0, 900.0)


def test_an_empty_job_dir_from_the_environment_is_refused(monkeypatch, capsys):
    monkeypatch.setenv("JOB_DIR", "")
    with pytest.raises(SystemExit) as exit_info:
        flags.parse([])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == ("python -m trainer.task: error: argument --job-dir: is empty; give a local "
                                       "directory or a gs:// URL (without the flag, env JOB_DIR when it is set) "
                                       "(see --help)\n")
    assert flags.parse(["--job-dir", "runs/given"]).job_dir == "runs/given"  # a given flag wins


@pytest.mark.parametrize("argv, expected", [
    (["--train-steps", "0"], "argument --train-steps: must be > 0"),
    (["--max_steps", "0"], "argument --train-steps: must be > 0"),  # one name, not every spelling
    (["--data_dir", " "], "argument --data-dir: is empty"),
    (["--model", "resnet"], "invalid choice: 'resnet'"),
    (["--eval-every-steps", "-1"], "must be >= 0"),
    (["--learning-rate", "0"], "--learning-rate: must be > 0"),
    (["--warmup-steps", "-5"], "--warmup-steps: must be >= 0"),
    (["--ps-min-shard-bytes", "0"], "--ps-min-shard-bytes: must be > 0"),
    (["--batch-size", "many"], "--batch-size: 'many' is not an integer > 0"),
    (["--learning-rate", "fast"], "--learning-rate: 'fast' is not a number > 0"),
    (["--checkpoint-every-steps", "2.5"], "--checkpoint-every-steps: '2.5' is not an integer >= 0"),
    # not taken as --steps-per-execution; no abbreviations, as gcloud; the flags it resembles named
    (["--steps", "200"], "unrecognized arguments: --steps 200 (did you mean --train-steps or --steps-per-execution?)"),
    (["--batch", "64"], "unrecognized arguments: --batch 64 (did you mean --batch-size?)"),
    (["--train_step", "64"], "unrecognized arguments: --train_step 64 (did you mean --train-steps?)"),  # by its first name
    (["--zzz"], "unrecognized arguments: --zzz (see --help)"),
    # a Cloud ML spelling of a flag: named by its first name in suggestions, once; errors name it as before
    (["--batch_sizes", "64"], "--batch_sizes 64 (did you mean --batch-size or --eval-batch-size?)"),
    (["--train_files", "x"], "--train_files x (did you mean --train_data_paths or --train-steps?)"),
    (["--learning_rate", "0"], "argument --learning-rate: must be > 0, got 0"),
    (["--train_batch_size", "0"], "argument --batch-size: must be > 0, got 0"),
    (["--train-files"], "argument --train_data_paths/--train-data-paths: expected at least one argument"),
    (["--learning-rate", "inf"], "--learning-rate: must be a finite number, got inf"),
    (["--poll-seconds", "-1"], "--poll-seconds: must be > 0, got -1"),  # was time.sleep(-1)'s traceback
    (["--poll-seconds", "nan"], "--poll-seconds: must be > 0, got nan"),
    (["--orphan-seconds", "0"], "--orphan-seconds: must be > 0, got 0"),
    # an empty job dir put checkpoints/, train/ and export/ at the filesystem's root
    (["--job-dir", ""], "argument --job-dir: is empty; give a local directory or a gs:// URL"),
    (["--output_path= "], "argument --job-dir: is empty"),
    # a near miss of a gs:// URL was a local dir: the outputs stayed in the pod, lost with it
    (["--job-dir", "gs:/bkt/runs"], "argument --job-dir: 'gs:/bkt/runs' is not a gs:// URL but a local path (a slash "
                                    "is missing after gs:); write gs://bkt/runs"),
    (["--data-dir", "GS://b/data"], "argument --data-dir: 'GS://b/data' is not a gs:// URL"),
    (["--job-dir", "gs://bkt//runs"], "has an empty folder name"),
    # an unset variable (`--train-files "$TRAIN"`) read --data-dir's train-* shards instead, unseen
    (["--train-files", ""], "argument --train_data_paths/--train-data-paths: is empty; give TFRecord files or "
                            "patterns (local or gs://)"),
    (["--eval_data_paths", "gs://bkt/eval*", ","], "argument --eval_data_paths/--eval-data-paths: is empty"),
])
def test_bad_flags_exit_2_with_one_line(argv, expected, capsys):
    with pytest.raises(SystemExit) as exit_info:
        flags.parse(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expected in err


@pytest.mark.parametrize("argv, field, value", [
    (["--train_steps", "7"], "train_steps", 7),
    (["--max_steps", "8"], "train_steps", 8),
    (["--job_dir", "gs://bkt/j"], "job_dir", "gs://bkt/j"),
    (["--output_path", "gs://bkt/o"], "job_dir", "gs://bkt/o"),
    (["--model_dir", "/tmp/m"], "job_dir", "/tmp/m"),
    (["--data_dir", "gs://bkt/d"], "data_dir", "gs://bkt/d"),
    (["--train_data_paths", "gs://bkt/train*.tfr.gz,gs://bkt/more*", "x.tfrecord"], "train_data_paths",
     ["gs://bkt/train*.tfr.gz", "gs://bkt/more*", "x.tfrecord"]),
    (["--eval_data_paths", "gs://bkt/eval*"], "eval_data_paths", ["gs://bkt/eval*"]),
    (["--batch_size", "64"], "batch_size", 64),
    (["--train_batch_size", "32"], "batch_size", 32),
    (["--train-batch-size", "16"], "batch_size", 16),  # the census sample's
    (["--learning_rate", "0.01"], "learning_rate", 0.01),
    (["--eval_batch_size", "250"], "eval_batch_size", 250),
    (["--train-files", "gs://bkt/train*", "gs://bkt/more*"], "train_data_paths", ["gs://bkt/train*", "gs://bkt/more*"]),
    (["--eval-files", "gs://bkt/eval*"], "eval_data_paths", ["gs://bkt/eval*"]),
])
def test_cloud_ml_sample_spellings(argv, field, value):
    assert getattr(flags.parse(argv), field) == value


def test_a_taxi_job_reading_given_records_takes_the_metadata_of_the_data_dir_given_or_set(monkeypatch, tmp_path):
    """Refused only when no --data-dir and no TAXI_DATA_DIR say where the records' metadata.json is."""
    monkeypatch.delenv("TAXI_DATA_DIR", raising=False)
    argv = ["--model", "taxi", "--train_data_paths", "gs://bkt/trips-*"]
    flags.check([*argv, "--data-dir", "gs://bkt/taxi"])
    assert flags.parse([*argv, "--data-dir", "gs://bkt/taxi"]).data_dir == "gs://bkt/taxi"
    monkeypatch.setenv("TAXI_DATA_DIR", str(tmp_path))
    flags.check(argv)
    assert flags.parse(argv).data_dir == str(tmp_path)


def test_a_flag_after_a_double_dash_is_not_the_parsers_own():
    """`launcher submit --job-dir A -- --model_dir B`: what follows `--` is the trainer's, not given twice."""
    parser = flags.parser()
    assert flags.given_twice(parser, ["--job-dir", "a", "--", "--model_dir", "b"]) is None
    assert flags.given_twice(parser, ["--job-dir", "a", "--model_dir", "b"]) == ("--model_dir", "--job-dir")


def test_each_spelling_has_one_help_entry():
    text = flags.parser().format_help()
    assert "--job-dir JOB_DIR, --job_dir JOB_DIR, --output_path JOB_DIR, --model_dir JOB_DIR" in text
    options = text.split("options:", 1)[1]  # past the usage line
    assert options.count("--max_steps") == 1 and options.count("--data_dir") == 1
    assert "--train-steps TRAIN_STEPS, --train_steps TRAIN_STEPS, --max_steps TRAIN_STEPS" in options
    assert "--batch-size BATCH_SIZE, --batch_size BATCH_SIZE, --train_batch_size BATCH_SIZE" in options
    assert "--learning-rate LEARNING_RATE, --learning_rate LEARNING_RATE" in options
    assert "--eval-batch-size EVAL_BATCH_SIZE, --eval_batch_size EVAL_BATCH_SIZE" in options
    for spelling in ("--batch_size", "--train_batch_size", "--learning_rate", "--eval_batch_size", "--train-files",
                     "--eval-files"):
        assert options.count(spelling + " ") == 1, spelling


def test_each_default_is_said_once_and_none_is_not_said(monkeypatch):
    monkeypatch.setenv("JOB_DIR", "/x/job")  # the job dir's help says its default itself: not again as /x/job
    options = " ".join(flags.parser().format_help().split("options:", 1)[1].split())
    assert "/x/job" not in options and options.count("(default: env JOB_DIR, else runs/<model>;") == 1
    assert "(default: None)" not in options
    assert "(default: env MNIST_DATA_DIR or data/mnist; taxi: env TAXI_DATA_DIR or data/taxi) --train_data_paths" \
        in options
    assert "global training steps in total (default: the model's: mnist 2000, mnist-cloudml 2000, taxi 500)" \
        in options
    assert "print a Train line every N steps (default: 100)" in options


def test_check_raises_what_the_trainer_would_refuse_and_prints_nothing(capsys):
    with pytest.raises(flags.FlagError, match=r"^unrecognized arguments: --modle taxi \(did you mean --model\?\)$"):
        flags.check(["--job-dir", "/tmp/j", "--modle", "taxi"])
    flags.check(["--train_steps", "7", "--help"])  # accepted; --help is not acted on (no exit)
    assert capsys.readouterr() == ("", "")


def test_intervals_finer_than_a_call_are_said_to_come_every_call():
    assert flags.notes(flags.parse([]), "ps") == []  # the defaults: 10 steps per call
    args = flags.parse(["--steps-per-execution", "100", "--checkpoint-every-steps", "20", "--eval-every-steps", "0"])
    assert flags.notes(args, "ps") == [
        "note: --checkpoint-every-steps 20 is finer than --steps-per-execution 100: every 100 steps instead (the "
        "loop acts between calls)"]


def test_flags_typed_for_another_mode_and_a_capped_warm_up_are_said(monkeypatch):
    """Only what was typed: the defaults (300 steps cap the default warm-up of 100 at 75) and
    the environment's values say nothing."""
    monkeypatch.setenv("TRAINER_POLL_SECONDS", "1")
    assert flags.notes(flags.parse(["--train-steps", "300"]), "single") == []
    args = flags.parse(["--ps-min-shard-bytes", "256", "--poll-seconds", "2", "--orphan-seconds", "60",
                        "--train-steps", "300", "--warmup-steps", "100"])
    assert flags.notes(args, "single") == [
        "note: --ps-min-shard-bytes is not used: it splits variables over the ps tasks, and this job has none",
        "note: --poll-seconds is not used: it paces the ps, workers and evaluator of a job with a chief, and this "
        "process trains alone",
        "note: --orphan-seconds is not used: it paces the ps, workers and evaluator of a job with a chief, and this "
        "process trains alone",
        "note: --warmup-steps 100 is more than a quarter of --train-steps 300: 75 warm-up steps instead"]
    assert flags.notes(args, "ps") == [args_note for args_note in flags.notes(args, "single")
                                       if args_note.startswith("note: --warmup-steps")]
    assert flags.notes(args, "sync")[0].startswith("note: --ps-min-shard-bytes is not used")
    # a MultiWorkerMirrored worker does not train alone: its chief may wait for an evaluator (--poll-seconds)
    assert not [line for line in flags.notes(args, "sync") if "trains alone" in line]
    assert flags.notes(flags.parse(["--train-steps", "400", "--warmup-steps", "100"]), "single") == []
