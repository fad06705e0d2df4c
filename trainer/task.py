"""Entry point: `python -m trainer.task [flags]`, role from TF_CONFIG.

    no TF_CONFIG          one process trains, evaluates and exports
    chief (or master)     with ps: coordinator of parameter-server training (train/ps.py)
                          without ps: one of the MultiWorkerMirrored workers (train/sync.py)
    worker                with ps: a tf.distribute.Server; else a MultiWorkerMirrored worker
    ps                    a tf.distribute.Server
    evaluator             side-car evaluation of checkpoints (evaluator.py)

Servers (ps, and workers of parameter-server training) exit 0 once the chief has written
its done marker, or when the chief has been unreachable for --orphan-seconds
(lifecycle.py). Exit codes: 0 done, 1 failed, 2 bad TF_CONFIG, flags, data dir or a
checkpoint of another model, 128 retryable (a parameter server was lost, or storage stayed
unavailable: see failures.py), 143 after SIGTERM (the chief saved a checkpoint first).
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
from typing import Callable

from trainer import cluster as cluster_config
from trainer import flags, lazy, outputs
from trainer.cluster import Cluster

# TensorFlow is imported only once flags and TF_CONFIG are known good, so that a bad
# configuration fails at once (and cheaply, e.g. in a crash-looping pod).

USAGE_ERROR = 2


def fail(message: str) -> int:
    print(f"trainer: {message}", file=sys.stderr)
    return USAGE_ERROR


def stream_stdout() -> None:
    """Line-buffered stdout/stderr so every log line reaches `kubectl logs` at once."""
    for stream in (sys.stdout, sys.stderr):
        stream.reconfigure(line_buffering=True)


def check_data(args: argparse.Namespace) -> int | None:
    """ensure_data; None when the job can read its data, else the exit code after one line:
    2 for data it cannot use, 1 for a --prepare-data download or check that failed."""
    from trainer import data
    from trainer.models import SourceError

    try:
        ensure_data(args)
    except data.DataError as error:
        return fail(str(error))
    except SourceError as error:
        print(f"trainer: --prepare-data: {error}", file=sys.stderr)
        return 1
    return None


def ensure_data(args: argparse.Namespace) -> None:
    """Raise DataError when --data-dir (or a pattern of --train_data_paths/--eval_data_paths)
    has no records, unless --prepare-data writes them (also over a set of shards not all
    there); then say which files the job reads.
    (Whether the model can parse them is data.check's, once TensorFlow is configured.)"""
    from trainer import data, models

    model = models.get(args.model)
    source = data.source(args)

    def found() -> dict[str, list[str]]:
        return {split: data.files(source, split) for split in ("train", model.EVAL_SPLIT)}

    try:
        files = found()
    except data.DataError:
        if not args.prepare_data:
            raise
        if refusal := data.refuse_beside(args.data_dir, source.written_as, "--data-dir",
                                         f"{model.DATASET} that --prepare-data writes"):
            raise data.DataError(refusal) from None
        files = {}
    # With --prepare-data, a set of shards only partly there is another replica's write in
    # progress (data.staged moves its files in one by one): write a whole copy too.
    if args.prepare_data and not (files and all(data.complete(paths) for paths in files.values())):
        print(f"Preparing {model.DATASET} in {args.data_dir} (--prepare-data)")
        model.prepare_data(args.data_dir)
        files = found()
    print(data.reading_line(source, files))
    for split, paths in files.items():
        if lost := data.missing(paths):
            fix = ("check the files the patterns match" if source.given(split) else
                   f"write them again with: python -m trainer.data {source.prepare}--out {args.data_dir}")
            print(f"trainer: warning: {split} shards missing: {', '.join(lost)}; the job reads the other "
                  f"{len(paths)} files; {fix}", file=sys.stderr)


def tensorflow_plugins() -> list[str]:
    """What `import tensorflow` would load besides its own libraries: first-party kernels in
    `tensorflow/core/kernels`, `tensorflow-plugins` directories of the site-packages it
    looks in, and TF_PLUGGABLE_DEVICE_LIBRARY_PATH (the same places as its __init__)."""
    import importlib.util
    import site
    import sysconfig

    spec = importlib.util.find_spec("tensorflow")
    if spec is None or spec.origin is None:
        return []
    dirs = {path for path in sys.path if "site-packages" in path} | set(site.getsitepackages())
    if site.ENABLE_USER_SITE and site.USER_SITE:
        dirs.add(site.USER_SITE)
    for scheme in sysconfig.get_scheme_names():
        for kind in ("purelib", "platlib"):
            try:
                dirs.add(sysconfig.get_path(kind, scheme))
            except KeyError:
                pass
    candidates = [os.path.join(os.path.dirname(spec.origin), "core", "kernels"),
                  *(os.path.join(path, "tensorflow-plugins") for path in sorted(dirs))]
    found = [path for path in candidates if os.path.exists(path)]
    return found + [value] if (value := os.environ.get("TF_PLUGGABLE_DEVICE_LIBRARY_PATH")) else found


def import_server_tensorflow() -> None:
    """What a server (a ps, or a worker of parameter-server training) imports of
    TensorFlow: the modules it uses (runtime.start_server, lifecycle), not `import
    tensorflow`, whose __init__ imports the whole `tf.` API and Keras: about 6 CPU seconds
    against 1 here, per server. A server only runs the graphs the chief sends, with the
    kernels of TensorFlow's shared libraries; on one machine (the local backend) the
    servers' imports took the CPU the chief needs for its own. Code that reads a `tf.`
    attribute later (--prepare-data on a worker) imports the rest then (lazy.package).
    When TensorFlow would load plugin kernels or devices at import (tensorflow_plugins),
    it is imported whole at once, so that the server has them."""
    if "tensorflow" in sys.modules:
        return
    if tensorflow_plugins():
        import tensorflow  # noqa: F401
        return
    lazy.package("tensorflow")


def serve(args: argparse.Namespace, cluster: Cluster) -> int:
    """ps, or worker of parameter-server training: serve until the job ends."""
    import_server_tensorflow()
    from trainer import lifecycle, runtime

    if cluster.role == "worker" and args.prepare_data:  # the dataset ops run on workers
        if (code := check_data(args)) is not None:  # one line, as the chief's
            return code

    watch = lifecycle.Watch(args.job_dir, cluster.chief_address, args.poll_seconds, args.orphan_seconds)
    stop: list[int] = []  # the signal that stops this server (see lifecycle: 4.)
    for signum in lifecycle.STOP_SIGNALS:
        signal.signal(signum, lambda number, frame: stop.append(number))
    runtime.start_server(cluster, runtime.threads_for(args.threads, cluster))
    print(f"Serving {cluster.name} at {cluster.spec[cluster.role][cluster.index]}; waiting for the chief")
    outcome = watch.wait(stopping=lambda: bool(stop))
    if outcome == lifecycle.STOPPED and watch.done():  # stopped as the job ended: nothing is left to save
        outcome = lifecycle.DONE
    if outcome != lifecycle.STOPPED:
        print(lifecycle.message(outcome, watch))
        return lifecycle.EXIT_CODES[outcome]
    name, code = signal.Signals(stop[0]).name, 128 + stop[0]
    print(f"trainer: {name}: serving on until the chief leaves (at most {lifecycle.LINGER_S:g} s), so that it can "
          "save a checkpoint", file=sys.stderr, flush=True)
    left = watch.linger()
    print(f"trainer: {name}: {'the chief has left' if left else 'the chief is still up'}; exiting {code}",
          file=sys.stderr)
    return code


def train(args: argparse.Namespace, cluster: Cluster) -> int:
    """Train; the chief then writes the done marker, its very last act, so that servers
    only leave once nothing needs them any more."""
    from trainer import lifecycle, session

    if cluster.mode == "ps":
        from trainer.train import ps as trainer
    else:
        from trainer.train import sync as trainer
    try:
        step, export_path = trainer.run(args, cluster)
    except session.Stopped as stopped:
        print(f"trainer: {stopped}", file=sys.stderr)
        return stopped.code
    if cluster.is_chief:
        from trainer import evaluator

        evaluator.await_step(args.job_dir, step, poll=min(args.poll_seconds, 1.0))
    if cluster.mode == "sync":  # the MultiWorkerMirrored tasks leave together: none is reported lost
        trainer.leave(cluster)
    print(f"Finished {cluster.name} at step {step}")
    if cluster.is_chief:
        lifecycle.write_done(args.job_dir, step, export_path)
    return 0


def compute(args: argparse.Namespace, cluster: Cluster) -> int:
    """Chief, MultiWorkerMirrored worker or evaluator: check the data, then run."""
    from trainer import checkpoints, data, runtime

    if __name__ == "__main__":  # the process's own entry point, not a caller in a test
        private_tmp()

    if problem := outputs.unwritable_dir(args.job_dir):  # a bucket that does not exist: TensorFlow waited on it
        return fail(f"--job-dir: {problem}")
    if (code := check_data(args)) is not None:
        return code
    args.threads = runtime.threads_for(args.threads, cluster)  # 0: sized for this machine
    runtime.limit_threads(args.threads)
    try:
        if cluster.role == "evaluator":
            from trainer import evaluator

            _AT_EXIT.append(lambda: evaluator.gone(args.job_dir))  # however it leaves, SIGTERM included
            return evaluator.run(args, cluster)
        return train(args, cluster)
    except (checkpoints.MismatchError, data.DataError) as error:  # data.check: records it cannot parse
        return fail(str(error))


def main(argv: list[str] | None = None) -> int:
    stream_stdout()
    lazy.quiet_tensorflow()
    args = flags.parse(argv)
    if outputs.tensorflow_missing():  # the package's base install: the launcher's dependencies
        return fail(outputs.NO_TENSORFLOW)
    try:
        cluster = cluster_config.parse(os.environ.get("TF_CONFIG"))
    except cluster_config.ConfigError as error:
        return fail(str(error))
    if os.environ.get("TF_CONFIG"):
        os.environ["TF_CONFIG"] = cluster_config.tf_config(cluster)  # `master` -> `chief` for TF's readers
    cluster_config.bypass_grpc_proxy(cluster)
    print(f"Starting {cluster.name} ({cluster.mode} mode), job dir {args.job_dir}")
    return run_role(args, cluster)


def run_role(args: argparse.Namespace, cluster: Cluster) -> int:
    """Serve or compute; a failure failures.py knows is one line on stderr and its exit code."""
    try:
        if cluster.role == "ps" or (cluster.role == "worker" and cluster.mode == "ps"):
            return serve(args, cluster)
        if cluster.role != "evaluator":
            for note in flags.notes(args, cluster.mode):
                print(note)
        return compute(args, cluster)
    except Exception as error:
        from trainer import failures

        failure = failures.explain(error, args.job_dir)
        if failure is None:
            raise
        print(f"trainer: {failure.line}", file=sys.stderr)
        return failure.code


_scratch: str | None = None  # private_tmp()'s directory, removed by exit_now
_AT_EXIT: list[Callable[[], None]] = []  # run by exit_now


def private_tmp() -> None:
    """Point `tempfile` at a directory of this process's own. TensorFlow's AutoGraph writes
    each function it converts to a temporary file and deletes that file from an atexit
    handler, which exit_now's os._exit skips: 773 files were left in /tmp by one test run.
    exit_now removes the directory instead. (Servers convert nothing and do without.)"""
    global _scratch
    _scratch = tempfile.tempdir = tempfile.mkdtemp(prefix="trainer-")
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:  # the training loop's own (session.StopRequest) wins
        signal.signal(signal.SIGTERM, _terminated)


def _terminated(signum, frame) -> None:
    """SIGTERM outside the training loop (an evaluator, a worker exporting or evaluating at
    the end: the supervisor or the kubelet stopping it): leave as SIGTERM's default would,
    with 128 + 15, but through exit_now, which removes the private directory."""
    print("trainer: SIGTERM; exiting 143", file=sys.stderr)
    exit_now(128 + signum)


def exit_now(code: int) -> None:
    """Exit without interpreter teardown: TF's gRPC and coordinator threads can hang it.
    What a role registered in _AT_EXIT runs first."""
    for hook in _AT_EXIT:
        try:
            hook()
        except Exception:  # noqa: BLE001 - leaving anyway
            pass
    sys.stdout.flush()
    sys.stderr.flush()
    if _scratch:
        shutil.rmtree(_scratch, ignore_errors=True)
    os._exit(code)


if __name__ == "__main__":
    try:
        exit_now(main())
    except SystemExit as done:
        exit_now(done.code if isinstance(done.code, int) else 1)
    except KeyboardInterrupt:  # Ctrl-C outside the training loop, whose own saves a checkpoint first
        print("trainer: SIGINT; exiting 130", file=sys.stderr)
        exit_now(130)
    except BaseException:  # noqa: BLE001 - report, then exit without hanging
        import traceback
        traceback.print_exc()
        exit_now(1)
