"""`status`, `logs`, `list` and `delete`: commands on existing jobs, any backend."""
from __future__ import annotations

import math
import queue
import signal
from pathlib import Path
import sys
import time

from ..backends.base import BackendError, LogOptions, NotFound, deleted_pods_reason, stderr_note
from . import EXIT_FAILED, EXIT_OK, check_name, check_replica, error_line, namespace_of, replica_alias, resolve_backend
from ..events import JobCondition, TERMINAL
from ..spec import SpecError, check_listen_port, namespace_flag
from ..view import (COLUMNS, WIDE_COLUMNS, JobView, age, format_rows, no_resources, replica_rows,
                    suspended_note)

LIST_COLUMNS = ("NAME", "NAMESPACE", "PHASE", "REPLICAS", "AGE")


def _backend(args, factory):
    """The backend, chosen without the "no cluster configured" note: submit says it once, and
    status, logs, list and delete name the backend where it matters (status, --help)."""
    return factory(resolve_backend(args, quiet=True))


def _print(line: str = "") -> None:
    print(line, flush=True)


RESOURCE = "tfjob.kubeflow.org"
TENSORBOARD_START_S = 60.0  # from starting TensorBoard to its "serving at URL" line


def _dump(data, output: str) -> None:
    """-o json|yaml: the data as kubectl would print an object."""
    import json

    import yaml

    text = json.dumps(data, indent=2) + "\n" if output == "json" else yaml.safe_dump(data, sort_keys=False)
    sys.stdout.write(text)
    sys.stdout.flush()


def status_data(snapshot) -> dict:
    import dataclasses

    return {"name": snapshot.name, "namespace": snapshot.namespace, "backend": snapshot.backend,
            "phase": snapshot.phase, "created": snapshot.created, "queue": snapshot.queue,
            "conditions": [dataclasses.asdict(c) for c in snapshot.conditions],
            "replicas": [dataclasses.asdict(r) for r in snapshot.replicas],
            **({"deleted": list(snapshot.deleted)} if snapshot.deleted else {})}


def status(args, factory) -> int:
    check_name(args.name)
    if args.watch and args.output in ("json", "yaml", "name"):  # whatever the job's state: a script's line
        raise SpecError("--output", f"-o {args.output} prints one snapshot; drop -w or -o")
    backend = _backend(args, factory)
    namespace = namespace_of(args)
    snapshot = backend.status(args.name, namespace)
    if args.watch and snapshot.phase not in TERMINAL:
        return _watch(backend, snapshot, wide=args.output == "wide")
    code = EXIT_FAILED if snapshot.phase == "Failed" or (args.watch and snapshot.phase != "Succeeded") else EXIT_OK
    if args.output in ("json", "yaml"):
        _dump(status_data(snapshot), args.output)
        return code
    if args.output == "name":
        _print(f"{RESOURCE}/{snapshot.name}")
        return code
    _print(f"TFJob {snapshot.name} (namespace {snapshot.namespace}, {backend.name} backend): {snapshot.phase}")
    if snapshot.phase == "Suspended":
        _print(f"  {suspended_note(snapshot.queue, snapshot.namespace)}")
    for condition in snapshot.conditions:
        why = ": ".join(part for part in (condition.reason, condition.message) if part)  # Stopped: the launcher ...
        parts = (f"{condition.type}={condition.status}", condition.time, why)
        _print("  " + " ".join(part for part in parts if part))
    wide = args.output == "wide"
    for line in format_rows(replica_rows(snapshot.replicas, wide=wide), WIDE_COLUMNS if wide else COLUMNS):
        _print(line)
    if snapshot.deleted:
        print(f"note: {', '.join(snapshot.deleted)}: not listed: "
              f"{deleted_pods_reason(snapshot.clean_pod_policy)}", file=sys.stderr, flush=True)
    return code


def _watch(backend, snapshot, wide: bool = False) -> int:
    """Follow a running job. events() starts with the job's state so far (k8s: the first
    list; local: the recorded history), so the snapshot is not shown again (it would print
    every condition twice)."""
    terminal = None
    with JobView(snapshot.name, snapshot.namespace, suspended=snapshot.phase == "Suspended",
                 queue=snapshot.queue, wide=wide) as view:
        for event in backend.events(snapshot.name, snapshot.namespace):
            view.handle(event)
            if isinstance(event, JobCondition) and event.terminal:
                terminal = event.type
                break
        view.finish()
    return EXIT_OK if terminal == "Succeeded" else EXIT_FAILED


def default_replica(backend, name: str, namespace: str) -> str | None:
    """chief-0 when the job has a chief, else worker-0; None (all) while unknown."""
    types = {replica.type for replica in backend.status(name, namespace).replicas}
    if "Chief" in types:
        return "chief-0"
    return "worker-0" if "Worker" in types else None


def logs(args, factory) -> int:
    check_name(args.name)
    args.replica = replica_alias(args.replica)
    check_replica(args.replica)
    if args.tail == -1:  # kubectl's --tail=-1: every line
        args.tail = None
    if args.tail is not None and args.tail < 0:
        raise SpecError("--tail", f"{args.tail} is not a number of lines; use 0 or more (e.g. --tail 20), or -1 for all")
    options = LogOptions(previous=args.previous, timestamps=args.timestamps,
                         since_seconds=math.ceil(args.since) if args.since else None,  # whole seconds, as kubectl
                         tail_lines=args.tail)
    if options.previous:  # as kubectl: the previous container has ended, so -f prints it and returns
        args.follow = False
    backend = _backend(args, factory)
    backend.check_log_options(options)
    namespace = namespace_of(args)
    replica = args.replica
    if replica is None:
        replica = default_replica(backend, args.name, namespace)
    elif replica == "all":
        replica = None
    extra = {"options": options} if options else {}
    lines = backend.logs(args.name, namespace, replica, follow=args.follow, **extra)
    for line in lines:
        sys.stdout.write(f"[{line.replica}] {line.line}\n")
        sys.stdout.flush()
    return EXIT_OK


def list_jobs(args, factory) -> int:
    backend = _backend(args, factory)
    namespace = None if args.all_namespaces else namespace_of(args)
    jobs = backend.list(namespace)
    if args.output in ("json", "yaml"):
        import dataclasses

        _dump({"items": [dataclasses.asdict(job) for job in jobs]}, args.output)
        return EXIT_OK
    if not jobs:
        print(no_resources(namespace), file=sys.stderr)
        return EXIT_OK
    if args.output == "name":
        for job in jobs:
            _print(f"{RESOURCE}/{job.name}")
        return EXIT_OK
    wide = args.output == "wide"
    rows = []
    for job in jobs:
        replicas = " ".join(f"{rtype.lower()}={count}" for rtype, count in job.replicas.items())
        rows.append((job.name, job.namespace, job.phase, replicas, age(job.created),
                     *((job.created, job.queue or "<none>") if wide else ())))
    for line in format_rows(rows, LIST_COLUMNS + (("CREATED", "QUEUE") if wide else ())):
        _print(line)
    return EXIT_OK


def delete(args, factory) -> int:
    """Each name in turn, as kubectl's: every name checked first (bad input deletes nothing);
    a job that is not there (none with --ignore-not-found) or that cannot be deleted is an
    error line and the others are still deleted; exit 1 when one failed."""
    for name in args.names:
        check_name(name)
    backend = _backend(args, factory)
    if args.purge and backend.name != "local":
        raise SpecError("--purge", "only the local backend keeps outputs itself; a cluster job's outputs are "
                        "in its --job-dir (e.g. gs://...): remove them there")
    failed = False
    for name in args.names:
        try:
            _delete(args, backend, name)
        except NotFound as exc:
            if not args.ignore_not_found:
                print(error_line(exc), file=sys.stderr, flush=True)
                failed = True
        except BackendError as exc:  # refused or unreachable for this one: the others are still tried
            if len(args.names) == 1:
                raise
            print(error_line(exc), file=sys.stderr, flush=True)
            failed = True
    return EXIT_FAILED if failed else EXIT_OK


def _delete(args, backend, name: str) -> None:
    namespace = namespace_of(args)
    if backend.name != "local":
        backend.delete(name, namespace, wait=args.wait)
        _print(f"tfjob {name} deleted" + ("" if args.wait else " (replicas are being removed)"))
        return
    run = backend.runs.job(name, namespace) if hasattr(backend, "runs") else None  # the local backend's folders
    existed, output = (run.exists(), run.output) if run else (True, None)
    kept = backend.delete(name, namespace, wait=args.wait, **({"purge": True} if args.purge else {}))
    if not existed:  # --purge of what an earlier delete kept
        _print(f"Removed the outputs kept of deleted tfjob {name} ({output})")
        return
    _print(f"tfjob {name} deleted")
    if kept:
        again = f"python -m launcher delete {name}{namespace_flag(namespace)}"
        stderr_note(f"note: kept its outputs ({outputs_in(Path(kept))}) in {kept}; a new job named {name} "
                    f"resumes from them. Remove them with `{again} --purge`.")  # stdout: what was deleted, as kubectl


def outputs_in(job_dir: Path) -> str:
    """What a job dir holds, in words: checkpoints, TensorBoard events, exported model."""
    found = [words for words, names in (("checkpoints", ("checkpoints",)), ("TensorBoard events", ("train", "eval")),
                                        ("exported model", ("export",))) if any((job_dir / n).exists() for n in names)]
    return ", ".join(found) or "its job dir"


def job_dir_of(tfjob: dict) -> str | None:
    """The job dir the job's containers were given (the chief's, else any replica's): its
    --job-dir, or the trainer's other spellings of it (--model_dir, ...), the last one as
    the trainer's argparse takes it."""
    from trainer.flags import job_dir_given

    specs = tfjob.get("spec", {}).get("tfReplicaSpecs") or {}
    for rtype in ("Chief", "Master", "Worker", *specs):
        for container in (specs.get(rtype) or {}).get("template", {}).get("spec", {}).get("containers") or []:
            given = job_dir_given(container.get("args") or [])
            if given:
                return given[-1][1]
    return None


def tensorboard(args, factory) -> int:
    """TensorBoard (a subprocess of this interpreter: the launcher never imports TensorFlow)
    on the job's --job-dir, until Ctrl-C."""
    import importlib.util
    import subprocess
    import threading

    check_name(args.name)
    check_listen_port(args.port)
    from ..serving.local import check_port

    check_port(args.host, args.port)  # taken, or not an address here: one line, not TensorBoard's exit 255 later
    if importlib.util.find_spec("tensorboard") is None:
        raise SpecError("tensorboard", "TensorBoard is not installed; pip install 'tfjob-launcher[local]'")
    backend = _backend(args, factory)
    namespace = namespace_of(args)
    job_dir = job_dir_of(backend.manifest(args.name, namespace))
    if not job_dir:
        raise SpecError("NAME", f"tfjob {args.name} has no --job-dir, so there is nothing for TensorBoard to show; "
                        "submit with --job-dir")
    # gs://: TensorFlow's own GCS filesystem reads the events, with the trainer's credentials
    # (ADC, a service-account key, the metadata server). TensorBoard's default fast loader
    # (RustBoard) has a GCS client of its own that takes none of those (tensorflow/tensorboard
    # issues 5819, 5850, 5934): it shows an empty board.
    loader = ["--load_fast=false"] if job_dir.startswith("gs://") else []
    if loader and importlib.util.find_spec("tensorflow") is None:  # its loader thread dies on gs://: an empty board
        raise SpecError("tensorboard", f"reading {job_dir} needs TensorFlow's gs:// filesystem, which TensorBoard "
                        "alone lacks; pip install 'tfjob-launcher[local]'")
    from ..backends.local.procs import die_with_parent

    proc = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir", job_dir, *loader,
                             "--host", args.host, "--port", str(args.port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=die_with_parent(signal.SIGTERM))  # the launcher killed: it goes too
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))  # as Ctrl-C: stop it
    lines: queue.Queue = queue.Queue()  # TensorBoard's stderr, read by a thread: the wait for its URL is bounded
    serving = threading.Event()

    def pump() -> None:  # after the URL, what TensorBoard says is read and dropped: its pipe never fills
        for line in proc.stderr:
            if not serving.is_set():
                lines.put(line)

    threading.Thread(target=pump, name="tensorboard-stderr", daemon=True).start()
    try:
        url, said = _tensorboard_url(proc, lines)
        serving.set()
        if url is None:
            last = " | ".join(line.strip() for line in said[-3:] if line.strip()) or "nothing"
            if proc.poll() is None:
                raise BackendError(f"TensorBoard did not say where it serves {job_dir} within "
                                   f"{TENSORBOARD_START_S:.0f} s (it said: {last}); stopped it")
            raise BackendError(f"TensorBoard exited with {proc.returncode} before serving {job_dir} (it said: {last})")
        _print(f"TensorBoard for {args.name} ({job_dir}): {url}  (Ctrl-C stops it)")
        if "://" not in job_dir and (note := _no_events_note(job_dir)):
            stderr_note(note)  # else an empty board, alike for a job not started and a dir that is not here
        return EXIT_OK if proc.wait() in (0, -2) else EXIT_FAILED
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        signal.signal(signal.SIGTERM, previous)


def _no_events_note(job_dir: str) -> str | None:
    """A note when a local job dir holds no TensorBoard event files (in it or in its runs,
    JOB_DIR/train/ and the like, two levels down at most), or is not there at all."""
    import os

    if not os.path.isdir(job_dir):
        return f"note: {job_dir} does not exist on this machine; the board shows the job's events once it writes them there"
    for folder, subfolders, files in os.walk(job_dir):
        if any(name.startswith("events.out.tfevents.") for name in files):
            return None
        if folder != job_dir and os.path.dirname(folder) != job_dir.rstrip("/"):  # deeper: not walked
            subfolders.clear()
    return f"note: no TensorBoard events in {job_dir} yet; the board shows them as the job writes them"


def _tensorboard_url(proc, lines: "queue.Queue[str]") -> tuple[str | None, list[str]]:
    """(the URL TensorBoard says it serves at, or None if it exited or said nothing of the
    kind within TENSORBOARD_START_S; what it said meanwhile)."""
    said: list[str] = []
    deadline = time.monotonic() + TENSORBOARD_START_S
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=min(left, 0.5))
        except queue.Empty:
            if proc.poll() is not None and lines.empty():
                break
            continue
        said.append(line)
        if "http://" in line and " at " in line:  # "TensorBoard 2.x at http://HOST:PORT/ (Press CTRL+C to quit)"
            return line[line.index("http://"):].split()[0], said
    return None, said


COMMANDS = {"status": status, "logs": logs, "list": list_jobs, "delete": delete, "tensorboard": tensorboard}
