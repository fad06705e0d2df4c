"""`python -m launcher submit|render|status|logs|list|delete`: parsing and dispatch.

Exit codes: 0 success (for `submit` and `status -w`: the TFJob Succeeded); 1 the TFJob
Failed, or the backend reported an error (no such job, name taken, cluster unreachable);
2 bad input (one line `error: <field>: <problem>; <fix>` on stderr, nothing applied,
nothing on stdout); 130 interrupted with Ctrl-C.

Trainer arguments follow `--`, as with gcloud: `submit --workers 2 -- --steps 200`.
Heavy modules (jinja2, jsonschema, rich, the Kubernetes client) load only in the
commands that need them, so `--help` stays fast.
"""
from __future__ import annotations

import argparse
import re
import sys
from typing import Callable, NoReturn

from .backends import KINDS
from .spec import _DNS1035, _DNS1123_LABEL, DEFAULT_NAMESPACE, SpecError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
_REPLICA = re.compile(r"(chief|ps|worker|evaluator)-\d+")
PROG = "python -m launcher"


class UsageError(SpecError):
    """A command-line problem found by argparse."""


class Parser(argparse.ArgumentParser):
    """argparse that reports a bad flag as one `error:` line (exit 2) without the usage dump."""

    def error(self, message: str) -> NoReturn:
        match = re.match(r"argument ([^:]+): (.*)", message, re.S)
        field, detail = (match[1].split("/")[-1], match[2]) if match else (self.prog, message)
        if ";" not in detail:
            detail += f"; see {self.prog} --help"
        raise UsageError(field, " ".join(detail.split()))


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", choices=KINDS, default="auto",
                        help="k8s (cluster), local (this machine) or auto (default: k8s when configured)")
    parser.add_argument("-n", "--namespace", default=None, help=f"namespace (default {DEFAULT_NAMESPACE})")
    parser.add_argument("--kubeconfig", help="kubeconfig file (implies --backend k8s; default $KUBECONFIG, ~/.kube/config)")
    parser.add_argument("--context", help="kubeconfig context (implies --backend k8s)")


def build_parser() -> argparse.ArgumentParser:
    from .cli_args import add_job_flags

    parser = Parser(prog=PROG, description="Distributed TensorFlow training as a Kubeflow TFJob, "
                    "on Kubernetes or on this machine.", epilog="Trainer arguments go after --. "
                    "Installed, the same commands are also the console script `tfjob`.")
    parser.add_argument("--version", action="store_true", help="print the launcher's version and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    submit = commands.add_parser("submit", help="run a training job and follow it")
    add_job_flags(submit)
    submit.add_argument("--dry-run", action="store_true", help="print the TFJob; apply nothing")
    submit.add_argument("--server-dry-run", action="store_true", help="let the backend validate it; apply nothing")
    submit.add_argument("--detach", action="store_true", help="return once submitted")
    submit.add_argument("--replace", action="store_true", help="replace a job of the same name")
    render = commands.add_parser("render", help="print the TFJob for the same flags")
    add_job_flags(render)
    render.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml")
    render.add_argument("--values-out", metavar="FILE", help="also write the Helm chart values to FILE")
    status = commands.add_parser("status", help="conditions and replicas of a job")
    status.add_argument("name")
    status.add_argument("-w", "--watch", action="store_true", help="follow until the job ends")
    logs = commands.add_parser("logs", help="log lines of one replica or all")
    logs.add_argument("name")
    logs.add_argument("--replica", help="chief-0, ps-0, worker-1, ... or all (default: chief-0, else worker-0)")
    logs.add_argument("-f", "--follow", action="store_true", help="follow across restarts until the job ends")
    listing = commands.add_parser("list", help="jobs in a namespace")
    listing.add_argument("-A", "--all-namespaces", action="store_true")
    delete = commands.add_parser("delete", help="delete a job and its replicas")
    delete.add_argument("name")
    delete.add_argument("--wait", action="store_true", help="return once it is gone")
    delete.add_argument("--purge", action="store_true",
                        help="local backend: also remove the outputs kept in the job's default job dir")
    for sub in (submit, render, status, logs, listing, delete):
        _common(sub)
    return parser


def version() -> str:
    """The installed distribution's version (importlib.metadata)."""
    from importlib import metadata

    try:
        return metadata.version("tfjob-launcher")
    except metadata.PackageNotFoundError:
        return "unknown (not installed; pip install -e . in the checkout)"


def split_trainer_args(argv: list[str]) -> tuple[list[str], tuple[str, ...]]:
    """Everything after the first `--` belongs to the trainer."""
    if "--" in argv:
        index = argv.index("--")
        return argv[:index], tuple(argv[index + 1:])
    return argv, ()


def check_name(name: str) -> None:
    if not _DNS1035.fullmatch(name) or len(name) > 63:
        raise SpecError("NAME", f"{name!r} is not a TFJob name; use the name shown by `{PROG} list`")


def namespace_of(args: argparse.Namespace) -> str:
    namespace = args.namespace or DEFAULT_NAMESPACE
    if not _DNS1123_LABEL.fullmatch(namespace) or len(namespace) > 63:
        raise SpecError("--namespace", f"{namespace!r} is not a valid namespace; use lowercase letters, digits, '-'")
    return namespace


def check_replica(replica: str | None) -> None:
    if replica not in (None, "all") and not _REPLICA.fullmatch(replica):
        raise SpecError("--replica", f"{replica!r} is not a replica; use e.g. chief-0, ps-0, worker-1 or all")


BackendFactory = Callable[[str], object]


def _default_factory(args: argparse.Namespace) -> BackendFactory:
    def factory(kind: str):
        from .backends import get_backend

        return get_backend(kind, kubeconfig=args.kubeconfig, context=args.context)

    return factory


def _dispatch(args: argparse.Namespace, trainer_args: tuple[str, ...], factory: BackendFactory) -> int:
    if args.command in ("submit", "render"):
        from . import cli_submit

        run = cli_submit.submit if args.command == "submit" else cli_submit.render_command
        return run(args, trainer_args, factory)
    if trainer_args:
        raise SpecError("--", f"trainer arguments only go with submit and render, not {args.command}")
    from . import cli_jobs

    return cli_jobs.COMMANDS[args.command](args, factory)


def main(argv: list[str] | None = None, backend_factory: BackendFactory | None = None) -> int:
    from .backends.base import BackendError

    argv = list(sys.argv[1:] if argv is None else argv)
    flags, trainer_args = split_trainer_args(argv)
    try:
        args = build_parser().parse_args(flags)
        if args.version:
            print(f"tfjob-launcher {version()}")
            return EXIT_OK
        if args.command is None:
            build_parser().print_help(sys.stderr)
            return EXIT_USAGE
        if (args.kubeconfig or args.context) and args.backend == "auto":
            args.backend = "k8s"
        return _dispatch(args, trainer_args, backend_factory or _default_factory(args))
    except SpecError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BackendError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("Interrupted.", file=sys.stderr)
        return EXIT_INTERRUPTED
