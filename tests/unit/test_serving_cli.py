"""launcher serve / models / predict: bad input (exit 2, nothing started or written),
the prediction table, signature choice, --from-job's export. No model server runs here."""
from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from launcher.backends.base import BackendError
from launcher.backends.local.procs import start_time
from launcher.backends.local.runs import RunsDir, set_condition, write_json_atomic
from launcher.serving.cli import job_export
from launcher.serving.client import HttpServer, NoAnswer, ServingError
from launcher.serving.local import check_port
from launcher.serving.predictions import (choose_signature, first_refused, predict_placed, read_placed,
                                         read_request, signature_for, table)
from launcher.spec import SpecError
from tests.support.ports import free_port
from tests.support.silent_server import SilentServer

pytestmark = pytest.mark.usefixtures("cli_env")  # the packaged TFJob CRD, a per-session schema cache


@pytest.fixture
def runs(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "runs"
    monkeypatch.setenv("TFJOB_RUNS_DIR", str(path))
    return path


@pytest.fixture
def export(tmp_path) -> Path:
    path = tmp_path / "export"
    path.mkdir()
    return path


@pytest.fixture
def request_file(tmp_path) -> Path:
    path = tmp_path / "request.json"
    path.write_text('{"image": [0.0], "key": 0}\n')
    return path



@pytest.mark.parametrize("argv, field", [
    (["serve", "Mnist", "--model-dir", "{export}"], "NAME"),
    (["serve", "m" * 64, "--model-dir", "{export}"], "NAME"),  # a DNS label: 63 at most
    (["serve", "1mnist", "--model-dir", "{export}"], "NAME"),  # DNS-1035: a letter first
    (["serve", "mnist", "--model-dir", "{export}", "--service-account", "sa"], "--service-account"),  # k8s only
    (["serve", "mnist", "--model-dir", "{export}", "--port", "-1"], "--port"),
    (["serve", "mnist", "--model-dir", "{export}", "--port", "70000"], "--port"),
    (["serve", "mnist", "--model-dir", "{export}", "--timeout", "0"], "--timeout"),
    (["serve", "mnist", "--model-dir", "{export}", "--timeout", "nan"], "--timeout"),  # was a wait without end
    (["serve", "mnist"], "--model-dir"),
    (["serve", "mnist", "--model-dir", "{export}/missing"], "--model-dir"),
    (["serve", "mnist", "--from-job", "nosuchjob"], "--from-job"),
    (["serve", "mnist", "--from-job", "census_wide_1"], "--from-job"),  # a Cloud ML job id: its TFJob's name said
    (["serve", "mnist", "--from-job", "a b"], "--from-job"),
    (["predict", "mnist", "--json-instances", "{export}/missing.json"], "--json-instances"),
    (["predict", "mnist", "--json-instances", "{request}", "--output-path", "{export}/out"], "--output-path"),
    (["predict", "mnist", "--input-paths", "{request}"], "--output-path"),
    (["predict", "mnist", "--input-paths", "{request}", "--output-path", "{request}"], "--output-path"),  # a file
    (["predict", "mnist", "--input-paths", "{export}/*.none", "--output-path", "{export}/out"], "--input-paths"),
    (["predict", "mnist", "--json-instances", "{request}", "--batch-size", "0"], "--batch-size"),
    (["predict", "mnist", "--json-instances", "{request}", "--batch-size", "8"], "--batch-size"),  # online: unused
    (["predict", "mnist", "--input-paths", "{request}", "--output-path", "/tmp/o", "--batch-size", "0"],
     "--batch-size"),
    (["predict", "mnist", "--json-instances", "{request}", "--url", "ftp://x"], "--url"),
    # the URL `serve` prints, pasted whole: was an HTTP 404 on .../v1/models/mnist:predict/v1/models/mnist:predict
    (["predict", "mnist", "--json-instances", "{request}", "--url", "http://127.0.0.1:8080/v1/models/mnist:predict"],
     "--url"),
    (["predict", "mnist", "--input-paths", "{request}", "--output-path", "{export}/out", "--format", "json"],
     "--format"),  # batch writes JSON lines
    (["predict", "mnist", "--json-instances", "{request}", "--format", "yaml"], "--format"),
    (["predict", "--json-instances", "{request}"], "NAME"),
    (["predict", "mnist", "--model", "other", "--json-instances", "{request}"], "--model"),
    (["predict", "--model", "Mnist", "--json-instances", "{request}"], "NAME"),
    (["predict", "mnist", "--json-request", "{request}"], "--json-request"),  # JSON lines, not one body
    (["predict", "mnist", "--json-request", "{export}/missing.json"], "--json-request"),
    (["predict", "--model", "mnist", "--version", "v1", "--region", "r", "--json-request", "{export}/missing.json"],
     "--json-request"),  # the notes on gcloud's flags come only once the input passed
])
def test_bad_input_is_one_line_exit_2_and_nothing_started(cli, runs, export, request_file, argv, field):
    argv = [a.format(export=export, request=request_file) for a in argv]
    cli(*argv, "--backend", "local").refused(field)
    assert not (runs / "_models").exists() or not any((runs / "_models").iterdir())
    assert not (export / "out").exists()


@pytest.mark.parametrize("flag, value", [("--port", "9000"), ("--host", "0.0.0.0"), ("--foreground", None)])
def test_the_local_servers_flags_are_refused_for_an_inference_service(cli, flag, value):
    """On a cluster KServe decides where the server listens: a --port that did nothing was taken silently."""
    result = cli("serve", "mnist", "--model-dir", "gs://b/export", "--backend", "k8s", "--dry-run",
                 flag, *([value] if value else []))
    line = result.refused(flag)
    assert "only with --backend local" in line


def local_job(runs: Path, name: str, job_dir: Path, condition: str, reason: str) -> None:
    """A local job's folder as the local backend writes it, --job-dir JOB_DIR in its chief's
    args, its last condition `condition` (a live supervisor: this process)."""
    tfjob = {"metadata": {"name": name, "namespace": "default"}, "spec": {"tfReplicaSpecs": {"Chief": {
        "template": {"spec": {"containers": [{"name": "tensorflow", "args": ["--job-dir", str(job_dir)]}]}}}}}}
    run = RunsDir(runs).job(name, "default")
    run.create(tfjob, {"replicas": []})
    conditions = set_condition(set_condition([], "Created", "TFJobCreated", ""), condition, reason, "")
    run.write_status({"name": name, "namespace": "default", "conditions": conditions, "replicas": [],
                      "history": [], "exit_code": None, "supervisor": {"pid": os.getpid(),
                                                                       "start": start_time(os.getpid())}})


def test_from_job_before_the_job_exported_anything(cli, runs, tmp_path):
    local_job(runs, "mnist-1", tmp_path / "job", "Running", "TFJobRunning")
    result = cli("serve", "mnist", "--from-job", "mnist-1", "--backend", "local")
    line = result.refused("--from-job")
    assert "has no export yet" in line and "it is Running: wait until `python -m launcher status mnist-1` " \
        "says Succeeded" in line


def test_from_job_of_a_failed_job_says_it_failed_instead_of_wait(cli, runs, tmp_path):
    local_job(runs, "mnist-1", tmp_path / "job", "Failed", "Stopped")  # as Ctrl-C or `delete` leaves it
    result = cli("serve", "mnist", "--from-job", "mnist-1", "--backend", "local")
    line = result.refused("--from-job")
    assert f"job 'mnist-1' failed (Stopped) and wrote no export ({tmp_path / 'job' / 'export'})" in line
    assert "`python -m launcher status mnist-1` and `python -m launcher logs mnist-1`" in line
    assert "submit it again" in line and "wait" not in line


def test_a_url_naming_the_models_path_says_the_rest_base_to_pass(cli, runs, request_file):
    line = cli("predict", "mnist", "--json-instances", str(request_file), "--url",
               "http://127.0.0.1:8080/v2/models/mnist/infer").refused("--url")
    assert line == ("error: --url: 'http://127.0.0.1:8080/v2/models/mnist/infer' names a model's path; pass the REST "
                    "base before it, http://127.0.0.1:8080")


def test_a_bad_json_instances_line_is_named(cli, runs, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"image": [0.0]}\n{"image": [0.0\n')
    result = cli("predict", "mnist", "--json-instances", str(path), "--backend", "local")
    result.refused("--json-instances")
    assert "line 2 is not JSON" in result.err
    path.write_text('{"instances": [{"image": [0.0]}], "signature_name": "unkeyed"}\n')  # a --json-request file
    body = cli("predict", "mnist", "--json-instances", str(path), "--backend", "local")
    body.refused("--json-instances")
    assert body.err.endswith(f'{path} line 1 is a whole request body ({{"instances": [...]}}), not an instance; '
                             "pass the file with --json-request, or write one JSON instance per line\n"), body.err


def test_request_files_that_say_nothing_or_contradict_the_flags_are_refused(cli, runs, tmp_path):
    empty = tmp_path / "empty.json"
    empty.write_text("\n  \n")
    line = cli("predict", "mnist", "--json-instances", str(empty), "--backend", "local").refused("--json-instances")
    assert line.endswith(f"{empty} holds no instances; write one JSON instance per line")
    body = tmp_path / "body.json"
    body.write_text('{"instances": [[0.5]], "signature_name": "unkeyed"}')
    line = cli("predict", "mnist", "--json-request", str(body), "--signature-name", "serving_default",
               "--backend", "local").refused("--signature-name")
    assert "'serving_default' differs from the request's signature_name 'unkeyed'" in line
    body.write_text('{"instances": [[0.5]], "signature_name": 5}')
    line = cli("predict", "mnist", "--json-request", str(body), "--backend", "local").refused("--json-request")
    assert line.endswith('"signature_name" is 5, not a name; give it as a string')


def test_batch_results_already_in_the_output_folder_are_not_overwritten(cli, runs, request_file, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "prediction.results-00000-of-00001").write_text("{}\n")
    line = cli("predict", "mnist", "--input-paths", str(request_file), "--output-path", str(out),
               "--backend", "local").refused("--output-path")
    assert line.endswith(f"{out} already holds prediction results; pick a new folder")
    assert (out / "prediction.results-00000-of-00001").read_text() == "{}\n"


def test_a_relative_model_dir_is_given_to_the_server_as_an_absolute_path(export, monkeypatch):
    """The server runs in the repository's folder, not the caller's: a relative --model-dir
    would name another folder there (or none)."""
    import argparse

    from launcher.serving.cli import _local_model_dir

    monkeypatch.chdir(export.parent)
    assert _local_model_dir(argparse.Namespace(from_job=None, model_dir="export")) == str(export)
    # a bucket is no folder here: the server reads it through TensorFlow's GCS filesystem
    assert _local_model_dir(argparse.Namespace(from_job=None, model_dir="gs://b/export")) == "gs://b/export"


def test_from_job_of_a_job_that_succeeded_without_an_export_or_exported_to_a_bucket(cli, runs, tmp_path):
    import argparse

    from launcher.serving.cli import _local_model_dir

    local_job(runs, "mnist-1", tmp_path / "job", "Succeeded", "TFJobSucceeded")
    line = cli("serve", "mnist", "--from-job", "mnist-1", "--backend", "local").refused("--from-job")
    assert line.endswith(f"job 'mnist-1' succeeded but wrote no export ({tmp_path / 'job' / 'export'}); see "
                         "`python -m launcher status mnist-1` and `python -m launcher logs mnist-1` (its trainer "
                         "exports to --job-dir/export), or pass --model-dir")
    local_job(runs, "mnist-2", "gs://bucket/runs/2", "Succeeded", "TFJobSucceeded")  # not looked for on this disk
    args = argparse.Namespace(from_job="mnist-2", model_dir=None, namespace=None, backend="local")
    assert _local_model_dir(args) == "gs://bucket/runs/2/export"


def test_a_taken_port_is_refused_before_anything_starts(cli, runs, export):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = cli("serve", "mnist", "--model-dir", str(export), "--port", str(port), "--backend", "local")
    result.refused("--port")
    assert f"127.0.0.1:{port} is in use" in result.err
    assert not (runs / "_models" / "mnist").exists()


def test_a_port_out_of_range_names_the_range_and_port_0(cli, runs, export):
    line = cli("serve", "mnist", "--model-dir", str(export), "--port", "65536", "--backend", "local").refused("--port")
    assert line == "error: --port: 65536 is not a TCP port; use 1-65535, or 0 for any free port"


def test_port_0_is_a_port_the_system_picks_and_that_is_free():
    port = check_port("127.0.0.1", 0)
    assert 1 <= port <= 65535
    with socket.socket() as sock:  # free: it can be listened on
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(1)


def test_predict_and_delete_of_a_model_not_served_exit_1(cli, runs, request_file):
    result = cli("predict", "mnist", "--json-instances", str(request_file), "--backend", "local")
    assert result.code == 1 and "model mnist is not served here" in result.err
    result = cli("models", "delete", "mnist", "--backend", "local")
    assert result.code == 1 and "no local model mnist" in result.err


def test_predict_of_a_model_whose_server_exited_says_it_stopped_and_how_to_restart(cli, runs, export,
                                                                                   request_file):
    exited = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    start = start_time(exited.pid)
    exited.communicate(timeout=60)
    folder = runs / "_models" / "mnist"
    folder.mkdir(parents=True)
    write_json_atomic(folder / "server.json", {  # what `serve` recorded for it
        "name": "mnist", "url": "http://127.0.0.1:8123", "model_dir": str(export), "pid": exited.pid,
        "start": start, "created": "2024-01-01T00:00:00Z", "host": "127.0.0.1", "port": 8123})
    assert "Stopped" in cli("models", "list", "--backend", "local").out
    result = cli("predict", "mnist", "--json-instances", str(request_file), "--backend", "local")
    assert result.code == 1 and result.out == "", result
    assert result.err.strip() == (
        f"error: model mnist is stopped: its server (pid {exited.pid}) exited; its log is {folder / 'server.log'}; "
        f"start it again with `python -m launcher serve mnist --model-dir {export} --port 8123`, or forget it "
        "with `python -m launcher models delete mnist`")


@pytest.mark.parametrize("suffix", ["", "/"])
def test_input_paths_naming_a_local_folder_hints_at_its_files(cli, runs, export, suffix):
    (export / "requests.json").write_text('{"image": [0.0], "key": 0}\n')
    result = cli("predict", "mnist", "--input-paths", f"{export}{suffix}", "--output-path", str(export / "out"),
                 "--backend", "local")
    line = result.refused("--input-paths")
    assert line.endswith(f"matches no file; it is a folder, use {export}/*")
    assert not (export / "out").exists()


def test_models_list_without_models_says_so_as_kubectl_does(cli, runs):
    result = cli("models", "list", "--backend", "local")
    assert (result.code, result.out, result.err) == (0, "", "No resources found\n")


@pytest.mark.parametrize("argv", [["models", "list"], ["models", "delete", "mnist"], ["serve", "mnist", "--model-dir",
                                   "{export}"], ["predict", "mnist", "--json-instances", "{request}"]])
def test_a_bad_namespace_is_refused_and_a_good_one_said_unused_by_local_models(cli, runs, export, request_file, argv):
    argv = [a.format(export=export, request=request_file) for a in argv]
    for backend in ("local", "k8s"):
        cli(*argv, "--backend", backend, "-n", "Bad NS").refused("--namespace")
    assert not (runs / "_models").exists()
    if argv[0] == "serve":  # a model dir that is not there: the note, then the refusal (no server started)
        argv[-1] += "/missing"
    unused = cli(*argv, "--backend", "local", "-n", "team").err.splitlines()
    assert unused[0] == ("note: --namespace is not used by the local model server (its models have no namespace; "
                         "with `serve --from-job` --namespace names the job's)")
    assert "note: --namespace" not in cli("serve", "mnist", "--from-job", "nosuchjob", "--backend", "local", "-n",
                                          "team").err


def test_table_has_one_line_per_instance_key_first_and_full_precision():
    probabilities = [0.1234567890123, 1e-09, 0.8765432099877]
    lines = table([{"probabilities": probabilities, "classes": 2, "key": 10},
                   {"probabilities": [1.0, 0.0, 0.0], "classes": 0, "key": 11}])
    assert lines[0].split() == ["KEY", "CLASSES", "PROBABILITIES"]
    key, cls, rest = lines[1].split(None, 2)
    assert (key, cls) == ("10", "2") and json.loads(rest) == probabilities
    assert "0.1234567890123" in lines[1] and len(lines) == 3
    assert table([1.5, 2.5]) == ["1.5", "2.5"]


def test_signature_is_the_one_whose_inputs_are_the_instance_fields():
    signatures = {"serving_default": ["image", "key"], "unkeyed": ["image"]}  # the MNIST export's
    notes: list[str] = []
    assert choose_signature([{"image": [0]}], signatures, notes.append) == "unkeyed"
    assert "'unkeyed': its inputs are the instances' fields (image)" in notes[0]
    assert choose_signature([{"image": [0], "key": 1}], signatures, notes.append) is None  # serving_default fits
    assert choose_signature([[0.0]], signatures, notes.append) == "unkeyed"  # bare images
    assert "'unkeyed': it takes one input (image), and the instances are bare values" in notes[1]
    assert choose_signature([[0.0]], {"serving_default": ["text"]}, notes.append) is None
    assert choose_signature([{"other": 1}], signatures, notes.append) is None  # let the server say why
    assert choose_signature([{"image": [0], "key": 1}, {"image": [0]}], signatures, notes.append) is None
    assert choose_signature([{"image": [0]}, {"image": [0], "key": 1}], signatures, notes.append) is None  # mixed
    twins = dict(signatures, also=["image"])  # two signatures take the fields: none is guessed
    assert choose_signature([{"image": [0]}], twins, notes.append) is None
    assert choose_signature([[0.0]], twins, notes.append) is None
    assert len(notes) == 2


def test_from_job_finds_the_job_dir_export_in_the_manifest():
    tfjob = {"spec": {"tfReplicaSpecs": {"Chief": {"template": {"spec": {"containers": [
        {"name": "tensorflow", "args": ["--job-dir", "gs://bucket/runs/one/", "--train-steps", "5"]}]}}}}}}
    assert job_export(tfjob) == "gs://bucket/runs/one/export"
    tfjob["spec"]["tfReplicaSpecs"]["Chief"]["template"]["spec"]["containers"][0]["args"] = ["--job-dir=/tmp/j"]
    assert job_export(tfjob) == "/tmp/j/export"
    for spelling in ("--model_dir", "--output_path", "--job_dir"):  # the Cloud ML samples', after --
        tfjob["spec"]["tfReplicaSpecs"]["Chief"]["template"]["spec"]["containers"][0]["args"] = [spelling, "/tmp/m/"]
        assert job_export(tfjob) == "/tmp/m/export"
    assert job_export({"spec": {"tfReplicaSpecs": {}}}) is None


def test_local_serve_off_linux_says_so_in_one_line(cli, runs, export, monkeypatch):
    import sys

    monkeypatch.setattr(sys, "platform", "darwin")  # a stand-in for a Mac
    result = cli("serve", "mnist", "--model-dir", str(export), "--backend", "local")
    result.refused("--backend local")
    assert result.err.startswith("error: --backend local: the local model server runs as a Linux process") \
        and "; serve on a cluster (kind, minikube, GKE) with --backend k8s" in result.err
    assert not (runs / "_models").exists()


def test_local_serve_without_kserve_says_which_extra_to_install(cli, runs, export, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "kserve" else real(name, *a))
    result = cli("serve", "mnist", "--model-dir", str(export), "--backend", "local")
    result.refused("--backend local")
    assert "needs kserve" in result.err and "tfjob-launcher[serve]" in result.err
    assert not (runs / "_models").exists()


class RefusingServer:
    """FAKE model server (named as such; the real one refuses bad instances in
    tests/integration/test_serving_taxi.py): answers :predict with HTTP 400 when any
    instance is "bad" (or, with `clash`, when "x" and "y" come together; with `everything`,
    always, as for an unknown signature), 500 when `broken`; its metadata has `signatures`
    (None: no metadata path, 404); `silent`: no answer in time, to anything."""

    def __init__(self, clash: bool = False, broken: bool = False, everything: bool = False,
                 signatures: dict[str, list[str]] | None = None, silent: bool = False):
        self.clash, self.broken, self.everything, self.requests = clash, broken, everything, 0
        self.signatures, self.silent = signatures, silent

    def url(self, path: str) -> str:
        return f"http://model{path}"

    def send(self, method, path, body, timeout):
        if self.silent:
            self.requests += 1
            raise NoAnswer(f"{self.url(path)}: the model server did not answer within {timeout:g} s")
        if method == "GET":
            if self.signatures is None or not path.endswith("/metadata"):
                return 404, b'{"error": "not found"}'
            defs = {key: {"inputs": {field: {} for field in fields}} for key, fields in self.signatures.items()}
            return 200, json.dumps({"metadata": {"signature_def": {"signature_def": defs}}}).encode()
        self.requests += 1
        instances = body["instances"]
        if self.broken and self.requests > 1:
            return 500, b'{"error": "out of memory"}'
        if "bad" in instances or self.everything or (self.clash and {"x", "y"} <= set(instances)):
            return 400, json.dumps({"error": "Input to reshape is a tensor with 2 values"}).encode()
        return 200, json.dumps({"predictions": [0] * len(instances)}).encode()


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, 1000])
def test_the_first_instance_refused_on_its_own_is_found_in_about_2_log2_n_requests(size):
    for bad in sorted({0, size // 2, size - 1}):
        instances = ["ok"] * size
        instances[bad] = "bad"
        if bad + 1 < size:
            instances[-1] = "bad"  # a later bad one too: the first is named
        server = RefusingServer()
        assert first_refused(server, "m", instances, None) == bad
        assert server.requests <= 2 * max(1, (size - 1).bit_length())


def test_no_instance_is_named_when_none_is_refused_alone_or_the_server_fails_otherwise():
    assert first_refused(RefusingServer(clash=True), "m", ["ok", "x", "ok", "y"], None) is None
    assert first_refused(RefusingServer(broken=True), "m", ["ok", "bad"], None) is None


def test_online_predict_names_the_line_of_the_refused_instance(tmp_path):
    lines = tmp_path / "instances.json"
    lines.write_text('"ok"\n\n"ok"\n"bad"\n')
    with pytest.raises(ServingError) as caught:
        predict_placed(RefusingServer(), "m", read_placed(str(lines)), None)
    assert str(caught.value) == ("http://model/v1/models/m:predict: HTTP 400: Input to reshape is a tensor with 2 "
                                 f"values (the first instance refused on its own: {lines} line 4)")
    assert caught.value.status == 400


def test_instances_are_read_as_gcloud_reads_them_byte_order_mark_and_stdin(tmp_path, monkeypatch):
    """gcloud reads its instance files as utf-8-sig (a Windows editor's byte order mark is
    no part of line 1) and `-` as stdin."""
    lines = tmp_path / "instances.json"
    lines.write_bytes(b'\xef\xbb\xbf{"image": [0.5], "key": 7}\r\n{"image": [1.0], "key": 8}\n')
    assert read_placed(str(lines)) == [(f"{lines} line 1", {"image": [0.5], "key": 7}),
                                       (f"{lines} line 2", {"image": [1.0], "key": 8})]
    body = tmp_path / "body.json"
    body.write_bytes(b'\xef\xbb\xbf{"instances": [[0.5]], "signature_name": "unkeyed"}')
    assert read_request(str(body)) == ([(f"{body} instance 1", [0.5])], "unkeyed")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b'\xef\xbb\xbf[0.5]\n\n"bad"\n')))
    assert read_placed("-") == [("stdin line 1", [0.5]), ("stdin line 3", "bad")]
    # a line separator inside a JSON string (U+2028) ends no line, as in a local file
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO('{"text": "a\u2028b"}\n'.encode())))
    assert read_placed("-") == [("stdin line 1", {"text": "a\u2028b"})]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"a cat\r\n {x\n")))
    assert read_placed("-", "--text-instances", text=True) == [("stdin line 1", "a cat"), ("stdin line 2", " {x")]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b'[0.5]\n{"image"\n')))
    with pytest.raises(SpecError, match=r"--json-instances: stdin line 2 is not JSON"):
        read_placed("-")


def test_a_request_refused_for_every_instance_says_the_last_is_refused_on_its_own_too(tmp_path):
    """A server that refuses every instance (e.g. a signature its metadata does not show):
    naming line 1 alone would say little."""
    lines = tmp_path / "instances.json"
    lines.write_text('"ok"\n"ok"\n"ok"\n')
    with pytest.raises(ServingError) as caught:
        predict_placed(RefusingServer(everything=True), "m", read_placed(str(lines)), "nosuch")
    assert str(caught.value).endswith(
        f"(the first instance refused on its own: {lines} line 1; the last, {lines} line 3, is refused on its own "
        "too: the request may be wrong for every instance)")
    lines.write_text('"bad"\n"ok"\n"ok"\n')  # only the first: as before
    server = RefusingServer()
    with pytest.raises(ServingError) as caught:
        predict_placed(server, "m", read_placed(str(lines)), None)
    assert str(caught.value).endswith(f"(the first instance refused on its own: {lines} line 1)")
    assert server.requests == 3  # the request, its first half (line 1 alone), the last alone


def test_a_signature_name_the_model_does_not_have_is_refused_before_any_prediction():
    signatures = {"serving_default": ["image", "key"], "unkeyed": ["image"]}
    server = RefusingServer(signatures=signatures)
    with pytest.raises(SpecError, match=r"--signature-name: model m has no signature 'nosuch'; use one of "
                                        r"serving_default, unkeyed$"):
        signature_for(server, "m", ["ok"], "nosuch", print)
    assert server.requests == 0
    assert signature_for(server, "m", ["ok"], "unkeyed", print) == "unkeyed"
    # a server without the metadata path gets the name as given, and says itself what it lacks
    assert signature_for(RefusingServer(), "m", ["ok"], "nosuch", print) == "nosuch"


def test_a_server_that_does_not_answer_is_said_so_once_not_unreachable():
    """A hung or busy server was reached: 'did not answer within', and after the metadata
    went unanswered no prediction waits for it again (before: 'cannot reach', twice the wait)."""
    with SilentServer() as silent, pytest.raises(NoAnswer, match=r"^http://127\.0\.0\.1:\d+/v1/models/m/metadata: "
                                                 r"the model server did not answer within 0\.5 s$"):
        HttpServer(silent.url).send("GET", "/v1/models/m/metadata", None, timeout=0.5)
    server = RefusingServer(silent=True)
    with pytest.raises(NoAnswer):
        signature_for(server, "m", ["ok"], None, print)
    assert server.requests == 1
    # a server not reached at all (nothing listens): the name as given, each batch says why it failed
    assert signature_for(HttpServer(f"http://127.0.0.1:{free_port()}"), "m", ["ok"], "unkeyed", print) == "unkeyed"


def test_predicts_request_timeout_bounds_the_model_servers_answers(cli, runs, tmp_path):
    """--url (and a local model): --request-timeout bounds each answer of the model server; it
    was taken and left unused (60 s, fixed), and --backend local refused it as an API server's."""
    instances = tmp_path / "instances.json"
    instances.write_text('{"x": 1}\n')
    with SilentServer() as silent:
        result = cli("predict", "m", "--url", silent.url, "--json-instances", str(instances),
                     "--request-timeout", "1s")
    assert (result.code, result.out) == (1, ""), result
    assert result.err == f"error: {silent.url}/v1/models/m/metadata: the model server did not answer within 1 s\n"
    local = cli("predict", "m", "--backend", "local", "--json-instances", str(instances), "--request-timeout", "1s")
    assert local.code == 1 and local.err.startswith("error: model m is not served here"), local


def test_models_flags_that_would_do_nothing_are_refused_or_said(cli, runs):
    cli("models", "delete", "mnist", "--backend", "k8s", "--timeout", "60").refused("--timeout")  # without --wait
    cli("models", "delete", "mnist", "--backend", "local", "--wait", "--timeout", "-3").refused("--timeout")
    cli("models", "delete", "mnist", "--backend", "k8s", "--wait", "--timeout", "0").refused("--timeout")
    cli("models", "delete", "mnist", "--backend", "k8s", "--wait", "--timeout", "inf").refused("--timeout")
    listed = cli("models", "list", "--backend", "local", "-A")
    assert listed.code == 0 and listed.err.splitlines()[0] == (
        "note: -A/--all-namespaces is not used by the local model server (its models have no namespace; "
        "with `serve --from-job` --namespace names the job's)")
    cli("models", "list", "--backend", "k8s", "-A", "-n", "team").refused("--namespace")


def test_batch_prediction_says_how_far_it_is_every_progress_interval(tmp_path):
    """A batch prediction of minutes is not silent: a note every PROGRESS_SECONDS (a clock the
    test advances 2 s at each look) with the instances done, the failed ones, and none
    once all are done (the Wrote line says it)."""
    from launcher.serving.predictions import PROGRESS_SECONDS, batch_predict

    lines = tmp_path / "instances.json"
    lines.write_text("".join('"bad"\n' if n == 5 else '"ok"\n' for n in range(20)))
    server = RefusingServer()
    now = [0.0]

    def clock() -> float:
        now[0] += PROGRESS_SECONDS * 0.2  # each request (and each look) moves it on
        return now[0]
    notes: list[str] = []
    written, failed = batch_predict(server, "m", [str(lines)], str(tmp_path / "out"), 2, None, notes.append, clock)
    assert (written, failed) == (18, 2)
    # the 5th of 10 batches ends 10 s after the start (2 s a look); the last, at 20 of 20, is not said
    assert notes == ["Predicted 10 of 20 instances (2 failed)"], notes
    assert (tmp_path / "out" / "prediction.results-00000-of-00001").read_text().count("\n") == 18


def test_batch_results_are_written_last_so_a_failed_run_leaves_no_results_file(tmp_path, monkeypatch):
    """The errors file first: when it cannot be written, no results file says the run was
    done (a rerun into the folder would be refused as holding results)."""
    import errno

    import trainer.outputs
    from launcher.serving.predictions import ERRORS, RESULTS, batch_predict

    real = trainer.outputs.write_text

    def full_on_errors(path, text):
        if str(path).endswith(ERRORS):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(path, text)

    monkeypatch.setattr(trainer.outputs, "write_text", full_on_errors)
    lines = tmp_path / "instances.json"
    lines.write_text('"ok"\n"ok"\n')
    with pytest.raises(BackendError, match=f"cannot write {tmp_path}/out/{ERRORS}"):
        batch_predict(RefusingServer(), "m", [str(lines)], str(tmp_path / "out"), 1, None, print)
    assert not (tmp_path / "out" / RESULTS).exists()
