"""Why a job in bench/launcher_scale.py stopped making progress: the TFJob's last
condition and training-operator's last error line (at 2,019 of 5,101 pods it was etcd's
"mvcc: database space exceeded", which only the operator's log says)."""
from __future__ import annotations

import json
import re
import subprocess

import _common  # noqa: F401  (puts the repository on sys.path)

from tests.support.controlplane import ControlPlane

_ERROR = re.compile(r'"level":"error"|\bERROR\b|\berror\b', re.I)


def last_condition(cp: ControlPlane, namespace: str, name: str) -> str:
    try:
        out = cp.kubectl("get", "tfjob", name, "-n", namespace, "-o", "json", check=False, timeout=60)
    except subprocess.TimeoutExpired:
        return "unknown (kubectl get tfjob got no answer within 60 s: the API server is swamped)"
    if out.returncode != 0:
        return f"(kubectl get tfjob failed: {' '.join(out.stderr.split())[:300]})"
    conditions = (json.loads(out.stdout).get("status") or {}).get("conditions") or []
    if not conditions:
        return "no condition yet"
    last = conditions[-1]
    return f"{last.get('type')}={last.get('status')} ({last.get('reason')}: {last.get('message')})"


def operator_error(cp: ControlPlane, name: str) -> str:
    """The operator's last error line about `name` (else its last error line at all)."""
    path = cp.procs.logs / "training-operator.log"
    if not path.exists():
        return "no operator log"
    lines = [line for line in path.read_text(errors="replace").splitlines() if _ERROR.search(line)]
    about = [line for line in lines if name in line] or lines
    return " ".join(about[-1].split())[:600] if about else "no error in the operator's log"


def stall_report(cp: ControlPlane, namespace: str, name: str) -> str:
    return (f"tfjob {name}: last condition {last_condition(cp, namespace, name)}; "
            f"training-operator's last error: {operator_error(cp, name)}")
