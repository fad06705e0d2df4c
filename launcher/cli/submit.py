"""`submit` and `render`: flags -> JobSpec -> TFJob -> validate -> print / apply -> follow."""
from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
from pathlib import Path

from ..backends import resolve_kind
from ..backends.base import BackendError, NotFound
from . import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, REQUEST_TIMEOUT_UNUSED, unused_request_timeout
from .args import build_spec
from .jobs import RESOURCE
from ..checks import check_submission, local_notes, sharing_note
from ..events import JobCondition, evaluator_line
from ..spec import JobSpec, SpecError, check_trainer_args, cluster_data_note, namespace_flag
from ..view import suspended_note

DEFAULT_MAX_RESUBMITS = 3
MAX_RESUBMITS_UNUSED = ("note: --max-resubmits is not used by the local backend: no cluster deletes its replicas "
                        "(the case it is for); a replica that fails restarts by its restartPolicy")


def _note(line: str) -> None:
    print(line, file=sys.stderr)


def _out(text: str, out=None) -> None:
    """One output line (or block) on `out` (default stdout), flushed."""
    out = out or sys.stdout
    out.write(text if text.endswith("\n") else text + "\n")
    out.flush()


def check_arguments(spec: JobSpec, kind: str, args, trainer_args) -> None:
    """check_trainer_args, naming the config file when the arguments came from it (`args`, `containerArgs`)."""
    if trainer_args or not args.config:
        check_trainer_args(spec, kind)
    else:
        check_trainer_args(spec, kind, f"--config {args.config}", "trainer arguments from the file: ")


def _with_default_job_dir(spec: JobSpec, backend) -> JobSpec:
    from trainer.flags import job_dir_given

    if spec.job_dir is not None or job_dir_given(spec.trainer_args):  # given after -- (build_spec: once)
        return spec
    job_dir = backend.default_job_dir(spec.name, spec.namespace)
    return dataclasses.replace(spec, job_dir=job_dir) if job_dir else spec


def rendered(spec: JobSpec, backend=None) -> dict:
    """The TFJob for `spec`, validated against the CRD schema and the operator's rules:
    $TFJOB_CRD when set, else the CRD installed where `backend` runs jobs, else the
    packaged copy (see launcher.schemas)."""
    from ..render import render
    from ..validate import validate

    tfjob = render(spec)
    validate(tfjob, crd=installed_crd(backend))
    return tfjob


def installed_crd(backend) -> dict | None:
    """The cluster's TFJob CRD, or None to use $TFJOB_CRD / the packaged copy (with a note
    when the cluster's could not be read)."""
    from .. import schemas
    from ..backends.base import CRDUnavailable

    if backend is None or schemas.configured_path("tfjob"):
        return None
    try:
        return backend.installed_crd(schemas.get("tfjob").crd_name)
    except CRDUnavailable as exc:
        _note(f"note: {exc}; validating with the packaged CRD of {schemas.describe('tfjob')}")
        return None


def network_policy(spec: JobSpec) -> dict | None:
    """The job's NetworkPolicy (k8s backend), None with --no-network-policy."""
    from ..render import render_network_policy

    return render_network_policy(spec)


def manifest_text(tfjob: dict, output: str = "yaml") -> str:
    from ..render import to_yaml

    return json.dumps(tfjob, indent=2) + "\n" if output == "json" else to_yaml(tfjob)


def write_values(spec: JobSpec, path: str) -> None:
    """Helm values for `spec`, written atomically (nothing is left behind on error)."""
    from trainer.outputs import write_text

    from ..helm_values import values_yaml

    if not path:
        raise SpecError("--values-out", "is empty; give the file to write, e.g. --values-out job.values.yaml")
    target = Path(path)
    if target.is_symlink():  # written through, as `> FILE` would: the link stays a link
        target = Path(os.path.realpath(target))
    if target.is_dir():
        raise SpecError("--values-out", f"{path!r} is a directory; give a file in it, e.g. {str(Path(path) / 'values.yaml')!r}")
    if not target.parent.is_dir():
        raise SpecError("--values-out", f"directory {str(target.parent)!r} does not exist; create it first")
    if not os.access(target.parent, os.W_OK | os.X_OK):
        raise SpecError("--values-out", f"cannot write in {str(target.parent)!r} (permission denied); "
                        "give a path you can write")
    try:
        write_text(str(target), values_yaml(spec))  # whole or not at all, the mode kept (trainer.outputs)
    except OSError as error:  # a full disk: the values file, not the output, could not be written
        raise BackendError(f"--values-out: cannot write {path}: {error.strerror or error}") from None


def render_command(args, trainer_args, factory) -> int:
    spec, notes = build_spec(args, trainer_args)
    kind = "local" if args.backend == "local" else "k8s"
    check_arguments(spec, kind, args, trainer_args)
    check_submission(spec, kind, dry_run="client")  # what it would run, whose inputs may come later
    if kind == "local":  # show what the local backend would run
        spec = _with_default_job_dir(spec, factory("local"))
    tfjob = rendered(spec)
    if args.values_out is not None:
        write_values(spec, args.values_out)
    for line in notes:
        _note(line)
    _out(manifest_text(tfjob, args.output))
    return EXIT_OK


_CHECKPOINT = re.compile(r"ckpt-(\d+)\.index")  # a checkpoint's index file, numbered by its step


def _resume_note(tfjob: dict, spec: JobSpec, backend) -> str | None:
    """A local job dir that already holds checkpoints (a job resubmitted under the name of
    a deleted one, whose outputs delete keeps, or a --job-dir used before): the trainer
    resumes from the latest; the note, with how to start over, read before the job starts
    (with --replace, once the replaced job has stopped: its chief saves as it stops) and
    said once it was submitted (not for a submission refused)."""
    from .jobs import job_dir_of

    job_dir = job_dir_of(tfjob)
    if not job_dir or "://" in job_dir:
        return None
    steps = [int(m[1]) for f in Path(job_dir, "checkpoints").glob("ckpt-*.index")
             if (m := _CHECKPOINT.fullmatch(f.name))]
    if not steps:
        return None
    fresh = "another --job-dir"
    if job_dir == backend.default_job_dir(spec.name, spec.namespace):
        ns = namespace_flag(spec.namespace)
        fresh += f", or remove them first with `python -m launcher delete {spec.name}{ns} --purge`"
    return (f"note: the job dir {job_dir} already holds checkpoints (the latest at step {max(steps)}): the job "
            f"resumes from it; to start over, use {fresh}")


def dry_run_mode(args) -> str | None:
    """kubectl's --dry-run=client|server|none, with --server-dry-run as an alias of server."""
    mode = None if args.dry_run == "none" else args.dry_run
    if args.server_dry_run:
        if mode == "client":
            raise SpecError("--server-dry-run", "conflicts with --dry-run (client); use one: --dry-run=client "
                            "prints the TFJob, --dry-run=server has the API server check it")
        mode = "server"
    if args.stream_logs and args.detach:
        raise SpecError("--stream-logs", "conflicts with --detach/--async; use one")
    if args.max_resubmits is not None and (args.detach or mode):
        raise SpecError("--max-resubmits", "only applies while submit follows the job; drop it or "
                        + ("--detach" if args.detach else "--dry-run"))
    if mode and (args.detach or args.replace or args.stream_logs):
        flag = "--detach" if args.detach else "--replace" if args.replace else "--stream-logs"
        raise SpecError(flag, f"a dry run submits nothing, so {flag} has no effect; drop one of them")
    return mode


def submit(args, trainer_args, factory) -> int:
    dry_run = dry_run_mode(args)
    spec, notes = build_spec(args, trainer_args)
    kind = resolve_kind(args.backend)
    check_arguments(spec, kind, args, trainer_args)
    check_submission(spec, kind, dry_run)
    backend = factory(kind) if (kind == "local" or dry_run != "client") else None
    if backend is not None:
        spec = _with_default_job_dir(spec, backend)
    if unused_request_timeout(args, kind):
        notes.append(REQUEST_TIMEOUT_UNUSED)
    for line in notes:  # once the input passed every check: bad input is one line alone
        _note(line)
    if kind == "local":
        for line in local_notes(spec, bool(args.node_selector)):
            _note(line)
        if args.max_resubmits is not None:
            _note(MAX_RESUBMITS_UNUSED)
        if not dry_run and (line := sharing_note(spec, backend)):
            _note(line)
    elif not dry_run and (line := cluster_data_note(spec, kind)):  # what would start
        _note(line)
    tfjob = rendered(spec, backend)
    policy = network_policy(spec) if kind == "k8s" else None
    output = args.output or "yaml"
    if dry_run:
        if dry_run == "server" and kind == "local":
            _note("note: --dry-run=server: the local backend has no API server; printing what it would run on "
                  "this machine (use --backend k8s to have a cluster's API server check the TFJob)")
        answer = ([tfjob, policy] if policy else [tfjob]) if dry_run == "client" else backend.dry_run(tfjob, policy)
        if output == "name":  # kubectl's -o name: the resource alone, no "created (dry run)"
            _out(f"{RESOURCE}/{spec.name}")
        elif output == "wide":
            _out(job_row(spec, kind, "(dry run)"))
        elif output == "yaml":  # the policy follows the TFJob it goes with
            _out("---\n".join(manifest_text(item, output) for item in answer))
        elif len(answer) > 1:  # json: both, as kubectl prints several: a List
            _out(manifest_text({"apiVersion": "v1", "kind": "List", "items": answer}, output))
        else:
            _out(manifest_text(answer[0], output))
        return EXIT_OK
    resuming = _resume_note(tfjob, spec, backend) if kind == "local" and not args.replace else None
    hints = Hints(spec, args.backend, args.kubeconfig, args.context)
    try:
        backend.submit(tfjob, replace=args.replace, network_policy=policy)
        if kind == "local" and args.replace:  # the job replaced saved a checkpoint as it was stopped
            resuming = _resume_note(tfjob, spec, backend)
        return _after_submit(args, spec, kind, backend, tfjob, policy, hints, resuming)
    except KeyboardInterrupt:  # a local job as it was sent, before the live view took it: not left running
        if args.detach or kind != "local":  # meant to run on; a cluster's may not exist yet: "Interrupted."
            raise
        return interrupted(backend, spec, hints)


def _after_submit(args, spec: JobSpec, kind: str, backend, tfjob: dict, policy: dict | None, hints: Hints,
                  resuming: str | None) -> int:
    """What submit prints once the job is sent, then (without --detach) the live view."""
    if resuming:
        _note(resuming)
    if args.output == "name":
        _out(f"{RESOURCE}/{spec.name}")
    elif args.output == "wide":
        _out(job_row(spec, backend.name))
    elif args.output:
        _out(manifest_text(tfjob, args.output))
    else:
        queued = f"; {suspended_note(spec.queue_name, spec.namespace)}" if kind == "k8s" and spec.queue_name else ""
        _out(f"tfjob {spec.name} submitted (namespace {spec.namespace}, {backend.name} backend){queued}")
    if args.detach:  # a hint, not the command's output: stdout stays what -o asked for
        _note(hints.follow())
        return EXIT_OK
    limit = DEFAULT_MAX_RESUBMITS if args.max_resubmits is None else args.max_resubmits
    # -o name|json|yaml: stdout holds that alone (to pipe, as kubectl's); the job is followed on
    # stderr, where gcloud's --stream-logs writes it
    view = sys.stderr if args.output in ("name", "json", "yaml") else sys.stdout
    return follow(backend, spec, hints, Resubmitter(backend, tfjob, policy, spec, limit, out=view),
                  wide=args.output == "wide", out=view)


def job_row(spec: JobSpec, backend_name: str, note: str = "") -> str:
    """`submit -o wide`: the job as one row of a kubectl-style table, under its header."""
    from ..view import format_rows

    replicas = " ".join(f"{role.lower()}={spec.count(role)}" for role in spec.replicas if spec.count(role))
    row = (spec.name, spec.namespace, backend_name, replicas, spec.image, spec.job_dir or "<none>",
           spec.queue_name or "<none>")
    header, line = format_rows([row], ("NAME", "NAMESPACE", "BACKEND", "REPLICAS", "IMAGE", "JOB DIR", "QUEUE"))
    return f"{header}\n{line}" + (f"   {note}" if note else "")


@dataclasses.dataclass
class Hints:
    """The commands to print for a job, with its namespace and backend flags."""

    spec: JobSpec
    backend_flag: str
    kubeconfig: str | None = None
    context: str | None = None

    def _flags(self) -> str:
        import shlex

        flags = namespace_flag(self.spec.namespace)
        flags += "" if self.backend_flag == "auto" else f" --backend {self.backend_flag}"
        for flag, value in (("--kubeconfig", self.kubeconfig), ("--context", self.context)):
            flags += f" {flag} {shlex.quote(value)}" if value else ""
        return flags

    def command(self, verb: str, extra: str = "") -> str:
        return f"python -m launcher {verb} {self.spec.name}{self._flags()}{extra}"

    def follow(self) -> str:
        return f"Follow it: {self.command('logs', ' -f')}   Status: {self.command('status', ' -w')}"

    def interrupted(self, backend_name: str) -> str:
        if backend_name == "k8s":
            return (f"Interrupted; TFJob {self.spec.name} keeps running in namespace {self.spec.namespace}. "
                    f"Follow it: {self.command('logs', ' -f')}   Delete it: {self.command('delete')}")
        if backend_name == "local":
            return (f"Stopped local job {self.spec.name}: every replica has exited. "
                    f"Its logs stay: {self.command('logs', ' --replica all')}")
        return f"Interrupted. Check it: {self.command('status')}"


def log_replica(spec: JobSpec) -> str:
    """The replica whose logs the live view follows: the chief, else worker 0."""
    return "chief-0" if spec.count("Chief") else "worker-0"


def interrupted(backend, spec: JobSpec, hints: Hints) -> int:
    """Ctrl-C while a job is followed in the foreground: a local job is stopped before the
    prompt comes back (a cluster's runs on); exit 130."""
    if backend.name == "local":
        _note(f"Interrupted; stopping local job {spec.name} ...")
        from ..backends.local.procs import uninterrupted

        with uninterrupted():  # bounded: SIGKILL after the stop's grace
            try:
                backend.stop(spec.name, spec.namespace)
            except NotFound:  # interrupted before it was made (its folder removed): nothing runs, no logs
                _note(f"Interrupted before local job {spec.name} was submitted: nothing runs.")
                return EXIT_INTERRUPTED
    _note(hints.interrupted(backend.name))
    return EXIT_INTERRUPTED


def follow(backend, spec: JobSpec, hints: Hints, resubmit=None, wide: bool = False, out=None) -> int:
    """Live view until the job is terminal: 0 Succeeded, 1 Failed, 130 on Ctrl-C. When a
    deleted pod failed the job (see launcher.resubmit), `resubmit(deletion)` may submit it
    again (it returns True when it did) and the view follows the new run. `out`: where the
    view prints (default stdout)."""
    from ..resubmit import deleted_in

    while True:
        try:
            terminal, failed, fault = _follow_once(backend, spec, wide, out)
        except KeyboardInterrupt:
            return interrupted(backend, spec, hints)
        if terminal == "Failed" and failed is not None and resubmit is not None:
            deletion = fault.deletion(failed)
            if deletion is None and spec.run_policy.clean_pod_policy != "All":
                expected = {role: spec.count(role) for role in spec.replicas}
                deletion = deleted_in(failed, backend.status(spec.name, spec.namespace).replicas, expected)
            if deletion is not None and resubmit(deletion):
                continue
        if terminal not in ("Succeeded", "Failed"):
            _note(f"error: the event stream ended while {spec.name} was {terminal}; "
                  f"check it: {hints.command('status', ' -w')}")
        return EXIT_OK if terminal == "Succeeded" else EXIT_FAILED


def _follow_once(backend, spec: JobSpec, wide: bool = False, out=None):
    """One run of the job until it is terminal: (its phase, the terminal condition, what failed first)."""
    from ..follow import merged
    from ..resubmit import FirstFault
    from ..view import JobView

    terminal, failed, fault = None, None, FirstFault()
    queue = spec.queue_name if backend.name != "local" and spec.queue_name else ""  # local: ignored
    with JobView(spec.name, spec.namespace, out=out, suspended=bool(queue), queue=queue, wide=wide) as view:
        side = {"evaluator-0": evaluator_line} if spec.count("Evaluator") else None  # its Eval lines
        for event in merged(backend, spec.name, spec.namespace, log_replica(spec), side=side):
            view.handle(event)
            fault.see(event)
            if isinstance(event, JobCondition) and event.terminal and terminal is None:
                terminal, failed = event.type, event
        if terminal is None:  # the event stream ended early: ask once
            status = backend.status(spec.name, spec.namespace)
            view.seed(status.conditions, ())
            terminal = status.phase
            failed = next((c for c in reversed(status.conditions) if c.terminal), None)
        view.finish()
    return terminal, failed, fault


class Resubmitter:
    """Submits a job again after a deleted pod failed it (`--max-resubmits`), saying why."""

    def __init__(self, backend, tfjob: dict, policy: dict | None, spec: JobSpec, limit: int, out=None) -> None:
        self.backend, self.tfjob, self.policy, self.spec, self.limit = backend, tfjob, policy, spec, limit
        self.out = out  # where the followed job's lines go (None: stdout)
        self.done = 0

    def __call__(self, deletion) -> bool:
        spec = self.spec
        what = (f"tfjob {spec.name} failed because its {deletion.replica} pod was deleted (a spot preemption, a node "
                "drain or kubectl delete pod: training-operator v1.9 fails the whole job for it)")
        if not spec.job_dir:
            _note(f"{what}; not submitted again: without --job-dir its checkpoints were inside the deleted pods "
                  "(give --job-dir gs://... or a path on a --volume to resume after this)")
            return False
        if self.done >= self.limit:
            _note(f"{what}; not submitted again (--max-resubmits {self.limit} reached)")
            return False
        self.done += 1
        _note(f"{what}; submitting it again ({self.done} of {self.limit}): it resumes from the latest checkpoint "
              f"in {spec.job_dir}")
        self.backend.submit(self.tfjob, replace=True, network_policy=self.policy)
        _out(f"tfjob {spec.name} submitted again (namespace {spec.namespace}, {self.backend.name} backend)", self.out)
        return True
