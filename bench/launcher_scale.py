"""The launcher at scale on the real control plane of tests/support/controlplane.py:
submit a 1 chief + 1000 worker + 50 ps TFJob through KubernetesBackend (in this process,
so it can be measured), follow it with backend.events() as `launcher submit` does, make
the chief exit 0 once all replicas run (the e2e tests' KWOK annotation), and watch the
job to Succeeded. A 1 chief + 10 worker + 1 ps job runs first in the same control plane
for comparison. Prints one line per figure:

- time from submit until the launcher has seen every replica Running (with the server's
  own timeline beside it: pods are created by training-operator at its default 20 QPS);
- largest lag from a pod phase / TFJob condition change on the server to the launcher's
  view, against the apiserver audit log's microsecond stageTimestamp (pod timestamps have
  1-s resolution; that bound is printed too);
- API requests the backend made, small job vs large job;
- peak RSS (getrusage ru_maxrss) of this process, which is the launcher plus this bench.

Every wait is bounded: it gives up after --timeout s with what the launcher and the
server saw. On a 2-core machine, shared with other work: the load average is printed.

    .venv/bin/python bench/launcher_scale.py [--workers 1000] [--ps 50] [--timeout 900]
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from _common import machine
from scale_audit import JOB, audit_flags, server_changes
from scale_nodes import add_nodes
from scale_watch import KubectlView, LauncherView

from launcher.backends.k8s import KubernetesBackend  # noqa: E402
from launcher.backends.k8s_objects import pod_selector  # noqa: E402
from launcher.cli_submit import rendered  # noqa: E402
from launcher.spec import JobSpec, ReplicaSpec  # noqa: E402
from tests.support.controlplane import ControlPlane, running_control_plane  # noqa: E402
from tests.support.controlplane_procs import ControlPlaneError  # noqa: E402

FINISH_TIMEOUT_S = 300.0  # from the chief's exit to the launcher seeing Succeeded
PROGRESS_S = 30.0
LAG_TARGET_S = 1.0
JOBS = ("scale-small", "scale-big")


@dataclass
class JobRun:
    name: str
    replicas: int
    submitted: float
    view: LauncherView
    requests: dict[str, int]
    maxrss_mib: float


def maxrss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def server_phases(cp: ControlPlane, namespace: str, name: str) -> str:
    out = cp.kubectl("get", "pods", "-n", namespace, "-l", pod_selector(name), "--no-headers",
                     "-o", "custom-columns=PHASE:.status.phase", check=False, timeout=60).stdout.split()
    return ", ".join(f"{out.count(p)} {p}" for p in sorted(set(out))) or "no pods"


def wait_all_running(cp: ControlPlane, view: LauncherView, namespace: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    start = time.monotonic()
    while not view.all_running.wait(timeout=PROGRESS_S):
        if view.done.is_set():
            raise RuntimeError(f"the launcher's watch ended before all replicas ran: {view.error!r}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up after {timeout:.0f} s: the launcher saw {view.running} of "
                               f"{view.replicas} replicas Running; the server has "
                               f"{server_phases(cp, namespace, view.job)}")
        print(f"  ... {view.running}/{view.replicas} Running in the launcher's view after "
              f"{time.monotonic() - start:.0f} s (load average {os.getloadavg()[0]:.1f})", file=sys.stderr, flush=True)


def run_job(cp: ControlPlane, backend: KubernetesBackend, namespace: str, name: str, workers: int, ps: int,
            timeout: float) -> JobRun:
    """Submit, follow until every replica runs, finish the chief, follow to Succeeded."""
    spec = JobSpec(name=name, namespace=namespace,
                   replicas={"Chief": ReplicaSpec(1), "Worker": ReplicaSpec(workers), "PS": ReplicaSpec(ps)})
    tfjob = rendered(spec)
    replicas = 1 + workers + ps
    backend.requests.reset()
    submitted = time.time()
    backend.submit(tfjob)
    view = LauncherView(backend, name, namespace, replicas)
    view.start()
    wait_all_running(cp, view, namespace, timeout)
    cp.finish_pod(namespace, f"{name}-chief-0", 0)
    if not view.done.wait(timeout=FINISH_TIMEOUT_S):
        raise TimeoutError(f"gave up: the launcher did not see tfjob {name} finish within {FINISH_TIMEOUT_S:.0f} s "
                           f"of the chief's exit")
    if view.error is not None:
        raise RuntimeError(f"the launcher's watch of {name} failed: {view.error}")
    return JobRun(name, replicas, submitted, view, backend.requests.snapshot(), maxrss_mib())


# ---- result lines ---------------------------------------------------------------------
def time_line(big: JobRun, small: JobRun, server: dict) -> str:
    def last(phase: str) -> float:
        return max(t for (job, replica, p), t in server.items() if job == big.name and replica != JOB
                   and p == phase) - big.submitted

    return (f"all {big.replicas} replicas Running in the launcher's view {big.view.all_running_at - big.submitted:.1f} s "
            f"after submit (server: last pod created +{last('Pending'):.1f} s, last pod Running "
            f"+{last('Running'):.1f} s); {small.replicas}-replica job: "
            f"{small.view.all_running_at - small.submitted:.1f} s")


def lags(seen: dict, server: dict) -> list[tuple[float, tuple]]:
    """(arrival - server commit, key) for each change both saw, smallest first."""
    return sorted((t - server[key], key) for key, t in seen.items() if key in server)


def spread(values: list[float]) -> str:
    p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
    return (f"p99 {p99 * 1000:.0f} ms, median {statistics.median(values) * 1000:.0f} ms "
            f"over {len(values)} changes")


def lag_line(runs: list[JobRun], control: KubectlView, server: dict) -> str:
    launcher = lags({k: t for run in runs for k, t in run.view.seen.items()}, server)
    worst, (job, replica, change) = launcher[-1]
    kubectl_lags = [lag for lag, _ in lags(control.seen, server)] or [float("nan")]
    start_lag = max(run.view.start_lag for run in runs)
    verdict = "met" if worst < LAG_TARGET_S else "MISSED"
    return (f"largest lag from a pod phase / TFJob condition change on the server (apiserver audit "
            f"stageTimestamp, microseconds) to the launcher's view: {worst * 1000:.0f} ms ({job} {replica} "
            f"{change}), {spread([lag for lag, _ in launcher])} [target < {LAG_TARGET_S:.0f} s: {verdict}]; "
            f"control, kubectl get pods -w on the same pods: largest {kubectl_lags[-1] * 1000:.0f} ms, "
            f"{spread(kubectl_lags)}; by the pods' own startTime (stamped by KWOK before its write, "
            f"1-s resolution) Running reached the launcher at most {start_lag:.2f} s after that second")


def requests_line(big: JobRun, small: JobRun) -> str:
    def text(run: JobRun) -> str:
        detail = ", ".join(f"{n} {k}" for k, n in sorted(run.requests.items()))
        return f"{sum(run.requests.values())} for {run.replicas} replicas ({detail})"

    flat = sum(big.requests.values()) <= sum(small.requests.values())
    return (f"API requests over submit -> Succeeded: {text(big)}; {text(small)} "
            f"[independent of replica count: {'yes' if flat else 'NO'}]")


def memory_line(before: float, big: JobRun, small: JobRun) -> str:
    return (f"launcher peak memory (ru_maxrss of this process: launcher in-process + bench): "
            f"{big.maxrss_mib:.0f} MiB after the {big.replicas}-replica job, {small.maxrss_mib:.0f} MiB after "
            f"the {small.replicas}-replica job, {before:.0f} MiB before either")


def measure(args: argparse.Namespace, workdir: Path) -> list[str]:
    audit_log, flags = audit_flags(workdir)
    with running_control_plane(workdir, flags) as cp:
        os.environ.update(cp.env())  # no_proxy for the API server, as for the launcher CLI
        small_workers, small_ps = 10, 1
        nodes = add_nodes(cp, args.workers + args.ps + small_workers + small_ps + 2)
        print(f"control plane up, {len(nodes)} extra KWOK nodes; {machine()}", file=sys.stderr, flush=True)
        backend = KubernetesBackend(kubeconfig=str(cp.kubeconfig))
        lines: list[str] = []
        try:
            with cp.namespace("bench-scale") as namespace:
                before = maxrss_mib()
                with KubectlView(cp, namespace, JOBS) as control:
                    small = run_job(cp, backend, namespace, JOBS[0], small_workers, small_ps, args.timeout)
                    big = run_job(cp, backend, namespace, JOBS[1], args.workers, args.ps, args.timeout)
                server = server_changes(audit_log, namespace, JOBS)
                lines = [f"launcher at scale on the real control plane + KWOK, 1 chief + {args.workers} workers "
                         f"+ {args.ps} ps: {machine()}",
                         time_line(big, small, server), lag_line([small, big], control, server),
                         requests_line(big, small), memory_line(before, big, small)]
        except ControlPlaneError as exc:
            if not lines:
                raise
            print(f"note: cleaning up the namespace: {exc}", file=sys.stderr)  # the control plane goes anyway
        finally:
            backend.close()
        return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=1000)
    parser.add_argument("--ps", type=int, default=50)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for all replicas Running")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        try:
            lines = measure(args, Path(tmp))
        except (TimeoutError, RuntimeError) as exc:  # ControlPlaneError is a RuntimeError
            print(f"launcher_scale: {exc}; {machine()}", file=sys.stderr)
            return 1
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
