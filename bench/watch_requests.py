"""API requests the k8s backend makes while watching a job through its lifecycle, for a
10-replica and a 100-replica job (one list and one watch per resource: it must not grow
with the replica count). Runs against the FAKE API server of tests/support (a test
double), with the fake operator creating, running and finishing every pod. Counts the
requests of the watch alone (the TFJob's create is not among them); no flags.

    .venv/bin/python bench/watch_requests.py
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _common import cpu, machine  # noqa: E402
from launcher.backends.k8s import KubernetesBackend  # noqa: E402
from launcher.events import ReplicaPhase  # noqa: E402
from tests.support.apiserver import FakeApiServer  # noqa: E402
from tests.support.fakes.operator import FakeOperator  # noqa: E402
from tests.support.k8s_backend import watch_lifecycle  # noqa: E402

SIZES = (10, 100)  # replicas: a chief, a ps and workers


def measure(replicas: int) -> str:
    server = FakeApiServer().start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            backend = KubernetesBackend(kubeconfig=str(server.write_kubeconfig(Path(tmp) / "kubeconfig")))
            try:
                made, seen, events = watch_lifecycle(backend, server, FakeOperator(server), replicas)
            finally:
                backend.close()
    finally:
        server.stop()
    phases = sum(isinstance(e, ReplicaPhase) for e in events)
    return f"{replicas} replicas: {made} requests (server saw {seen}) for {phases} replica transitions"


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    print("watch requests over a job lifecycle: " + "; ".join(measure(n) for n in SIZES)
          + f" (test double, not timed; {cpu()}, {machine()})")


if __name__ == "__main__":
    main()
