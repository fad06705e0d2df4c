"""`serve`, `models list|delete` and `predict`: the launcher's version of

    gcloud ml-engine models create / versions create --origin EXPORT   ->  serve NAME --model-dir EXPORT
    gcloud ml-engine models list / delete                              ->  models list / models delete NAME
    gcloud ml-engine predict --json-instances request.json             ->  predict NAME --json-instances request.json
    gcloud ai-platform predict --model NAME --json-request body.json   ->  the same (--version, --region: noted)
    gcloud ai-platform jobs submit prediction --input-paths --output-path
                                                                       ->  predict NAME --input-paths P --output-path DIR

Exit codes as for the other commands: 0 done, 1 the server or backend failed, 2 bad input
(one line naming the flag; nothing started or written), 130 Ctrl-C.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import re
import sys
from typing import Iterator

from ..checks import require_linux
from ..cli import EXIT_FAILED, EXIT_OK, PROG, duration, resolve_backend
from ..events import terminal_safe
from ..backends.base import BackendError, NotFound
from ..spec import SpecError, check_listen_port, namespace_flag
from ..view import age, format_rows, no_resources
from . import client, predictions
from .k8s import DEFAULT_RUNTIME_VERSION

COMMANDS = ("serve", "models", "predict")
_MODEL_NAME = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
DEFAULT_PORT = 8080
READY_TIMEOUT = 300.0
DELETE_TIMEOUT = 300.0


def add_parsers(commands, common) -> None:
    """Register the serving subcommands on the launcher's subparsers."""
    serve = commands.add_parser(
        "serve", help="serve an exported model (local model server or KServe InferenceService)",
        description="Serve a SavedModel export over TensorFlow Serving's REST API. local: a model "
        "server process on this machine (python -m trainer.serve), running on after the command "
        "returns; stop it with `models delete NAME` (or use --foreground and Ctrl-C). k8s: a KServe "
        "InferenceService, waited for until Ready; `predict --backend k8s` reaches it through the API "
        "server.")
    serve.add_argument("name", metavar="NAME", help="model name (lowercase DNS-1035: mnist, mnist-v2)")
    origin = serve.add_mutually_exclusive_group()
    origin.add_argument("--model-dir", help="export base (JOB_DIR/export, numeric version dirs; the highest "
                        "is served) or one SavedModel dir; local path or gs:// (k8s: gs://, pvc://CLAIM/PATH, "
                        "s3://)")
    origin.add_argument("--from-job", metavar="JOB", help="serve the latest export of this training job "
                        "(its --job-dir/export)")
    serve.add_argument("--host", help="local: address to listen on (default 127.0.0.1; "
                       "0.0.0.0 exposes it to the network)")
    serve.add_argument("--port", type=int,
                       help=f"local: HTTP port (default {DEFAULT_PORT}; 0: any free port, shown in the URL)")
    serve.add_argument("--timeout", type=duration, default=READY_TIMEOUT, metavar="DURATION",
                       help=f"how long to wait until the model is ready, e.g. 300, 5m (default {READY_TIMEOUT:g}s)")
    serve.add_argument("--foreground", action="store_true",
                       help="local: keep the server attached; Ctrl-C stops it")
    serve.add_argument("--runtime-version", default=None,
                       help=f"k8s: TensorFlow Serving version of KServe's runtime (default {DEFAULT_RUNTIME_VERSION})")
    serve.add_argument("--runtime-image", metavar="IMAGE",
                       help="k8s: serve with this image's python -m trainer.serve (the serving image: docker build "
                       "--target serve) instead of TensorFlow Serving; it reads gs:// itself, pvc:// is mounted")
    serve.add_argument("--service-account", help="k8s: service account of the predictor pod (Workload Identity "
                       "for gs://)")
    serve.add_argument("--dry-run", nargs="?", const="client", choices=("client", "server", "none"),
                       help="k8s: apply nothing; client prints the InferenceService, server has the API server "
                       "check it too; none: a real run (kubectl's form)")
    serve.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml",
                       help="format of a dry run's InferenceService (default yaml)")
    serve.add_argument("--no-wait", action="store_true", help="k8s: return once created, without waiting "
                       "until Ready")
    common(serve)
    models = commands.add_parser("models", help="list or delete served models",
                                 description="The models `serve` started: models list shows them, models delete "
                                             "stops one.")
    actions = models.add_subparsers(dest="models_command", metavar="ACTION", required=True,
                                    help="list or delete (models ACTION --help says more)")
    listing = actions.add_parser("list", help="served models: name, URL, model dir, status, age (k8s: name, "
                                 "namespace, URL, ready, age)",
                                 description="The models `serve` started: local model servers on this machine, "
                                             "or the KServe InferenceServices of the namespace (k8s backend).")
    listing.add_argument("-A", "--all-namespaces", action="store_true", help="k8s: the models of every namespace")
    common(listing)
    delete = actions.add_parser("delete", help="stop serving a model",
                                description="Stop serving a model: its local model server stops, or its KServe "
                                            "InferenceService is deleted (k8s backend). The model dir is kept.")
    delete.add_argument("name", metavar="NAME", help="model name given to `serve` (models list shows them)")
    delete.add_argument("--wait", action="store_true", help="k8s: return once the InferenceService and its "
                        "pods are gone (bounded by --timeout)")
    delete.add_argument("--timeout", type=duration, metavar="DURATION",
                        help=f"k8s: how long --wait waits, e.g. 300, 5m (default {DELETE_TIMEOUT:g}s)")
    common(delete)
    predict = commands.add_parser(
        "predict", help="online or batch prediction against a served model",
        description="Send instances to a served model and print or write its predictions.")
    predict.add_argument("name", metavar="NAME", nargs="?", help="model name given to `serve` (or gcloud's --model)")
    predict.add_argument("--model", metavar="NAME", help="gcloud's form of NAME")
    given = predict.add_mutually_exclusive_group(required=True)
    given.add_argument("--json-instances", metavar="FILE", help="one JSON instance per line (local, gs://, or - "
                       "for stdin); prints one line per instance")
    given.add_argument("--json-request", metavar="FILE", help="gcloud's other form: one request body "
                       '{"instances": [...]} (and perhaps "signature_name"), local, gs:// or -; prints one line per '
                       "instance")
    given.add_argument("--text-instances", metavar="FILE", help="gcloud's third form: one instance per line, each "
                       "line sent as a string (a signature with one string input), local, gs:// or -")
    given.add_argument("--input-paths", metavar="PATTERN", help="batch: comma-separated file patterns of JSON "
                       "instances (with --output-path), local or gs://BUCKET/PATH (* and ? within a folder, ** "
                       "across folders, as gcloud); gs:// needs the [gcs] extra and Application Default "
                       "Credentials (gcloud auth application-default login)")
    predict.add_argument("--output-path", metavar="DIR", help="batch: folder (local or gs://) for "
                         "prediction.results-00000-of-00001 (one JSON line per instance) and "
                         "prediction.errors_stats-00000-of-00001 (one line per failed batch); both are written "
                         "after the last batch, so a failed or interrupted run writes neither")
    predict.add_argument("--format", choices=("table", "json"), help="online: table (default: one line per "
                         "instance, one column per output) or json (the predictions as the server sent them, a "
                         "list), gcloud's --format")
    predict.add_argument("--batch-size", type=int, help="batch (--input-paths): instances per request (default 64)")
    predict.add_argument("--signature-name", help="SavedModel signature (default serving_default, or the one "
                         "whose inputs are the instances' fields); refused when the model's metadata does not "
                         "list it")
    predict.add_argument("--version", dest="model_version",  # not the launcher's own --version
                         help="gcloud's model version: accepted and ignored, with a note (a model here serves the "
                              "one export `serve` loaded)")
    predict.add_argument("--region", help=argparse.SUPPRESS)  # gcloud's; noted and ignored
    predict.add_argument("--url", help="REST base of any TF Serving compatible server (http://HOST:PORT), "
                         "asked directly; without it, NAME is looked up on the backend (k8s: the InferenceService "
                         "is reached through the API server's service proxy, with the kubeconfig's credentials)")
    common(predict, timeout_help="how long to wait for each answer, e.g. 30s, 2m: of the model server (default "
           f"{client.TIMEOUT:g}s), and on k8s of the API server (default 30s)")


def check_model_name(name: str) -> None:
    if not _MODEL_NAME.fullmatch(name) or len(name) > 63:
        raise SpecError("NAME", f"{name!r} is not a model name; use lowercase letters, digits and '-', "
                        "starting with a letter (e.g. mnist)")


def _print(line: str = "") -> None:
    print(line, flush=True)


LOCAL_NAMESPACE_NOTE = ("note: {flag} is not used by the local model server (its models have no namespace; "
                        "with `serve --from-job` --namespace names the job's)")


def _local_namespace_note(args) -> None:
    """On the local backend, a --namespace (or -A) that does nothing is said once."""
    if (args.namespace is not None or getattr(args, "all_namespaces", False)) \
            and not (args.command == "serve" and args.from_job):
        flag = "--namespace" if args.namespace is not None else "-A/--all-namespaces"
        print(LOCAL_NAMESPACE_NOTE.format(flag=flag), file=sys.stderr)


def job_export(tfjob: dict) -> str | None:
    """JOB_DIR/export of a TFJob manifest: the job dir its replicas were given, by --job-dir
    or the trainer's other spellings of it (--model_dir, ...), as `tensorboard` reads it."""
    from ..cli.jobs import job_dir_of

    job_dir = job_dir_of(tfjob)
    return None if job_dir is None else job_dir.rstrip("/") + "/export"


def _no_export(job: str, namespace: str, export: str) -> str:
    """Why local job `job` has no export, and what to do: wait only while it may still write one."""
    from ..backends.local import LocalBackend

    try:
        status = LocalBackend(note=lambda line: None).status(job, namespace)
        phase, conditions = status.phase, status.conditions
    except (OSError, ValueError, KeyError):  # its folder is still being written: being submitted
        phase, conditions = "Pending", ()
    flags = namespace_flag(namespace)
    see = f"`{PROG} status {job}{flags}` and `{PROG} logs {job}{flags}`"
    if phase == "Failed":
        reason = next((c.reason for c in reversed(conditions) if c.type == "Failed" and c.reason), "")
        return (f"job {job!r} failed{f' ({reason})' if reason else ''} and wrote no export ({export}); see why "
                f"with {see}, then submit it again (submit --replace), or pass --model-dir")
    if phase == "Succeeded":
        return (f"job {job!r} succeeded but wrote no export ({export}); see {see} (its trainer exports to "
                "--job-dir/export), or pass --model-dir")
    return (f"job {job!r} has no export yet ({export}); it is {phase}: wait until "
            f"`{PROG} status {job}{flags}` says Succeeded")


def _local_model_dir(args) -> str:
    if args.from_job:
        from ..backends.local.runs import RunsDir
        from ..cli import namespace_of

        run = RunsDir().job(args.from_job, namespace_of(args))
        if not run.exists():
            raise SpecError("--from-job", f"no local job {args.from_job!r}; see `{PROG} list --backend local`")
        export = job_export(run.manifest())
        if export is None:
            raise SpecError("--from-job", f"job {args.from_job!r} has no --job-dir; pass --model-dir")
        if not export.startswith("gs://") and not os.path.isdir(export):
            raise SpecError("--from-job", _no_export(args.from_job, namespace_of(args), export))
        return export
    if not args.model_dir:
        raise SpecError("--model-dir", "missing; pass --model-dir JOB_DIR/export or --from-job JOB")
    if args.model_dir.startswith("gs://"):
        return args.model_dir
    if not os.path.isdir(args.model_dir):
        raise SpecError("--model-dir", f"{args.model_dir} is not a folder; pass JOB_DIR/export")
    return os.path.abspath(args.model_dir)


def serve(args, factory) -> int:
    from ..cli import check_name

    check_model_name(args.name)
    if args.from_job:
        check_name(args.from_job, "--from-job")
    if args.port is not None:
        check_listen_port(args.port)
    kind = "k8s" if args.dry_run in ("client", "server") and args.backend == "auto" else resolve_backend(args)
    if kind == "k8s":
        return serve_k8s(args)
    args.host = "127.0.0.1" if args.host is None else args.host
    args.port = DEFAULT_PORT if args.port is None else args.port
    for flag, value in (("--runtime-image", args.runtime_image), ("--runtime-version", args.runtime_version),
                        ("--service-account", args.service_account), ("--no-wait", args.no_wait),
                        ("--dry-run", args.dry_run not in (None, "none"))):
        if value:
            raise SpecError(flag, "only with --backend k8s (a KServe InferenceService)")
    require_linux("the local model server runs", "serve on a cluster")
    missing = [m for m in ("tensorflow", "kserve") if importlib.util.find_spec(m) is None]
    if missing:
        raise SpecError("--backend local", f"the local model server needs {' and '.join(missing)}, which "
                        "this Python lacks; pip install 'tfjob-launcher[serve]', or serve on a cluster with "
                        "--backend k8s")
    from .local import LocalModels

    _local_namespace_note(args)
    models = LocalModels()
    model_dir = _local_model_dir(args)
    model, process = models.serve(args.name, model_dir, args.host, args.port, args.timeout,
                                  foreground=args.foreground)
    _print(f"Model {model.name} is ready: {model.predict_url}")
    _print(f"  Open Inference Protocol (KServe v2, binary tensors for throughput): {model.infer_url}")
    if not args.foreground:
        _print(f"  model dir {model.model_dir}, log {model.log}; stop it with `{PROG} models delete {model.name}`")
        return EXIT_OK
    _print(f"  model dir {model.model_dir}, log {model.log}; Ctrl-C stops it")
    try:
        code = process.wait()
    except KeyboardInterrupt:
        from ..backends.local.procs import uninterrupted

        with uninterrupted():
            models.delete(model.name, process)
        raise
    from ..backends.local.procs import exit_code
    from .local import tail

    last = tail(model.log)
    models.delete(model.name, process)
    raise BackendError(f"the model server exited with code {exit_code(code)}; its log ended: {last}")


def _k8s_storage_uri(args) -> str:
    """--model-dir, or the export of the TFJob named by --from-job (read from the cluster)."""
    if args.from_job:
        if args.dry_run == "client":
            raise SpecError("--from-job", "a client dry run reads no cluster; pass --model-dir gs://.../export")
        from ..backends.k8s import KubernetesBackend
        from ..backends.k8s.client import CALL_TIMEOUT
        from ..cli import namespace_of

        backend = KubernetesBackend(args.kubeconfig, args.context, args.request_timeout or CALL_TIMEOUT)
        try:
            tfjob = backend.api.get_tfjob(args.from_job, namespace_of(args))
        finally:
            backend.close()
        export = job_export(tfjob)
        if export is None:
            raise SpecError("--from-job", f"TFJob {args.from_job!r} has no --job-dir; pass --model-dir")
        return export
    if not args.model_dir:
        raise SpecError("--model-dir", "missing; pass --model-dir gs://BUCKET/JOB_DIR/export or --from-job JOB")
    return args.model_dir


def _show(obj: dict, output: str) -> None:
    import json

    from ..render import to_yaml

    sys.stdout.write(json.dumps(obj, indent=2) + "\n" if output == "json" else to_yaml(obj))
    sys.stdout.flush()


def serve_k8s(args) -> int:
    """A KServe InferenceService: render, validate, then print (dry run) or create and wait."""
    from ..cli import namespace_of
    from . import k8s

    for flag, value in (("--foreground", args.foreground), ("--host", args.host), ("--port", args.port)):
        if value not in (None, False):
            raise SpecError(flag, "only with --backend local (an InferenceService's server listens where KServe "
                            "puts it; predict reaches it through the API server)")
    if args.runtime_image and args.runtime_version:
        raise SpecError("--runtime-version", "not with --runtime-image (it serves with its own TensorFlow)")
    namespace = namespace_of(args)
    storage = _k8s_storage_uri(args)
    isvc = k8s.render(args.name, namespace, storage, args.runtime_version or DEFAULT_RUNTIME_VERSION,
                      args.runtime_image, args.service_account)
    k8s.validate(isvc)
    if args.dry_run == "client":
        _show(isvc, args.output)
        return EXIT_OK
    api = k8s.KServeApi(args.kubeconfig, args.context, args.request_timeout)
    try:
        if args.dry_run == "server":
            _show(api.create(isvc, dry_run=True), args.output)
            return EXIT_OK
        api.create(isvc)
        _print(f"inferenceservice {args.name} created in namespace {namespace} (storageUri {storage})")
        if args.no_wait:
            return EXIT_OK
        url = terminal_safe(api.wait_ready(args.name, namespace, args.timeout))  # the cluster's strings
        _print(f"Model {args.name} is ready: {url}/v1/models/{args.name}:predict")
        if args.runtime_image:  # the project's server; TF Serving's own image speaks v1 only
            _print(f"  Open Inference Protocol (KServe v2, binary tensors for throughput): "
                   f"{url}/v2/models/{args.name}/infer")
        address = terminal_safe((api.get(args.name, namespace).get("status") or {}).get("address", {}).get("url")
                                or "")
        if address:
            _print(f"  in the cluster: {address}/v1/models/{args.name}:predict; from here: "
                   f"`{PROG} predict {args.name} --backend k8s -n {namespace} --json-instances FILE` "
                   "(through the API server)")
        return EXIT_OK
    finally:
        api.close()


def _models_k8s(args) -> int:
    from ..cli import namespace_of
    from . import k8s

    if args.models_command == "delete":
        check_model_name(args.name)
        if args.timeout is not None and not args.wait:
            raise SpecError("--timeout", "bounds --wait; add --wait or drop it")
        timeout = DELETE_TIMEOUT if args.timeout is None else args.timeout
    api = k8s.KServeApi(args.kubeconfig, args.context, args.request_timeout)
    try:
        if args.models_command == "delete":
            api.delete(args.name, namespace_of(args))
            if args.wait:
                api.wait_gone(args.name, namespace_of(args), timeout)
            _print(f"inferenceservice {args.name} deleted")
            return EXIT_OK
        namespace = None if args.all_namespaces else namespace_of(args)
        rows = [(name, ns, url, ready, age(created))
                for name, ns, url, ready, created in map(k8s.summary, api.list(namespace))]
    finally:
        api.close()
    if not rows:
        print(no_resources(namespace), file=sys.stderr)
        return EXIT_OK
    for line in format_rows(rows, ("NAME", "NAMESPACE", "URL", "READY", "AGE")):
        _print(line)
    return EXIT_OK


def models_command(args, factory) -> int:
    kind = resolve_backend(args)
    if kind == "k8s":
        return _models_k8s(args)
    from .local import LocalModels

    _local_namespace_note(args)
    models = LocalModels()
    if args.models_command == "delete":
        check_model_name(args.name)
        if args.timeout is not None:
            raise SpecError("--timeout", "only with --backend k8s (a local model server has stopped when delete "
                            "returns)")
        models.delete(args.name)
        _print(f"model {args.name} deleted")
        return EXIT_OK
    rows = []
    for model in models.list():
        status = ("Ready" if client.ready(client.HttpServer(model.url), model.name, timeout=2.0) else "NotReady") \
            if model.running else "Stopped"
        rows.append((model.name, model.url + f"/v1/models/{model.name}", model.model_dir, status, age(model.created)))
    if not rows:
        print(no_resources(), file=sys.stderr)
        return EXIT_OK
    for line in format_rows(rows, ("NAME", "URL", "MODEL_DIR", "STATUS", "AGE")):
        _print(line)
    return EXIT_OK


@contextlib.contextmanager
def _server(args) -> Iterator[client.Server]:
    """Where `predict` sends: --url, the InferenceService (through the API server) or the local server."""
    if args.url:
        if not re.fullmatch(r"https?://[^\s/]+(/[^\s]*)?", args.url):
            raise SpecError("--url", f"{args.url!r} is not an http(s) URL; pass e.g. http://127.0.0.1:8080")
        if model_path := re.search(r"/v[12]/models(/|$)", args.url):  # `serve`'s predict URL, pasted whole
            raise SpecError("--url", f"{args.url!r} names a model's path; pass the REST base before it, "
                            f"{args.url[:model_path.start()]}")
        yield client.HttpServer(args.url, args.request_timeout)
        return
    kind = resolve_backend(args)
    if kind == "k8s":
        from ..cli import namespace_of
        from . import k8s

        api = k8s.KServeApi(args.kubeconfig, args.context, args.request_timeout)
        try:
            isvc = api.get(args.name, namespace_of(args))
            if not k8s.ready_url(isvc):
                raise BackendError(f"inferenceservice {args.name} is not Ready; see `{PROG} models list --backend k8s`")
            yield k8s.ServiceProxy(api, *k8s.cluster_address(isvc), timeout=args.request_timeout)
        finally:
            api.close()
        return
    from .local import LocalModels

    _local_namespace_note(args)
    model = LocalModels().get(args.name)
    if model is None:
        raise NotFound(f"model {args.name} is not served here; start it with `{PROG} serve {args.name} "
                       "--model-dir JOB_DIR/export`")
    if not model.running:
        raise BackendError(f"model {args.name} is stopped: its server (pid {model.pid}) exited; its log is "
                           f"{model.log}; start it again with `{_serve_again(model)}`, or forget it with "
                           f"`{PROG} models delete {args.name}`")
    yield client.HttpServer(model.url, args.request_timeout)


def _serve_again(model) -> str:
    """The `serve` command that starts a stopped local model as it was."""
    import shlex

    where = "".join(f" {flag} {value}" for flag, value, default in (("--host", model.host, "127.0.0.1"),
                                                                    ("--port", model.port, DEFAULT_PORT))
                    if value is not None and value != default)
    return f"{PROG} serve {model.name} --model-dir {shlex.quote(model.model_dir)}{where}"


def predict_name(args) -> str:
    """NAME, or gcloud's --model (once)."""
    if args.model is not None and args.name is not None and args.model != args.name:
        raise SpecError("--model", f"{args.model!r} and NAME {args.name!r} differ; give the model's name once")
    name = args.name if args.name is not None else args.model
    if name is None:
        raise SpecError("NAME", "missing; give the model's name, as `serve` was given it (or gcloud's --model NAME)")
    check_model_name(name)
    return name


def _gcloud_notes(args) -> None:
    """gcloud predict's flags that do nothing here, said once the input has been checked."""
    if args.model_version is not None:
        predictions.stderr(f"note: --version {args.model_version} is ignored: a model here serves the one export "
                           f"`serve` loaded (serve {args.name} again with another --model-dir to change it)")
    if args.region is not None:
        predictions.stderr("note: --region is a Cloud ML setting with no equivalent here; ignored")


def predict(args, factory) -> int:
    args.name = predict_name(args)
    if args.batch_size is not None and not args.input_paths:
        raise SpecError("--batch-size", "only with --input-paths (batch prediction); online, the instances go "
                        "in one request")
    args.batch_size = 64 if args.batch_size is None else args.batch_size
    if args.batch_size < 1:
        raise SpecError("--batch-size", "must be at least 1")
    if args.input_paths:
        if args.format:
            raise SpecError("--format", "only online; batch prediction writes one JSON line per instance to "
                            "--output-path")
        if not args.output_path:
            raise SpecError("--output-path", "missing; batch prediction (--input-paths) writes to a folder")
        files = predictions.input_files(args.input_paths)
        out = predictions.check_output(args.output_path)
        _gcloud_notes(args)
        with _server(args) as server:
            written, failed = predictions.batch_predict(server, args.name, files, out, args.batch_size,
                                                        args.signature_name, predictions.stderr)
        _print(f"Wrote {written} predictions to {predictions.output_file(out, predictions.RESULTS)}"
               + (f"; {failed} instances failed, see {predictions.output_file(out, predictions.ERRORS)}"
                  if failed else ""))
        return EXIT_FAILED if failed else EXIT_OK
    if args.output_path:
        raise SpecError("--output-path", "only with --input-paths (batch prediction)")
    chosen = args.signature_name
    if args.json_request:
        placed, named = predictions.read_request(args.json_request)
        if named is not None and chosen is not None and named != chosen:
            raise SpecError("--signature-name", f"{chosen!r} differs from the request's signature_name {named!r} "
                            f"in {args.json_request}; give it once")
        chosen = chosen or named
    elif args.text_instances:
        placed = predictions.read_placed(args.text_instances, "--text-instances", text=True)
    else:
        placed = predictions.read_placed(args.json_instances)
    _gcloud_notes(args)
    with _server(args) as server:
        signature = predictions.signature_for(server, args.name, predictions.instances_of(placed),
                                              chosen, predictions.stderr)
        answer = predictions.predict_placed(server, args.name, placed, signature)
    if args.format == "json":
        import json

        _print(json.dumps(answer, indent=2))
        return EXIT_OK
    for line in predictions.table(answer):
        _print(line)
    return EXIT_OK


def run(args: argparse.Namespace, factory) -> int:
    if args.namespace is not None:  # refused when bad, whichever backend and command (as the job commands do)
        from ..cli import namespace_of

        namespace_of(args)
    return {"serve": serve, "models": models_command, "predict": predict}[args.command](args, factory)
