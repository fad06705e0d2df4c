"""Serve a SavedModel over TensorFlow Serving's REST API (kserve's V1 protocol) and the Open
Inference Protocol (KServe's v2, with binary tensors):

    python -m trainer.serve --model-dir JOB_DIR/export --name mnist --port 8080

    GET  /v1/models/NAME                              {"name": NAME, "ready": true}
    GET  /v1/models/NAME[/versions/V]/metadata        signatures: input/output names, dtypes, shapes
    POST /v1/models/NAME[/versions/V]:predict         {"instances": [...]} or {"inputs": ...},
                                                      optional "signature_name"
    GET  /v2/models/NAME                              serving_default's inputs and outputs
    POST /v2/models/NAME[/versions/V]/infer           {"inputs": [{"name", "datatype", "shape",
                                                      "data"}]}, or binary tensors after the JSON
                                                      (header Inference-Header-Content-Length)

--model-dir is an export base with numeric version dirs (the highest is served, as TF
Serving does) or one SavedModel dir; a local path or gs://. A bad request gets HTTP 400
and {"error": "..."}; the server keeps serving. It listens on 127.0.0.1 unless --host
says otherwise (--host 0.0.0.0 in a pod). Ctrl-C or SIGTERM stops it after the requests
in flight are answered. Exit codes: 0 stopped, 2 bad flags / no SavedModel / port in use,
130 Ctrl-C before it serves (`Interrupted.`).
"""
from __future__ import annotations

import argparse
import errno
import functools
import logging
import re
import signal
import socket
import sys
import warnings

from trainer import lazy
from trainer.flags import Parser, location
from trainer.outputs import command

EXIT_USAGE = 2
_NAME = re.compile(r"[a-z0-9]([-a-z0-9_.]*[a-z0-9])?", re.I)


def port(text: str) -> int:
    """--port's value: 0-65535 (0: a free port the system picks)."""
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text} is not a TCP port; use 1-65535, or 0 for any free port")
    return value


# TF Serving's and KServe's spelling of --name: offered --name first, not the nearest, --model-dir
MEANT = {"--model-name": "--name", "--model_name": "--name"}


def parser() -> Parser:
    flags = Parser(prog="python -m trainer.serve", description=__doc__, label="error", meant=MEANT,  # one line, as fail()'s
                   formatter_class=argparse.RawDescriptionHelpFormatter)
    flags.add_argument("--model-dir", required=True, help="export base (numeric version dirs) or a SavedModel dir",
                       type=functools.partial(location, what="an export base or a SavedModel dir"))
    flags.add_argument("--name", default="model", help="model name in the URL paths (default: model)")
    flags.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; 0.0.0.0 in a pod)")
    flags.add_argument("--port", type=port, default=8080,
                       help="HTTP port (default 8080, KServe's; 0: a free port the system picks, "
                            "named in the Serving line)")
    return flags


def fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr, flush=True)
    return EXIT_USAGE


def listen(host: str, port: int) -> socket.socket:
    """The server's socket, bound before TensorFlow loads (a taken port fails at once)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(2048)
    return sock


class _OneLineClientErrors:
    """kserve logs a traceback for every 400 and 404 (a model or version not served here,
    e.g. a typo in the URL), at ERROR; one line at INFO says it all."""

    def filter(self, record) -> bool:
        from kserve.errors import InvalidInput, ModelNotFound

        error = record.exc_info[1] if record.exc_info else None
        status = ("400 Bad Request" if isinstance(error, InvalidInput) else
                  "404 Not Found" if isinstance(error, ModelNotFound) else None)
        if status:
            record.msg, record.args, record.exc_info = f"{status}: {error}", (), None
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


def _import_kserve():
    """kserve.model_server parses sys.argv when imported: hide ours from it."""
    argv, sys.argv = sys.argv, sys.argv[:1]
    try:
        import kserve
        from kserve.model_server import ModelServer, app
        from kserve.protocol.rest.server import RESTServer
    finally:
        sys.argv = argv
    return kserve, ModelServer, app, RESTServer


def serve(args: argparse.Namespace, sock: socket.socket) -> int:
    try:
        _, ModelServer, app, RESTServer = _import_kserve()
    except ImportError as error:
        return fail(f"kserve: the model server needs the kserve package ({error}); "
                    "pip install 'tfjob-launcher[serve]'")
    from kserve.constants.constants import FASTAPI_APP_IMPORT_STRING

    from trainer.serve.model import ModelDirError, SavedModel, add_routes

    try:
        model = SavedModel(args.name, args.model_dir)
        model.load()
    except ModelDirError as error:
        return fail(str(error))
    server = ModelServer(http_port=sock.getsockname()[1], enable_grpc=False, workers=1,
                         enable_latency_logging=False)
    server.register_model(model)
    for quiet in ("kserve.trace", "uvicorn.access"):  # no line per request
        logging.getLogger(quiet).setLevel(logging.WARNING)
    logging.getLogger("kserve").addFilter(_OneLineClientErrors())
    warnings.filterwarnings("ignore", message="ORJSONResponse is deprecated")  # kserve 0.21 on fastapi 0.12x+
    add_routes(app, model)
    rest = RESTServer(FASTAPI_APP_IMPORT_STRING, server.dataplane, server.model_repository_extension,
                      sock.getsockname()[1], grace_period=10)
    rest.config.access_log = False
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    print(f"Serving {model.name} version {model.version} from {model.path} at "
          f"http://{shown}:{port}/v1/models/{model.name}", flush=True)
    # uvicorn answers SIGINT/SIGTERM by finishing the requests in flight, then re-raises the
    # signal: SIGTERM then ends the process through this handler with exit code 0.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        rest.run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        print(f"Stopped serving {model.name}.", flush=True)
    return 0


@command("error")  # Ctrl-C before serving (TensorFlow's import, the model's load): `Interrupted.`, 130
def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if not _NAME.fullmatch(args.name):
        return fail(f"--name: {args.name!r} cannot name a model in a URL; use letters, digits, '-', '_', '.'")
    try:
        sock = listen(args.host, args.port)
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            return fail(f"--port: {args.host}:{args.port} is in use; stop what listens there or pick another --port")
        return fail(f"--host: cannot listen on {args.host}:{args.port} ({error.strerror}); use 127.0.0.1 or 0.0.0.0")
    lazy.quiet_tensorflow("2")
    with sock:
        return serve(args, sock)


if __name__ == "__main__":
    sys.exit(main())
