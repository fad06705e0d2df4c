"""LocalBackend.submit when its supervisor cannot start: one error carrying the
supervisor's own last lines, and nothing left of the job (its folder, a process)."""
from __future__ import annotations

import re

import pytest

from launcher.backends.base import BackendError
from launcher.backends.local import LocalBackend
from launcher.render import render
from launcher.spec import JobSpec, ReplicaSpec


def test_a_supervisor_that_cannot_start_is_one_error_with_its_output_and_leaves_no_job(tmp_path, monkeypatch):
    """A Python that cannot start (here: PYTHONHOME pointing nowhere, as a broken venv)."""
    monkeypatch.setenv("PYTHONHOME", str(tmp_path / "no-python-here"))
    backend = LocalBackend(runs_dir=str(tmp_path / "runs"))
    with pytest.raises(BackendError) as refused:
        backend.submit(render(JobSpec(name="nostart", replicas={"Worker": ReplicaSpec(1)})))
    message = str(refused.value)
    assert message.startswith("the local supervisor did not start: ") and "\n" not in message
    # the interpreter's own words, not the last lines of its thread dump (`Current thread ... <no Python frame>`)
    assert re.fullmatch(r"the local supervisor did not start: Fatal Python error: .+ \| "
                        r"ModuleNotFoundError: No module named 'encodings'", message), message
    assert not backend.runs.job("nostart", "default").path.exists()
    assert backend.list(None) == []


@pytest.mark.parametrize("output, said", [
    ("Traceback (most recent call last):\n  File \"x.py\", line 3, in <module>\n    open(p)\n"
     "FileNotFoundError: [Errno 2] No such file or directory: 'p'\n",
     "FileNotFoundError: [Errno 2] No such file or directory: 'p'"),
    ("one\ntwo\n\nthree\nfour\n", "two | three | four"),
    ("", "no output"),
])
def test_why_the_supervisor_failed_is_its_exception_else_its_last_lines(output, said):
    from launcher.backends.local import _why_python_failed

    assert _why_python_failed(output) == said
