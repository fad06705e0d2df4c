"""`status`, `logs`, `list` and `delete`: commands on existing jobs, any backend."""
from __future__ import annotations

import sys

from .backends import resolve_kind
from .cli import EXIT_FAILED, EXIT_OK, check_name, check_replica, namespace_of
from .events import JobCondition, TERMINAL
from .spec import SpecError
from .view import JobView, age, format_rows, replica_rows

LIST_COLUMNS = ("NAME", "NAMESPACE", "PHASE", "REPLICAS", "AGE")


def _backend(args, factory):
    return factory(resolve_kind(args.backend))


def _print(line: str = "") -> None:
    print(line, flush=True)


def status(args, factory) -> int:
    check_name(args.name)
    backend = _backend(args, factory)
    namespace = namespace_of(args)
    snapshot = backend.status(args.name, namespace)
    if args.watch and snapshot.phase not in TERMINAL:
        return _watch(backend, snapshot)
    _print(f"TFJob {snapshot.name} (namespace {snapshot.namespace}, {backend.name} backend): {snapshot.phase}")
    for condition in snapshot.conditions:
        parts = (f"{condition.type}={condition.status}", condition.time, condition.reason, condition.message)
        _print("  " + " ".join(part for part in parts if part))
    for line in format_rows(replica_rows(snapshot.replicas)):
        _print(line)
    return EXIT_OK if not args.watch or snapshot.phase == "Succeeded" else EXIT_FAILED


def _watch(backend, snapshot) -> int:
    """Follow a running job. events() starts with the job's state so far (k8s: the first
    list; local: the recorded history), so the snapshot is not shown again (it would print
    every condition twice)."""
    terminal = None
    with JobView(snapshot.name, snapshot.namespace) as view:
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
    check_replica(args.replica)
    backend = _backend(args, factory)
    namespace = namespace_of(args)
    replica = args.replica
    if replica is None:
        replica = default_replica(backend, args.name, namespace)
    elif replica == "all":
        replica = None
    for line in backend.logs(args.name, namespace, replica, follow=args.follow):
        sys.stdout.write(f"[{line.replica}] {line.line}\n")
        sys.stdout.flush()
    return EXIT_OK


def list_jobs(args, factory) -> int:
    backend = _backend(args, factory)
    namespace = None if args.all_namespaces else namespace_of(args)
    rows = []
    for job in backend.list(namespace):
        replicas = " ".join(f"{rtype.lower()}={count}" for rtype, count in job.replicas.items())
        rows.append((job.name, job.namespace, job.phase, replicas, age(job.created)))
    for line in format_rows(rows, LIST_COLUMNS):
        _print(line)
    return EXIT_OK


def delete(args, factory) -> int:
    check_name(args.name)
    namespace = namespace_of(args)
    backend = _backend(args, factory)
    if backend.name != "local":
        if args.purge:
            raise SpecError("--purge", "only the local backend keeps outputs itself; a cluster job's outputs are "
                            "in its --job-dir (e.g. gs://...): remove them there")
        backend.delete(args.name, namespace, wait=args.wait)
        _print(f"tfjob {args.name} deleted" + ("" if args.wait else " (replicas are being removed)"))
        return EXIT_OK
    kept = backend.delete(args.name, namespace, wait=args.wait, purge=args.purge)
    _print(f"tfjob {args.name} deleted")
    if kept:
        _print(f"Kept its outputs (checkpoints, TensorBoard events, exported model) in {kept}; a new job named "
               f"{args.name} resumes from them. Remove them with --purge.")
    return EXIT_OK


COMMANDS = {"status": status, "logs": logs, "list": list_jobs, "delete": delete}
