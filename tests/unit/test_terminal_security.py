"""Terminal safety: strings a cluster hands back (a TFJob condition's message, the message a
container wrote to its termination log, an event's message, the API server's error text)
can hold control sequences, and whoever can write them could otherwise move the cursor,
rewrite what the user sees, set the window title or write the clipboard (OSC 52). The
launcher shows them as text, as kubectl's printers do (ESC as ^[, CR as \\r); `logs`
writes a container's lines as they are, as `kubectl logs`, and the live view, which
redraws around them, shows them as text too. The k8s objects are read by the backend's
real parsing (`launcher.backends.k8s.objects`) from JSON as the kubelet writes it."""
from __future__ import annotations

import io
import json

from kubernetes.client.exceptions import ApiException

from launcher.backends.k8s.client import refusal
from launcher.backends.k8s.objects import job_conditions, replica_phase
from launcher.events import JobCondition, LogLine, parse_result, terminal_safe
from launcher.view import WIDE_COLUMNS, JobView, format_rows, plain_line, replica_rows

# OSC 52 (write the clipboard), OSC 0 (window title) ended by BEL, CSI 2J (clear the screen),
# a carriage return that would overwrite the line, and the 8-bit CSI (U+009B)
HOSTILE = "\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b]0;pwned\x07\x1b[2J\rok\x9b31m"
SHOWN = "^[]52;c;ZWNobyBwd25lZA==\\x07^[]0;pwned\\x07^[[2J\\rok\\x9b31m"
ONE_LINE = SHOWN.replace("\\r", " ")  # where the backend joins a message's lines (CR is whitespace)


def controls(text: str) -> set[str]:
    return {c for c in text if (ord(c) < 0x20 and c not in "\t\n") or 0x7f <= ord(c) <= 0x9f}


def test_control_characters_are_shown_as_kubectl_shows_them():
    assert terminal_safe(HOSTILE) == SHOWN
    assert terminal_safe("tab\tand\nnewline stay, é and 日本 too") == "tab\tand\nnewline stay, é and 日本 too"
    assert terminal_safe(SHOWN) == SHOWN  # shown once, the same when shown again


def pod(message: str) -> dict:
    return {"metadata": {"name": "evil-worker-0", "labels": {"training.kubeflow.org/replica-type": "worker",
                                                             "training.kubeflow.org/replica-index": "0"}},
            "spec": {"nodeName": "node-1", "containers": [{"name": "tensorflow"}]},
            "status": {"phase": "Failed", "containerStatuses": [{
                "name": "tensorflow", "restartCount": 0,
                "state": {"terminated": {"exitCode": 1, "reason": "Error", "message": message}}}]}}


def test_a_termination_message_and_a_condition_message_reach_status_as_text():
    (condition,) = job_conditions({"status": {"conditions": [
        {"type": "Failed", "status": "True", "reason": "TFJobFailed", "message": HOSTILE}]}})
    phase = replica_phase(pod(HOSTILE))
    lines = [plain_line(condition, "evil"), plain_line(phase, "evil"),
             *format_rows(replica_rows([phase], wide=True), WIDE_COLUMNS)]
    for line in lines:
        assert not controls(line), repr(line)
    assert lines[0] == f"evil: Failed (TFJobFailed: {SHOWN})"
    assert f"Error: {ONE_LINE}" in lines[1] and lines[-1].endswith(f"Error: {ONE_LINE}")


def test_an_export_path_read_from_the_chiefs_log_is_text():
    result = parse_result("Exported model to gs://bucket/job/export/1\x1b]0;pwned\x07")
    assert result.export_path == "gs://bucket/job/export/1^[]0;pwned\\x07"


def test_the_live_view_shows_log_lines_and_messages_as_text():
    out = io.StringIO()
    with JobView("evil", "default", out=out, live=True) as view:
        view.handle(JobCondition("Running", message=HOSTILE))
        view.handle(replica_phase(pod(HOSTILE)))
        view.handle(LogLine("worker-0", f"step 1 {HOSTILE}"))
        view.finish()
    text = out.getvalue()
    assert "[worker-0] step 1 ^[]52;c;ZWNobyBwd25lZA==\\x07" in text
    for sequence in ("\x1b]52;", "\x1b]0;", "\x07", "\x9b", "\rok"):
        assert sequence not in text, sequence  # rich's own colours and cursor moves are its own


def test_the_api_servers_error_text_is_shown_as_text():
    """A refusal whose message someone else wrote (an admission webhook's, a policy's)."""
    body = json.dumps({"kind": "Status", "status": "Failure", "reason": "Forbidden", "code": 403,
                       "message": f"admission webhook \"evil.example.com\" denied the request: {HOSTILE}"})
    exc = ApiException(status=403, reason="Forbidden")
    exc.body = body
    line = str(refusal("the server refused tfjob evil", exc, "https://127.0.0.1:6443"))
    assert not controls(line), repr(line)
    assert f"denied the request: {ONE_LINE}" in line


def test_every_error_line_and_table_cell_is_text(cli, capsys):
    """The CLI's catch-alls: any refusal or failure (a model server's or KServe's words in a
    BackendError, a path in a SpecError) and any table cell (an InferenceService's URL in
    `models list`) show control characters as text, wherever the message was made."""
    from launcher.backends.base import BackendError
    from tests.support.fakes.backend import FakeBackend

    class Failing(FakeBackend):
        def status(self, name, namespace):
            raise BackendError(f"inferenceservice m: its predictor does not start: {HOSTILE}")

    result = cli("status", "mnist", backend=Failing(name="k8s", existing=("mnist",)))
    assert (result.code, result.err) == (1, f"error: inferenceservice m: its predictor does not start: {SHOWN}\n")
    refused = cli("logs", "mnist", "--replica", f"worker-{HOSTILE}", backend=FakeBackend(name="local"))
    assert refused.code == 2 and not controls(refused.err), refused.err
    assert not controls("\n".join(format_rows([("m", f"http://m.example{HOSTILE}")], ("NAME", "URL"))))


def test_predicts_table_shows_a_model_servers_strings_as_text():
    """`predict`'s table holds what the model server answered (a string output, its names):
    a server anyone in the namespace deployed, or any --url."""
    from launcher.serving.predictions import table

    lines = table([{f"label{HOSTILE}": f"cat{HOSTILE}", "key": 1}]) + table([f"dog{HOSTILE}"])
    assert not controls("\n".join(lines)) and lines[1].endswith(f"cat{SHOWN}") and lines[2] == f"dog{SHOWN}", lines
