"""launcher predict's HTTP client and the local model servers' start, against STAND-INs
(named as such; the real model server, which loads TensorFlow, runs in
tests/integration/test_serving_local.py): a real HTTP server on a loopback port answering
TF Serving's REST paths with canned answers, and a stand-in `python -m` server module that
fails to start as the real one does. What they hold: predict's default batch size and exit
code, the loopback addresses that never go through a configured proxy (and the others that
do), the error text of a Kubernetes Status, an answer with the wrong number of
predictions, `ready: false`, the URL a 0.0.0.0 server is reached at, and a server that
dies or never gets ready: one line (exit 2 for its own `error: FLAG: ...`), the wait
bounded by --timeout, nothing left behind."""
from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest

from launcher.backends.base import AlreadyExists, BackendError
from launcher.backends.local.procs import alive, start_time
from launcher.backends.local.runs import write_json_atomic
from launcher.serving import client, local
from launcher.spec import SpecError
from tests.support.ports import free_port

pytestmark = pytest.mark.usefixtures("cli_env")  # the packaged TFJob CRD, a per-session schema cache


class StandInModelServer:
    """STAND-IN model server on 127.0.0.1: GET /v1/models/m answers {"ready": `ready`}, the
    metadata path is absent (404, as on a server without it), :predict answers one
    prediction per instance ({"y": instance}), 400 when an instance is "bad", one
    prediction short with `short`. `paths` and `batches` record what it was asked."""

    def __init__(self, ready: bool = True, short: bool = False):
        self.ready, self.short = ready, short
        self.paths: list[str] = []
        self.batches: list[int] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def answer(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                outer.paths.append(self.path)
                if self.path.endswith("/v1/models/m"):
                    self.answer(200, {"name": "m", "ready": outer.ready})
                else:
                    self.answer(404, {"error": "not found"})

            def do_POST(self):
                outer.paths.append(self.path)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                instances = body["instances"]
                outer.batches.append(len(instances))
                if "bad" in instances:
                    self.answer(400, {"error": "bad instance"})
                    return
                predictions = [{"y": instance} for instance in instances]
                self.answer(200, {"predictions": predictions[:-1] if outer.short else predictions})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "StandInModelServer":
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


def test_batch_prediction_sends_64_instances_a_request_by_default_and_exits_1_when_a_batch_fails(cli, tmp_path):
    instances = tmp_path / "instances.json"
    instances.write_text("".join('"bad"\n' if n == 129 else f'"i{n}"\n' for n in range(130)))
    out = tmp_path / "out"
    with StandInModelServer() as server:
        result = cli("predict", "m", "--url", server.url, "--input-paths", str(instances), "--output-path", str(out))
    assert server.batches[:3] == [64, 64, 2], server.batches  # --batch-size's default, as its help says
    assert result.code == 1, result
    assert result.out == (f"Wrote 128 predictions to {out}/prediction.results-00000-of-00001; 2 instances failed, "
                          f"see {out}/prediction.errors_stats-00000-of-00001\n")


def test_format_json_prints_the_predictions_as_the_server_sent_them(cli, tmp_path):
    instances = tmp_path / "instances.json"
    instances.write_text('"a"\n"b"\n')
    with StandInModelServer() as server:
        result = cli("predict", "m", "--url", server.url, "--json-instances", str(instances), "--format", "json")
    assert result.code == 0, result
    assert json.loads(result.out) == [{"y": "a"}, {"y": "b"}]


def test_gclouds_version_and_region_are_taken_and_said_to_do_nothing(cli, tmp_path):
    instances = tmp_path / "instances.json"
    instances.write_text('"a"\n')
    with StandInModelServer() as server:
        result = cli("predict", "--model", "m", "--url", server.url, "--json-instances", str(instances),
                     "--version", "v2", "--region", "us-central1")
    assert result.code == 0, result
    assert result.err.splitlines() == [
        "note: --version v2 is ignored: a model here serves the one export `serve` loaded (serve m again with "
        "another --model-dir to change it)",
        "note: --region is a Cloud ML setting with no equivalent here; ignored"]


def test_loopback_addresses_never_go_through_a_configured_proxy_and_others_do(monkeypatch):
    with StandInModelServer() as server:
        for variable in ("no_proxy", "NO_PROXY"):
            monkeypatch.delenv(variable, raising=False)
        for variable in ("http_proxy", "HTTP_PROXY"):
            monkeypatch.setenv(variable, f"http://127.0.0.1:{free_port()}")  # nothing listens: a dead proxy
        for base in (server.url, f"http://localhost:{server.port}"):
            assert client.ready(client.HttpServer(base), "m", timeout=10), base
        monkeypatch.setenv("http_proxy", server.url)  # the stand-in as the proxy: it sees the whole URL
        monkeypatch.setenv("HTTP_PROXY", server.url)
        status, _ = client.HttpServer("http://model.example").send("GET", "/v1/models/m", None, timeout=10)
    assert status == 200 and server.paths[-1] == "http://model.example/v1/models/m"


def test_ready_only_when_the_server_says_true():
    with StandInModelServer(ready=False) as server:
        assert client.ready(client.HttpServer(server.url), "m") is False
    assert client.ready(client.HttpServer(f"http://127.0.0.1:{free_port()}"), "m", timeout=2) is False


def test_an_answer_with_another_number_of_predictions_is_an_error():
    with StandInModelServer(short=True) as server, pytest.raises(client.ServingError) as caught:
        client.predict(client.HttpServer(server.url), "m", ["a", "b"])
    assert str(caught.value).startswith(f"{server.url}/v1/models/m:predict: expected 2 predictions, got ")


def test_the_error_of_an_answer_is_tf_servings_error_or_a_kubernetes_status_message():
    assert client.error_text(b'{"error": "bad instance"}') == "bad instance"
    status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "ServiceUnavailable", "code": 503,
              "message": 'no endpoints available for service "mnist-predictor"'}
    assert client.error_text(json.dumps(status).encode()) == 'no endpoints available for service "mnist-predictor"'
    assert client.error_text(b"<html>Bad Gateway</html>\n") == "<html>Bad Gateway</html>"


def test_a_server_listening_on_every_address_is_reached_at_the_loopback_one():
    assert local._base_url("0.0.0.0", 8080) == "http://127.0.0.1:8080"
    assert local._base_url("::", 8080) == "http://[::1]:8080"
    assert local._base_url("10.0.0.5", 80) == "http://10.0.0.5:80"
    assert local._base_url("fd00::5", 80) == "http://[fd00::5]:80"


STANDIN_MODULE = "standin_model_server"


@pytest.fixture
def standin_server(tmp_path, monkeypatch) -> Iterator[Path]:
    """`serve` starts the STAND-IN module `standin_model_server` (written by the test into a
    folder on PYTHONPATH) in place of trainer.serve; the runs dir is the test's own."""
    folder = tmp_path / "modules"
    folder.mkdir()
    monkeypatch.setenv("PYTHONPATH", str(folder))
    monkeypatch.setenv("TFJOB_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setattr(local, "SERVER_MODULE", STANDIN_MODULE)
    yield folder / f"{STANDIN_MODULE}.py"


def test_a_server_that_refuses_its_flags_is_its_own_line_and_leaves_nothing(standin_server, tmp_path):
    standin_server.write_text("import sys\nprint('loading', flush=True)\n"
                              "print('error: --model-dir: no SavedModel in /x; pass the export base', flush=True)\n"
                              "sys.exit(2)\n")
    models = local.LocalModels()
    with pytest.raises(SpecError) as caught:
        models.serve("m", str(tmp_path), "127.0.0.1", 0, timeout=60)
    assert (caught.value.field, str(caught.value)) == ("--model-dir", "--model-dir: no SavedModel in /x; pass the "
                                                                      "export base")
    assert not models.folder("m").exists() and models.list() == []


def test_a_server_never_ready_is_stopped_after_the_timeout_and_forgotten(standin_server, tmp_path):
    standin_server.write_text("import os, time\nprint(f'pid {os.getpid()} loading', flush=True)\ntime.sleep(30)\n")
    models = local.LocalModels()
    log = models.folder("m") / "server.log"
    with pytest.raises(BackendError) as caught:
        models.serve("m", str(tmp_path), "127.0.0.1", 0, timeout=2)
    assert str(caught.value).startswith("the model server was not ready after 2 s (raise --timeout); its log: ")
    assert "loading" in str(caught.value)
    assert not models.folder("m").exists() and not log.exists()
    pid = int(str(caught.value).split("pid ", 1)[1].split()[0])
    assert not alive(pid), "the server that never got ready still runs"


def test_a_name_already_served_is_refused_and_its_record_kept(standin_server, tmp_path):
    models = local.LocalModels()
    folder = models.folder("m")
    folder.mkdir(parents=True)
    record = {"name": "m", "url": "http://127.0.0.1:8123", "model_dir": str(tmp_path), "pid": os.getpid(),
              "start": start_time(os.getpid()), "created": "2024-01-01T00:00:00Z"}  # a live server: this process
    write_json_atomic(folder / "server.json", record)
    with pytest.raises(AlreadyExists, match=r"^model m is already served at http://127\.0\.0\.1:8123; "):
        models.serve("m", str(tmp_path), "127.0.0.1", 0, timeout=60)
    assert json.loads((folder / "server.json").read_text()) == record
    assert not (folder / "server.log").exists()  # nothing started


READY_STANDIN = '''import http.server, json, os, sys
flag = lambda name: sys.argv[sys.argv.index(name) + 1]
class Ready(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass
    def do_GET(self):
        body = json.dumps({"name": flag("--name"), "ready": True}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
print(f"pid {os.getpid()}", flush=True)
http.server.HTTPServer((flag("--host"), int(flag("--port"))), Ready).serve_forever()
'''

SERVING_LAUNCHER = '''import sys, time
from launcher.serving import local
local.SERVER_MODULE = sys.argv[2]
local.LocalModels().serve("m", sys.argv[1], "127.0.0.1", 0, 60, foreground=sys.argv[3] == "fg")
time.sleep(120)
'''


@pytest.mark.parametrize("foreground", [True, False])
def test_a_foreground_server_dies_with_a_killed_launcher_and_a_detached_one_runs_on(standin_server, tmp_path,
                                                                                   foreground):
    """serve --foreground: the server dies with the launcher even on SIGKILL (PR_SET_PDEATHSIG),
    no orphan holding the port; without it, the server outlives the launcher, as `serve` says."""
    import subprocess
    import sys

    from launcher.backends.local.plan import REPO_ROOT
    from tests.support.polling import wait_for

    standin_server.write_text(READY_STANDIN)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO_ROOT, os.environ["PYTHONPATH"]]))
    launcher = subprocess.Popen([sys.executable, "-c", SERVING_LAUNCHER, str(tmp_path), STANDIN_MODULE,
                                 "fg" if foreground else "bg"], env=env, stdout=subprocess.DEVNULL)
    server = None
    try:
        record = local.LocalModels().folder("m") / "server.json"
        wait_for(lambda: launcher.poll() is not None or (record.exists() and "pid" in json.loads(record.read_text())),
                 "the launcher to start the stand-in server", 60)
        server = local.LocalModels().get("m")
        assert server is not None and launcher.poll() is None
        wait_for(lambda: client.ready(client.HttpServer(server.url), "m", timeout=2), "the server to be ready", 60)
        launcher.kill()
        launcher.wait(timeout=30)
        if foreground:
            wait_for(lambda: not alive(server.pid, server.start), "the server to die with its launcher", 30)
        else:
            assert alive(server.pid, server.start) and client.ready(client.HttpServer(server.url), "m", timeout=10)
    finally:
        launcher.kill()
        launcher.wait(timeout=30)
        if server is not None and alive(server.pid, server.start):
            local.LocalModels().delete("m")
