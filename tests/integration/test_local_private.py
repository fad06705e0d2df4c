"""Issue 22: a local job's folder in the runs directory is private to the user: every
directory 0700, every file 0600, including what the supervisor and the replicas write
(logs, the default job dir), whatever the user's umask (real supervisor and replica
processes; the replica is a one-line Python command)."""
from __future__ import annotations

import os
import stat
from pathlib import Path

from launcher.backends.local import LocalBackend
from launcher.render import render
from launcher.spec import JobSpec, ReplicaSpec
from tests.support.polling import wait_for

WRITE = ("import os, sys; os.makedirs(sys.argv[1], exist_ok=True); "
         "open(os.path.join(sys.argv[1], 'ckpt'), 'w').write('weights'); print('hello')")


def modes(root: Path) -> dict[str, int]:
    found = {".": stat.S_IMODE(root.stat().st_mode)}
    for path in root.rglob("*"):
        found[str(path.relative_to(root))] = stat.S_IMODE(path.lstat().st_mode)
    return found


def test_every_directory_and_file_of_a_job_is_private(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir(mode=0o755)
    os.chmod(runs, 0o755)  # a runs dir made by an older launcher is tightened
    backend = LocalBackend(runs_dir=str(runs), note=lambda line: None)
    output = backend.runs.job("private", "default").output
    spec = JobSpec(name="private", replicas={"Worker": ReplicaSpec(2)},
                   command=("python", "-c", WRITE, str(output / "worker")))
    old = os.umask(0o022)
    try:
        backend.submit(render(spec))
        wait_for(lambda: backend.status("private", "default").phase in ("Succeeded", "Failed"), "the job to finish", 60)
    finally:
        os.umask(old)
        backend.stop("private", "default")
    found = modes(runs)
    assert {"default/private/manifest.yaml", "default/private/status.json", "default/private/supervisor.log",
            "default/private/logs/worker-0.log", "default/private/logs/worker-0.times",
            "default/private/output/worker/ckpt"} <= set(found), found
    loose = {name: oct(mode) for name, mode in found.items()
             if mode != (0o700 if (runs / name).is_dir() else 0o600)}
    assert not loose, loose
