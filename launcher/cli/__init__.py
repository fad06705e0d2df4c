"""`python -m launcher submit|render|status|logs|list|delete|serve|models|predict`: parsing
and dispatch (serving commands: launcher/serving/cli.py).

Exit codes: 0 success (for `submit` and `status -w`: the TFJob Succeeded); 1 the TFJob
Failed (`status` with or without -w), or the backend reported an error (no such job,
name taken, cluster unreachable; `delete --ignore-not-found` exits 0 for a missing job);
2 bad input (one line `error: <field>: <problem>; <fix>` on stderr, nothing applied,
nothing on stdout); 130 interrupted with Ctrl-C.

Trainer arguments follow `--`, as with gcloud: `submit --workers 2 -- --train-steps 200`.
Flags are taken whole (no prefixes), an unknown one named with the flag it resembles.
Heavy modules (jinja2, jsonschema, rich, the Kubernetes client) load only in the
commands that need them, so `--help` stays fast.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import Callable, NoReturn

from ..backends import KINDS, check_cluster_args
from ..backends.base import stderr_note
from ..events import terminal_safe
from ..spec import _DNS1035, DEFAULT_NAMESPACE, SpecError, check_namespace, shown

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
_REPLICA = re.compile(r"(chief|ps|worker|evaluator)-\d+")
PROG = "python -m launcher"
OUTPUTS = ("yaml", "json", "name", "wide")
TRAINER_ARGS_EPILOG = """\
Trainer arguments go after --, as with gcloud: submit --workers 2 --ps 1 -- --train-steps 300
--model taxi. The trainer's flags: python -m trainer.task --help."""
NAME_HELP = "the job's name (submit prints it; list shows the jobs of the namespace, list -A of every namespace)"
# What each job command's --help says above its flags, and its examples below them
# (kubectl's layout); the text is kept as written (RawDescriptionHelpFormatter).
DESCRIPTIONS = {
    "submit": """\
Render a TFJob from the flags (and a Cloud ML config.yaml), check it against the TFJob schema,
then run it: on the cluster (k8s backend, through training-operator) or on this machine (local
backend: one process per replica, with the TF_CONFIG the operator would give each pod). Then
follow it to its end: replicas coming up, training progress, the chief's log, the final metrics
and the export. Exit 0 only when the job Succeeded (with --detach: once it is submitted; a dry
run: once it is printed), 1 when it Failed, 2 on bad input (nothing submitted).""",
    "render": """\
Print the TFJob that submit would send to a cluster for the same flags (--backend local: what
the local backend would run, with its default --job-dir and its checks; auto renders for a
cluster); no request is made, no cluster is needed. --values-out also writes the values of the
Helm chart (charts/tfjob) for the same job.""",
    "status": """\
The job's conditions, as training-operator sets them, and a table of its replicas: phase, the
reason of a replica that waits or ended, restarts, node, age. Exit 1 when the job Failed.""",
    "logs": """\
Log lines of a job's replicas, each prefixed with its replica: the chief's (worker-0's without a
chief), one replica's with --replica, or every replica's with --replica all. -f follows across
restarts until the job ends. On a cluster a log goes with its pod: once a job ended, the pods its
cleanPodPolicy deleted (Running, the default: the ps and workers) have none; submit with
--clean-pod-policy None to keep them.""",
    "list": """\
The TFJobs of the namespace (-A: of every namespace) with their phase, replica counts and age;
on the local backend, the jobs run on this machine.""",
    "tensorboard": """\
Start TensorBoard on the job's --job-dir (a local path or gs://, read from the job) and print
its URL; it runs until Ctrl-C.""",
    "delete": """\
Delete a job and its replicas (several: each in turn). Its outputs in --job-dir are kept:
a new job of the same name and job dir resumes from its checkpoints. On the local backend
--purge also removes the outputs kept in the job's default job dir.""",
}
EXAMPLES = {
    "submit": """\
  python -m launcher submit --workers 2 --ps 1 -- --train-steps 300
  python -m launcher submit --backend k8s -n training --image gcr.io/my-project/tfjob-trainer:0.1.0 \\
      --job-dir gs://my-bucket/jobs/mnist --workers 4 --ps 1 -- --data-dir gs://my-bucket/data/mnist
  python -m launcher submit --config config.yaml --detach -- --model taxi""",
    "render": """\
  python -m launcher render --workers 4 --ps 2 -- --train-steps 1000 > tfjob.yaml
  python -m launcher render --workers 2 --values-out values.yaml -- --model taxi""",
    "status": """\
  python -m launcher status mnist-ps
  python -m launcher status mnist-ps -w -o wide""",
    "logs": """\
  python -m launcher logs mnist-ps
  python -m launcher logs mnist-ps --replica all -f
  python -m launcher logs mnist-ps --replica worker-1 -p --tail 50""",
    "list": """\
  python -m launcher list
  python -m launcher list -A -o wide""",
    "tensorboard": """\
  python -m launcher tensorboard mnist-ps
  python -m launcher tensorboard mnist-ps --port 0""",
    "delete": """\
  python -m launcher delete mnist-ps --wait
  python -m launcher delete mnist-ps mnist-ps-2 --ignore-not-found
  python -m launcher delete mnist-ps --purge""",
}


class UsageError(SpecError):
    """A command-line problem found by argparse."""


class Parser(argparse.ArgumentParser):
    """argparse that reports a bad flag as one `error:` line (exit 2) without the usage dump,
    and takes flags whole, as kubectl and gcloud do (`--all` is not `--all-namespaces`)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)  # subcommands' parsers are made by this class too
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args=None, namespace=None):
        from trainer.flags import given_twice  # the trainer's own rule (no TensorFlow)

        argv = list(sys.argv[1:] if args is None else args)
        if twice := given_twice(self, argv):
            raise UsageError(twice[0], f"given twice, also as {twice[1]}; give it once")
        return super().parse_known_args(_on_off(self, argv), namespace)

    def error(self, message: str) -> NoReturn:
        match = re.match(r"argument ([^:]+): (.*)", message, re.S)
        field, detail = (_primary(match[1].split("/")), match[2]) if match else (self.prog, message)
        if ";" not in detail:
            detail += f"; see {self.prog} --help"
        raise UsageError(field, " ".join(detail.split()))


_BOOLS = {**dict.fromkeys(("true", "True", "TRUE", "t", "T", "1"), True),
          **dict.fromkeys(("false", "False", "FALSE", "f", "F", "0"), False)}  # Go's strconv.ParseBool


def _on_off(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """kubectl's form of an on/off flag, --wait=false, --ignore-not-found=true (pflag's bools
    take =VALUE): the flag itself or nothing, as argparse has it; other values stay for
    argparse to refuse."""
    taken = []
    for position, token in enumerate(argv):
        if token == "--":  # the trainer's arguments follow, untouched
            return taken + argv[position:]
        flag, sep, value = token.partition("=")
        action = parser._option_string_actions.get(flag) if sep and flag.startswith("--") else None
        if isinstance(action, argparse._StoreTrueAction) and value in _BOOLS:
            taken += [flag] if _BOOLS[value] else []
        else:
            taken.append(token)
    return taken


def _primary(names: list[str]) -> str:
    """The name an error gives a flag: its first long name (--namespace of -n/--namespace,
    --workers of --workers/--worker-count, whose second name is gcloud's); main() then
    names it as typed (_as_typed)."""
    return next((name for name in names if name.startswith("--")), names[-1])


def _as_typed(exc: SpecError, parser: argparse.ArgumentParser | None, flags: list[str]) -> str:
    """`exc`'s line naming its flag as the user typed it: `--worker-count: ...` for gcloud's
    name of --workers (the spelling of its last use: the second of two, which Parser refuses)."""
    text = str(exc)
    for action in _actions(parser) if exc.field.startswith("--") else ():
        longs = [name for name in action.option_strings if name.startswith("--")]
        if longs[:1] != [exc.field]:
            continue
        used = [name for token in flags for name in longs if token == name or token.startswith(name + "=")]
        if used and used[-1] != exc.field:
            return used[-1] + text[len(exc.field):]
    return text


def _actions(parser: argparse.ArgumentParser | None):
    """Every action of `parser` and of its subcommands' parsers."""
    for action in parser._actions if parser is not None else ():
        yield action
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                yield from _actions(sub)


def _innermost(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the (sub)command `args` was parsed for: `models list`'s, not `models`'."""
    while True:
        chosen = [action.choices[getattr(args, action.dest)] for action in parser._actions
                  if isinstance(action, argparse._SubParsersAction) and getattr(args, action.dest, None) in action.choices]
        if not chosen:
            return parser
        parser = chosen[0]


def _is_trainer_flag(flag: str) -> bool:
    from trainer.flags import parser as trainer_parser

    return any(flag in action.option_strings for action in trainer_parser()._actions if action.dest != "help")


def unknown_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace, extra: list[str]) -> UsageError:
    """What argparse could not place, as one line naming the first unknown flag (or extra
    argument) of the command and the flag it most likely meant (`--all`: --all-namespaces)."""
    sub = _innermost(parser, args)
    prog, first = sub.prog, extra[0]
    if not first.startswith("-") or first == "-":
        return UsageError(prog, f"unexpected argument {first!r}; see {prog} --help")
    from trainer.flags import did_you_mean  # the trainer's flags get the same suggestions

    flag = first.split("=", 1)[0]
    if getattr(args, "command", None) in ("submit", "render") and _is_trainer_flag(flag):
        return UsageError(flag, f"a flag of the trainer, which goes after --: {prog} [flags] -- {flag} ...; "
                          "see python -m trainer.task --help")
    hint = did_you_mean(flag, sub)
    hint += " " if hint else ""
    return UsageError(shown(flag), f"unknown flag of {prog}; {hint}see {prog} --help")


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|[smh])")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}


def duration(text: str) -> float:
    """argparse type: kubectl's durations (--since, --request-timeout), a positive number of
    seconds or Go's form: 30s, 2m, 1h, 1h30m, 500ms."""
    text = text.strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", text):
        seconds = float(text)
    elif re.fullmatch(f"(?:{_DURATION_PART.pattern})+", text):
        seconds = sum(float(number) * _UNIT_SECONDS[unit] for number, unit in _DURATION_PART.findall(text))
    else:
        seconds = 0
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive duration; use e.g. 30s, 2m, 1h30m or 45")
    return seconds


def count(text: str) -> int:
    """argparse type: a whole number >= 0."""
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 0; use e.g. 0 or 3")
    return int(text)


def _common(parser: argparse.ArgumentParser, timeout_help: str = "how long to wait for each answer of the API server, "
            "e.g. 30s, 2m (default 30s)") -> None:
    parser.add_argument("--backend", choices=KINDS, default="auto",
                        help="k8s (cluster), local (this machine) or auto (default: k8s when configured)")
    parser.add_argument("-n", "--namespace", default=None,
                        help=f"namespace (default: the kubeconfig context's, as kubectl, else {DEFAULT_NAMESPACE})")
    parser.add_argument("--kubeconfig", help="kubeconfig file (implies --backend k8s; default $KUBECONFIG, ~/.kube/config)")
    parser.add_argument("--context", help="kubeconfig context (implies --backend k8s)")
    parser.add_argument("--request-timeout", type=duration, metavar="DURATION", help=timeout_help)


def build_parser() -> argparse.ArgumentParser:
    from .args import add_job_flags

    parser = Parser(prog=PROG, description="Distributed TensorFlow training as a Kubeflow TFJob, "
                    "on Kubernetes or on this machine.", epilog="Trainer arguments go after --. "
                    "Installed, the same commands are also the console script `tfjob`.")
    parser.add_argument("--version", action="store_true", help="print the launcher's version and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, help: str, epilog: str = "", **kwargs) -> argparse.ArgumentParser:
        examples = "Examples:\n" + EXAMPLES[name]
        return commands.add_parser(name, help=help, description=DESCRIPTIONS[name],
                                   epilog=f"{epilog}\n\n{examples}" if epilog else examples,
                                   formatter_class=argparse.RawDescriptionHelpFormatter, **kwargs)

    submit = command("submit", "run a training job and follow it", TRAINER_ARGS_EPILOG,
                     usage=f"{PROG} submit [JOB] [flags] [-- TRAINER_ARGS ...]")
    add_job_flags(submit)
    submit.add_argument("--dry-run", nargs="?", const="client", choices=("client", "server", "none"),
                        help="apply nothing: client (the default of a bare --dry-run) prints the TFJob (on a "
                             "cluster with its NetworkPolicy); server has the API server validate both "
                             "(dryRun=All, as kubectl's) and prints its answer; none: a real run (kubectl's form). A bare --dry-run takes the next word as its "
                             "value: put JOB first or write --dry-run=client")
    submit.add_argument("--server-dry-run", action="store_true", help="the same as --dry-run=server")
    submit.add_argument("-o", "--output", choices=OUTPUTS,
                        help="how to print the TFJob of a dry run (default yaml; on a cluster the TFJob and its "
                             "NetworkPolicy, two YAML documents or json's v1 List, unless --no-network-policy), "
                             "or, when submitting, "
                             "name (tfjob.kubeflow.org/NAME alone, as kubectl's -o name; also for a dry run), yaml or json (the "
                             "TFJob sent; with name, the one output on stdout: the job is followed on stderr), or wide: "
                             "one table row of the job (NAME, NAMESPACE, BACKEND, REPLICAS, IMAGE, JOB DIR, QUEUE; "
                             "also for a dry run) and, while following, the replica table with each replica's "
                             "EXIT CODE and MESSAGE (as status -o wide)")
    submit.add_argument("--detach", "--async", action="store_true", help="return once submitted (--async: gcloud's name)")
    submit.add_argument("--stream-logs", action="store_true",
                        help="follow the job and its chief's logs until it ends: the default (gcloud's flag)")
    submit.add_argument("--replace", action="store_true", help="replace a job of the same name")
    submit.add_argument("--max-resubmits", type=count, metavar="N",
                        help="when a replica's pod is deleted (spot preemption, node drain, kubectl delete pod), "
                             "training-operator v1.9 fails the whole TFJob; submit then deletes it and submits it "
                             "again, up to N times (default 3; 0: never), and the trainer resumes from the latest "
                             "checkpoint in --job-dir. Only while submit follows the job (not with --detach)")
    render = command("render", "print the TFJob for the same flags", TRAINER_ARGS_EPILOG,
                     usage=f"{PROG} render [JOB] [flags] [-- TRAINER_ARGS ...]")
    add_job_flags(render)
    render.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml",
                        help="format of the TFJob (default yaml)")
    render.add_argument("--values-out", metavar="FILE", help="also write the Helm chart values to FILE")
    status = command("status", "conditions and replicas of a job")
    status.add_argument("name", metavar="NAME", help=NAME_HELP)
    status.add_argument("-w", "--watch", action="store_true", help="follow until the job ends")
    status.add_argument("-o", "--output", choices=OUTPUTS, help="yaml, json (the status as data: name, phase, "
                        "conditions, replicas; not the TFJob object of kubectl get tfjob NAME -o yaml), name, or wide "
                        "(the replica table with each replica's EXIT CODE and MESSAGE: why it waits or ended, e.g. "
                        "Unschedulable: ..., ImagePullBackOff: ..., CrashLoopBackOff; also with -w, which refuses the "
                        "others: they print one snapshot); default: conditions and a replica table whose REASON "
                        "column says why in a word")
    logs = command("logs", "log lines of one replica or all")
    logs.add_argument("name", metavar="NAME", help=NAME_HELP)
    logs.add_argument("--replica", help="chief-0, ps-0, worker-1, ... (or gcloud's task names: master-replica-0, "
                      "worker-replica-1, ...; master-0) or all "
                      "(default: chief-0, else worker-0)")
    logs.add_argument("-f", "--follow", action="store_true", help="follow across restarts until the job ends")
    logs.add_argument("--tail", type=int, metavar="N", help="only the last N lines of each replica; with -f, the "
                      "last N lines so far, then every new line (kubectl's --tail; -1, the default: all)")
    logs.add_argument("-p", "--previous", action="store_true", help="the replica's previous container (local: "
                      "process), the one before its current one, as kubectl's lastState; it has ended, so -f "
                      "adds nothing")
    logs.add_argument("--since", type=duration, metavar="DURATION", help="only lines newer than e.g. 10m, 2h, 1h30m")
    logs.add_argument("--timestamps", action="store_true",
                      help="each line starts with its time, RFC 3339 in UTC as the kubelet gives it (local "
                      "backend: when its supervisor saw the line, at most 0.1 s after it was written)")
    listing = command("list", "jobs in a namespace")
    listing.add_argument("-A", "--all-namespaces", action="store_true", help="the jobs of every namespace")
    listing.add_argument("-o", "--output", choices=OUTPUTS, help="yaml, json (the rows as data: items of name, "
                         "namespace, phase, created, replicas, queue; not kubectl's List of TFJob objects), name "
                         "(tfjob.kubeflow.org/NAME), "
                         "wide (with the creation time and Kueue queue); default: a table")
    board = command("tensorboard", "TensorBoard on the job dir of a job (local path or gs://)")
    board.add_argument("name", metavar="NAME", help=NAME_HELP)
    board.add_argument("--port", type=int, default=6006, help="local port (default 6006; 0: any free port)")
    board.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    delete = command("delete", "delete jobs and their replicas", usage=f"{PROG} delete NAME [NAME ...] [flags]")
    delete.add_argument("names", nargs="+", metavar="NAME", help=NAME_HELP + "; several are deleted in turn, as "
                        "kubectl's (every name is checked first; a job missing or refused is an error line, the "
                        "others deleted, exit 1)")
    delete.add_argument("--wait", action="store_true", help="return once it is gone, its replicas too (without it, "
                        "delete returns once the deletion is accepted, where kubectl waits by default; "
                        "the local backend always waits)")
    delete.add_argument("--ignore-not-found", action="store_true", help="exit 0 when there is no such job (kubectl's flag)")
    delete.add_argument("--purge", action="store_true",
                        help="local backend: also remove the outputs kept in the job's default job dir")
    for sub in (submit, render, status, logs, listing, delete, board):
        _common(sub)
    from ..serving.cli import add_parsers

    add_parsers(commands, _common)
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


def check_name(name: str, field: str = "NAME") -> None:
    """A TFJob name, as `field` (NAME, or a flag such as --from-job) gives it."""
    if not _DNS1035.fullmatch(name) or len(name) > 63:
        from ..cloudml import job_name

        if "_" in name and _DNS1035.fullmatch(job_name(name)) and len(name) <= 63:  # what submit JOB made of it
            raise SpecError(field, f"{name!r} is a Cloud ML job id; its TFJob is named {job_name(name)} (submit "
                            "turns '_' into '-' and capitals into lower case)")
        raise SpecError(field, f"{name!r} is not a TFJob name; use the name shown by `{PROG} list`")


def namespace_of(args: argparse.Namespace) -> str:
    """-n/--namespace, else, as kubectl, the kubeconfig context's namespace (not for
    --backend local, which has no cluster), else `default`."""
    namespace = args.namespace
    flag, context = getattr(args, "kubeconfig", None), getattr(args, "context", None)
    if flag or context:  # given, they must name a file and a context there, also for render
        from ..backends.kubeconfig import check_kubeconfig, kubeconfig_paths

        check_kubeconfig(flag or os.pathsep.join(map(str, kubeconfig_paths(os.environ, Path.home()))), flag, context)
    if namespace is None and getattr(args, "backend", "auto") != "local":
        from ..backends import in_cluster
        from ..backends.kubeconfig import context_namespace

        namespace = context_namespace(getattr(args, "kubeconfig", None), getattr(args, "context", None),
                                      in_cluster=in_cluster(os.environ))
    namespace = namespace if namespace is not None else DEFAULT_NAMESPACE
    check_namespace(namespace)
    return namespace


_GCLOUD_TASK = re.compile(r"(master|worker|ps|evaluator)(?:-replica)?-(\d+)")


def replica_alias(replica: str | None) -> str | None:
    """gcloud's names of a replica: its task names (--task-name, the logs' task_name label:
    master-replica-0, worker-replica-1, ps-replica-0) and master-N; master is the chief."""
    match = _GCLOUD_TASK.fullmatch(replica) if replica else None
    if match is None:
        return replica
    return f"{'chief' if match[1] == 'master' else match[1]}-{match[2]}"


def check_replica(replica: str | None, field_name: str = "--replica") -> None:
    if replica not in (None, "all") and not _REPLICA.fullmatch(replica):
        raise SpecError(field_name, f"{replica!r} is not a replica; use e.g. chief-0, ps-0, worker-1 or all")


BackendFactory = Callable[[str], object]


REQUEST_TIMEOUT_UNUSED = ("note: --request-timeout is not used: no cluster is configured, so this runs on this "
                          "machine (the local backend)")


def resolve_backend(args: argparse.Namespace, quiet: bool = False) -> str:
    """--backend as `k8s` or `local` (resolve_kind; `quiet`: without its note that auto chose
    this machine); a --request-timeout that auto's choice leaves unused is said in one note."""
    from ..backends import resolve_kind

    kind = resolve_kind(args.backend, note=(lambda line: None) if quiet else stderr_note)
    if unused_request_timeout(args, kind):
        stderr_note(REQUEST_TIMEOUT_UNUSED)
    return kind


def error_line(exc: object) -> str:
    """`error: ...` for a refusal or failure, its control characters shown as text: a message
    may carry the cluster's or a model server's words, or a path, which are anyone's."""
    return f"error: {terminal_safe(str(exc))}"


def unused_request_timeout(args: argparse.Namespace, kind: str) -> bool:
    """`auto` chose this machine for a command given --request-timeout (--backend local refuses it)."""
    return kind == "local" and args.backend == "auto" and getattr(args, "request_timeout", None) is not None \
        and not _bounds_model_server(args)


def _bounds_model_server(args: argparse.Namespace) -> bool:
    """predict's --request-timeout bounds the model server's answers too, on every backend."""
    return getattr(args, "command", None) == "predict"


# How the CLI spells the cluster's settings, for check_cluster_args's errors
CLI_NAMES = {"kubeconfig": "--kubeconfig", "context": "--context", "request_timeout": "--request-timeout"}


def _default_factory(args: argparse.Namespace) -> BackendFactory:
    def factory(kind: str):
        from ..backends import get_backend

        if kind == "local":  # main() refused the cluster's flags with --backend local; `auto` chose this one
            return get_backend(kind, foreground=True)  # a job submit follows stops with it (Ctrl-C)
        return get_backend(kind, kubeconfig=args.kubeconfig, context=args.context,
                           request_timeout=args.request_timeout)

    return factory


def _dispatch(args: argparse.Namespace, trainer_args: tuple[str, ...], factory: BackendFactory) -> int:
    if args.command in ("submit", "render"):
        from . import submit

        run = submit.submit if args.command == "submit" else submit.render_command
        return run(args, trainer_args, factory)
    if trainer_args:
        raise SpecError("--", f"trainer arguments only go with submit and render, not {args.command}")
    if args.command in ("serve", "models", "predict"):
        from ..serving import cli as serving_cli

        return serving_cli.run(args, factory)
    from . import jobs

    return jobs.COMMANDS[args.command](args, factory)


def main(argv: list[str] | None = None, backend_factory: BackendFactory | None = None) -> int:
    from ..backends.base import BackendError

    argv = list(sys.argv[1:] if argv is None else argv)
    flags, trainer_args = split_trainer_args(argv)
    parser = None
    try:
        parser = build_parser()
        args, extra = parser.parse_known_args(flags)
        if extra:
            raise unknown_arguments(parser, args, extra)
        if args.version:
            print(f"tfjob-launcher {version()}")
            return EXIT_OK
        if args.command is None:
            build_parser().print_help(sys.stderr)
            return EXIT_USAGE
        args.backend = check_cluster_args(args.backend, args.kubeconfig, args.context,
                                          None if _bounds_model_server(args) else getattr(args, "request_timeout", None),
                                          CLI_NAMES)
        if getattr(args, "all_namespaces", False) and args.namespace is not None:
            raise SpecError("--namespace", "not with -A/--all-namespaces, which lists every namespace; drop one of them")
        return _dispatch(args, trainer_args, backend_factory or _default_factory(args))
    except SpecError as exc:
        print(error_line(_as_typed(exc, parser, flags)), file=sys.stderr)
        return EXIT_USAGE
    except BackendError as exc:
        print(error_line(exc), file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("Interrupted.", file=sys.stderr)
        return EXIT_INTERRUPTED
