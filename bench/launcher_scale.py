"""The launcher at scale on the real control plane of tests/support/controlplane/ (with its
LARGE_JOBS settings: etcd's raft log, GOGC of the processes that hold every pod; the e2e
tests' defaults with --defaults): submit TFJobs of growing size (default 1 chief + 10 workers + 1 ps, then 1 + 1000 +
50) through KubernetesBackend (in this process, so it can be measured), follow each with
backend.events() as `launcher submit` does, make the chief exit 0 once all replicas run
(the e2e tests' KWOK annotation), and watch the job to Succeeded. Prints one line per
figure, the jobs side by side:

- time from submit until the launcher has seen every replica Running (with the server's
  own timeline beside it: pods are created by training-operator at its default 20 QPS);
- largest lag from a pod phase / TFJob condition change on the server to the launcher's
  view, against the apiserver audit log's microsecond stageTimestamp, beside a control:
  `kubectl get pods -w` (Go, its own process, pods as Table rows too) on the same pods,
  for the launcher's worst change as well (if kubectl trails as much, the lag is the
  server's or the machine's);
- API requests the backend made per job (must not grow with the replica count), with the
  re-openings of watches apart: after the server's WATCH_SECONDS timeout (time, not
  replicas), a dropped stream, 410 Gone;
- bytes the launcher received per pod change on its pod watch (and in its first list),
  beside the size of one pod object on the server (TF_CONFIG makes it O(replicas));
- CPU seconds (user + system) of this process per job, peak RSS (ru_maxrss) and the
  longest pause of Python's garbage collector: the launcher in-process plus this bench;
- what the job cost the control plane: peak RSS (anonymous apart) and CPU seconds of each
  process, etcd's database file, the machine's smallest MemAvailable (scale_usage.py).

Each job's figures are printed as soon as it is done, then all jobs side by side at the end.
A job that makes no progress for --stall s (no replica changed in the launcher's view;
the default leaves room for training-operator deleting the previous job's pods first)
stops the run with the TFJob's last condition and training-operator's last error instead
of waiting out --timeout. Every wait is bounded. On a 2-core machine shared with other
work the CPU model and load average are printed.

    .venv/bin/python bench/launcher_scale.py [--jobs 10:1,1000:50[,5000:100]] [--timeout 1800] [--defaults]
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from _common import cpu, machine, positive_float
from scale_audit import JOB, audit_flags, server_changes
from scale_nodes import add_nodes
from scale_stall import stall_report
from scale_usage import ControlPlaneUsage
from scale_watch import KubectlView, LauncherView

from launcher.backends.k8s import KubernetesBackend  # noqa: E402
from launcher.backends.k8s.client import watch_bytes_per_change  # noqa: E402
from launcher.backends.k8s.objects import pod_selector  # noqa: E402
from launcher.backends.k8s.watch import WATCH_SECONDS  # noqa: E402
from launcher.cli.submit import rendered  # noqa: E402
from launcher.spec import JobSpec, ReplicaSpec  # noqa: E402
from tests.support.controlplane import LARGE_JOBS, ControlPlane, Tuning, running_control_plane  # noqa: E402
from tests.support.controlplane.procs import wait_until  # noqa: E402

FINISH_TIMEOUT_S = 300.0  # from the chief's exit to the launcher seeing Succeeded
PROGRESS_S = 30.0
LAG_TARGET_S = 1.0
BYTES_TARGET = 2048  # per pod change


@dataclass
class JobRun:
    name: str
    replicas: int
    submitted: float
    view: LauncherView
    requests: dict[str, int]
    received: dict[str, dict[str, int]]
    cpu_s: float
    maxrss_mib: float
    pod_bytes: int  # one pod object as the server stores it (JSON)
    gc_pause_s: tuple[float, float]  # the longest pause of this process's garbage collector: wall, CPU
    unfinished: str = ""  # why Succeeded was not seen, if it was not


class GcPauses:
    """The longest collection of Python's cyclic garbage collector (it stops every Python
    thread of the process, the launcher's watches included) since `reset()`: wall time and
    the process's CPU time meanwhile (on a busy machine the wall time also counts the time
    the process waited for a core)."""

    def __init__(self) -> None:
        self.largest = self.largest_cpu = 0.0
        self._began = self._began_cpu = 0.0
        gc.callbacks.append(self._note)

    def _note(self, phase: str, info: dict) -> None:
        now, cpu = time.perf_counter(), time.process_time()
        if phase == "start":
            self._began, self._began_cpu = now, cpu
        elif now - self._began > self.largest:
            self.largest, self.largest_cpu = now - self._began, cpu - self._began_cpu

    def reset(self) -> None:
        self.largest = self.largest_cpu = 0.0


GC_PAUSES = GcPauses()


def maxrss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def server_phases(cp: ControlPlane, namespace: str, name: str) -> str:
    out = cp.kubectl("get", "pods", "-n", namespace, "-l", pod_selector(name), "--no-headers",
                     "-o", "custom-columns=PHASE:.status.phase", check=False, timeout=120).stdout.split()
    return ", ".join(f"{out.count(p)} {p}" for p in sorted(set(out))) or "no pods"


def wait_all_running(cp: ControlPlane, view: LauncherView, namespace: str, timeout: float, stall: float) -> None:
    """Until the launcher shows every replica Running; gives up after `timeout`, or after
    `stall` s in which nothing in the launcher's view changed, saying why."""
    start = last_change = time.monotonic()
    seen = view.events
    while not view.all_running.wait(timeout=min(PROGRESS_S, stall)):
        now = time.monotonic()
        if view.done.is_set():
            raise RuntimeError(f"the launcher's watch ended before all replicas ran: {view.error!r}")
        if view.events != seen:
            seen, last_change = view.events, now
        elif now - last_change >= stall:
            raise RuntimeError(f"stalled: no change in the launcher's view for {now - last_change:.0f} s at "
                               f"{view.running} of {view.replicas} replicas Running (server: "
                               f"{server_phases(cp, namespace, view.job)}); "
                               f"{stall_report(cp, namespace, view.job)}")
        if now - start > timeout:
            raise TimeoutError(f"gave up after {timeout:.0f} s: the launcher saw {view.running} of "
                               f"{view.replicas} replicas Running; the server has "
                               f"{server_phases(cp, namespace, view.job)}; {stall_report(cp, namespace, view.job)}")
        print(f"  ... {view.job}: {view.running}/{view.replicas} Running in the launcher's view after "
              f"{now - start:.0f} s (load average {os.getloadavg()[0]:.1f})", file=sys.stderr, flush=True)


def one_pod_bytes(cp: ControlPlane, namespace: str, name: str) -> int:
    out = cp.kubectl("get", "pod", f"{name}-worker-0", "-n", namespace, "-o", "json", check=False, timeout=60)
    return len(json.dumps(json.loads(out.stdout), separators=(",", ":"))) if out.returncode == 0 else 0


def run_job(cp: ControlPlane, backend: KubernetesBackend, namespace: str, workers: int, ps: int,
            args: argparse.Namespace) -> JobRun:
    """Submit, follow until every replica runs, finish the chief, follow to Succeeded."""
    replicas = 1 + workers + ps
    name = f"scale-{replicas}"
    spec = JobSpec(name=name, namespace=namespace,
                   replicas={"Chief": ReplicaSpec(1), "Worker": ReplicaSpec(workers), "PS": ReplicaSpec(ps)})
    tfjob = rendered(spec)
    backend.requests.reset()
    backend.api.received.reset()
    GC_PAUSES.reset()
    cpu_before = cpu_s()
    submitted = time.time()
    backend.submit(tfjob)
    view = LauncherView(backend, name, namespace, replicas)
    view.start()
    wait_all_running(cp, view, namespace, args.timeout, args.stall)
    pod_bytes = one_pod_bytes(cp, namespace, name)
    cp.finish_pod(namespace, f"{name}-chief-0", 0)
    unfinished = ""  # the figures up to every replica Running stand even if Succeeded never comes
    if not view.done.wait(timeout=args.finish):
        unfinished = (f"the launcher did not see tfjob {name} finish within {args.finish:.0f} s of the "
                      f"chief's exit; {stall_report(cp, namespace, name)}")
    elif view.error is not None:
        raise RuntimeError(f"the launcher's watch of {name} failed: {view.error}")
    return JobRun(name, replicas, submitted, view, backend.requests.snapshot(), backend.api.received.snapshot(),
                  cpu_s() - cpu_before, maxrss_mib(), pod_bytes, (GC_PAUSES.largest, GC_PAUSES.largest_cpu),
                  unfinished)


# ---- result lines ---------------------------------------------------------------------
def time_line(runs: list[JobRun], server: dict) -> str:
    def text(run: JobRun) -> str:
        def last(phase: str) -> float:
            return max((t for (job, replica, p), t in server.items() if job == run.name and replica != JOB
                        and p == phase), default=float("nan")) - run.submitted

        return (f"{run.replicas} replicas: {run.view.all_running_at - run.submitted:.1f} s (server: last pod "
                f"created +{last('Pending'):.1f} s, last pod Running +{last('Running'):.1f} s)")

    return "submit -> every replica Running in the launcher's view: " + "; ".join(map(text, runs))


def lags(seen: dict, server: dict) -> list[tuple[float, tuple]]:
    """(arrival - server commit, key) for each change both saw, smallest first."""
    return sorted((t - server[key], key) for key, t in seen.items() if key in server)


def spread(values: list[float]) -> str:
    if not values:
        return "no changes"
    p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
    return (f"p99 {p99 * 1000:.0f} ms, median {statistics.median(values) * 1000:.0f} ms "
            f"over {len(values)} changes")


def lag_line(runs: list[JobRun], control: dict, server: dict) -> str:
    def text(run: JobRun) -> str:
        found = lags(run.view.seen, server)
        if not found:
            return f"{run.replicas} replicas: no changes matched"
        worst, key = found[-1]
        same = f"{(control[key] - server[key]) * 1000:.0f} ms" if key in control else "not seen"
        return (f"{run.replicas} replicas: largest {worst * 1000:.0f} ms ({key[1]} {key[2]}; kubectl: {same}), "
                f"{spread([lag for lag, _ in found])}")

    worst = max((lags(run.view.seen, server) or [(0.0, None)])[-1][0] for run in runs)
    kubectl_lags = [lag for lag, _ in lags(control, server)]
    verdict = "met" if worst < LAG_TARGET_S else "MISSED"
    return ("largest lag from a pod phase / TFJob condition change on the server (apiserver audit "
            "stageTimestamp) to the launcher's view: " + "; ".join(map(text, runs))
            + f" [target < {LAG_TARGET_S:.0f} s: {verdict}]; control, kubectl get pods -w on the same pods: "
            f"largest {(kubectl_lags or [float('nan')])[-1] * 1000:.0f} ms, "
            f"{spread(kubectl_lags)}")


def reopened(run: JobRun) -> dict[str, int]:
    """Requests that re-opened a watch, by cause: after the server ended it (its
    WATCH_SECONDS timeout: one per watch per WATCH_SECONDS, time, not replicas), after a
    dropped or silent stream, and list + watch after 410 Gone."""
    total = lambda key: sum(c.get(key, 0) for c in run.received.values())  # noqa: E731
    return {"re-watches after the server's timeout": total("rewatches"), "after a drop": total("drops"),
            "for relists after 410 Gone": 2 * total("relists")}


def requests_line(runs: list[JobRun]) -> str:
    def text(run: JobRun) -> str:
        detail = ", ".join(f"{n} {k}" for k, n in sorted(run.requests.items()))
        again = ", ".join(f"{n} {why}" for why, n in reopened(run).items() if n)
        return (f"{sum(run.requests.values())} for {run.replicas} replicas ({detail}"
                f"{f'; of them {again}' if again else ''})")

    following = {sum(run.requests.values()) - sum(reopened(run).values()) for run in runs}
    return (f"API requests over submit -> Succeeded (a watch lasts {WATCH_SECONDS} s, then is re-opened): "
            + "; ".join(map(text, runs))
            + f" [the same for every size, re-openings apart: {'yes' if len(following) == 1 else 'NO'}]")


def bytes_line(runs: list[JobRun]) -> str:
    def text(run: JobRun) -> str:
        pod = run.received.get("pod", {})
        per_change = watch_bytes_per_change(pod)
        other = ", ".join(f"{kind} {c.get('list_bytes', 0) + c.get('watch_bytes', 0)} B in {c.get('changes', 0)} "
                          f"changes" for kind, c in sorted(run.received.items()) if kind != "pod")
        return (f"{run.replicas} replicas: {per_change:.0f} B per pod change over {pod.get('changes', 0)} changes "
                f"(first list {pod.get('list_bytes', 0)} B; one pod object on the server {run.pod_bytes} B; "
                f"{other})")

    met = all(watch_bytes_per_change(run.received.get("pod", {})) < BYTES_TARGET for run in runs)
    verdict = "met" if met else "MISSED"
    return "bytes the launcher received on its pod watch: " + "; ".join(map(text, runs)) + \
        f" [target flat, < {BYTES_TARGET} B: {verdict}]"


def cost_line(before: float, runs: list[JobRun]) -> str:
    return ("launcher CPU and memory (this process: launcher in-process + bench): "
            + "; ".join(f"{run.replicas} replicas: {run.cpu_s:.1f} CPU s, peak RSS {run.maxrss_mib:.0f} MiB after, "
                        f"longest garbage-collector pause {run.gc_pause_s[0] * 1000:.0f} ms "
                        f"({run.gc_pause_s[1] * 1000:.0f} ms CPU)" for run in runs)
            + f"; {before:.0f} MiB before any job")


def fresh_namespace(cp: ControlPlane, name: str) -> str:
    """A namespace for the jobs, never deleted: the control plane goes with everything in it
    (deleting thousands of pods would take minutes)."""
    cp.kubectl("create", "namespace", name)
    wait_until(f"service account default in {name}",
               lambda: cp.kubectl("get", "serviceaccount", "default", "-n", name, check=False).returncode == 0,
               cp.procs, "kube-controller-manager")
    return name


def measure(args: argparse.Namespace, workdir: Path) -> list[str]:
    audit_log, flags = audit_flags(workdir)
    tuning = Tuning() if args.defaults else LARGE_JOBS
    with running_control_plane(workdir, flags, tuning=tuning) as cp:
        os.environ.update(cp.env())  # no_proxy for the API server, as for the launcher CLI
        nodes = add_nodes(cp, sum(1 + w + p for w, p in args.jobs) + 2)
        print(f"control plane up, {len(nodes)} extra KWOK nodes; {cpu()}, {machine()}", file=sys.stderr,
              flush=True)
        backend = KubernetesBackend(kubeconfig=str(cp.kubeconfig))
        usage = ControlPlaneUsage(cp)
        usage.start()
        try:
            namespace = fresh_namespace(cp, "bench-scale")
            before = maxrss_mib()
            runs: list[JobRun] = []
            control: dict = {}
            failed = ""
            costs: list[str] = []  # the control plane's, per job
            for workers, ps in args.jobs:
                usage.start_job()
                try:
                    with KubectlView(cp, namespace, (f"scale-{1 + workers + ps}",)) as view:
                        runs.append(run_job(cp, backend, namespace, workers, ps, args))
                except (TimeoutError, RuntimeError) as exc:  # the jobs before it still have their figures
                    if not runs:
                        raise
                    failed = f"1 chief + {workers} workers + {ps} ps: {exc}; {usage.line()}"
                    break
                control.update(view.seen)
                print(f"  done: {runs[-1].name} ({machine()})", file=sys.stderr, flush=True)
                # this job's figures now: a later job that stalls or is interrupted cannot take them along
                mine = server_changes(audit_log, namespace, (runs[-1].name,))
                costs.append(f"{runs[-1].replicas} replicas: {usage.line()}")
                for line in (time_line(runs[-1:], mine), lag_line(runs[-1:], view.seen, mine),
                             requests_line(runs[-1:]), bytes_line(runs[-1:]), cost_line(before, runs[-1:]),
                             costs[-1]):
                    print(f"  {runs[-1].name}: {line}", flush=True)
            server = server_changes(audit_log, namespace, tuple(run.name for run in runs))
            return [f"launcher at scale on the real control plane + KWOK ({len(nodes)} extra 110-pod nodes), jobs "
                    + ", ".join(f"1 chief + {w} workers + {p} ps" for w, p in args.jobs)
                    + f"; control plane settings: {tuning}; {cpu()}, {machine()}",
                    time_line(runs, server), lag_line(runs, control, server), requests_line(runs),
                    bytes_line(runs), cost_line(before, runs), *costs] \
                + ([f"NOT FINISHED: {failed}"] if failed else []) \
                + [f"NOT FINISHED ({run.replicas} replicas, figures up to every replica Running): {run.unfinished}"
                   for run in runs if run.unfinished]
        finally:
            usage.stop()
            backend.close()


def job_sizes(text: str) -> list[tuple[int, int]]:
    try:
        sizes = [tuple(int(n) for n in part.split(":")) for part in text.split(",")]
    except ValueError:
        sizes = []
    if not sizes or any(len(s) != 2 or s[0] < 1 or s[1] < 0 for s in sizes):
        raise argparse.ArgumentTypeError(f"--jobs {text!r}: give WORKERS:PS,... like 10:1,1000:50")
    return sizes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=job_sizes, default=job_sizes("10:1,1000:50"),
                        help="WORKERS:PS of each job, run one after the other (1 chief each)")
    parser.add_argument("--timeout", type=positive_float, default=1800.0,
                        help="seconds to wait for all replicas Running")
    parser.add_argument("--finish", type=positive_float, default=FINISH_TIMEOUT_S,
                        help="seconds to wait for Succeeded after the chief's exit")
    parser.add_argument("--defaults", action="store_true",
                        help="start the control plane as the e2e tests do, without LARGE_JOBS (to see what it saves)")
    parser.add_argument("--stall", type=positive_float, default=300.0,
                        help="seconds without any change in the launcher's view before giving up, saying why")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        try:
            lines = measure(args, Path(tmp))
        except (TimeoutError, RuntimeError) as exc:  # ControlPlaneError is a RuntimeError
            print(f"launcher_scale: {exc}; {cpu()}, {machine()}", file=sys.stderr)
            return 1
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
