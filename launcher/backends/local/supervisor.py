"""The local job supervisor: `python -m launcher.backends.local.supervisor RUN_DIR`.

Started by `LocalBackend.submit` in its own session, so a job outlives the launcher
(--detach). It starts every replica of the plan (each in its own process group, killed
by the kernel if the supervisor dies: PR_SET_PDEATHSIG), applies the restart policies,
enforces runPolicy.activeDeadlineSeconds and backoffLimit, and is the only writer of
status.json. SIGTERM / SIGINT stop the job (every replica group is terminated, then
killed after a grace period). It also stops the job when the launcher recorded in
owner.json is gone (a foreground submit whose launcher was interrupted or killed).
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .netns import HOST, ISOLATED, Namespace, network_need, outbound_blocker
from .plan import child_env
from .expansion import container_variables, expand
from .secrets import resolve, unresolved
from .policy import BACKOFF_RESET_AFTER, backoff_exceeded, restart_delay, should_restart
from .procs import alive, die_with_parent, exit_code, start_time, terminate_groups, terminate_members
from .runs import (PRIVATE_UMASK, STATUS_VERSION, RunDir, Transitions, now, open_private, private_dir,
                   set_condition, snapshot_entries)

POLL_SECONDS = 0.1
GRACE_ENV = "TFJOB_LOCAL_STOP_GRACE_SECONDS"  # SIGTERM -> SIGKILL grace (default 10 s)


def log(message: str) -> None:
    print(f"{now()} {message}", file=sys.stderr, flush=True)


@dataclass
class Replica:
    spec: dict  # one entry of plan["replicas"]
    log_path: Path
    times_path: Path  # when the log reached each size (logs.Times reads it)
    proc: subprocess.Popen | None = None
    phase: str = "Pending"
    restarts: int = 0
    consecutive: int = 0  # failures since the replica last ran BACKOFF_RESET_AFTER seconds
    exit_code: int | None = None
    pid_start: int | None = None
    started: str = ""
    started_at: float = 0.0
    restart_at: float | None = None
    message: str = ""
    log_ends: list[int] = field(default_factory=list)  # the log's size as each process ended
    recorded: int = 0  # the log's size in the last record of times_path

    @property
    def id(self) -> str:
        return self.spec["id"]

    def ended(self) -> None:
        """Record where this process's lines end in the log that its restarts share, so a
        follower can mark the end before the next process's first line."""
        self.log_ends.append(self.note_size())

    def note_size(self) -> int:
        """The log's size now; when it grew since the last record, a record of the size
        and the time (a line's time for `logs --timestamps` is the first record holding
        it, so this runs every poll)."""
        try:
            size = self.log_path.stat().st_size
        except FileNotFoundError:
            return 0
        if size > self.recorded:
            with open_private(self.times_path) as out:
                out.write(f"{size} {time.time():.6f}\n".encode())
            self.recorded = size
        return size

    def row(self) -> dict:
        return {
            "id": self.id, "type": self.spec["type"], "index": self.spec["index"],
            "address": self.spec["address"], "argv": self.spec["argv"],
            "phase": self.phase, "restarts": self.restarts, "exit_code": self.exit_code,
            "pid": self.proc.pid if self.proc else None, "pid_start": self.pid_start,
            "started": self.started, "message": self.message, "log_ends": self.log_ends,
        }


@dataclass
class Supervisor:
    run: RunDir
    replicas: list[Replica] = field(default_factory=list)
    conditions: list[dict] = field(default_factory=list)
    outcome: tuple[str, str, str] | None = None  # (condition type, reason, message)
    stop_signal: int | None = None
    total_restarts: int = 0
    exit_status: int | None = None

    def __post_init__(self) -> None:
        manifest = self.run.manifest()
        self.name = manifest["metadata"]["name"]
        self.namespace = manifest["metadata"].get("namespace", "default")
        self.plan = self.run.plan()
        self.run_policy = self.plan.get("runPolicy") or {}
        self.replicas = [Replica(spec, self.run.log_path(spec["id"]), self.run.times_path(spec["id"]))
                         for spec in self.plan["replicas"]]
        self.created = now()
        self.t0 = time.monotonic()
        self.grace = float(os.environ.get(GRACE_ENV, "10"))
        self._written: dict | None = None
        self._seen = Transitions()
        self.history: list[dict] = []
        self.netns: Namespace | None = None
        self.network: dict = {"mode": HOST, "reason": "not started"}

    @property
    def job(self) -> str:
        return f"TFJob {self.namespace}/{self.name}"

    # ---- main loop --------------------------------------------------------------
    def main(self) -> int:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._on_signal)
        self.network = self.isolate()
        log(f"network: {self.network}")
        self.condition("Created", "TFJobCreated", f"{self.job} is created.")
        self.write()
        for replica in self.replicas:
            if self.outcome is None:
                self.start(replica)
        while self.outcome is None:
            self.tick()
            for replica in self.replicas:
                replica.note_size()
            self.write()
            if self.outcome is None:
                time.sleep(POLL_SECONDS)
        self.finish()
        return 0

    def _on_signal(self, signum: int, _frame) -> None:
        self.stop_signal = signum

    def tick(self) -> None:
        if self.stop_signal is not None:  # a launcher says why (delete, --replace, Ctrl-C), else the signal
            return self.fail("Stopped", self.run.stop_reason() or f"stopped by {signal.Signals(self.stop_signal).name}")
        owner = self.run.owner()
        if owner and not alive(*owner):
            return self.fail("Stopped", f"the launcher (pid {owner[0]}) that ran this job in the "
                             "foreground exited; use --detach to keep a local job running")
        exited = set()
        for replica in self.replicas:
            code = replica.proc.poll() if replica.proc else None
            if code is not None:
                self.on_exit(replica, code)
                exited.add(replica.id)
                if self.outcome:
                    return
        for replica in self.replicas:  # not in the tick of its exit: its Restarting state is written first
            if replica.restart_at is not None and time.monotonic() >= replica.restart_at and replica.id not in exited:
                self.start(replica)
        deadline = self.run_policy.get("activeDeadlineSeconds")
        if deadline is not None and time.monotonic() - self.t0 >= float(deadline):
            return self.fail("DeadlineExceeded", f"{self.job} has failed because it was active longer "
                             f"than runPolicy.activeDeadlineSeconds ({deadline} s)")
        if self.outcome is None and all(r.phase != "Pending" for r in self.replicas):
            self.condition("Running", "TFJobRunning", f"{self.job} is running.")

    # ---- replicas ---------------------------------------------------------------
    def isolate(self) -> dict:
        """A private network namespace for the replicas, or why they run without one."""
        need = network_need(self.plan)
        blocker = outbound_blocker(self.plan, dict(os.environ)) if need else None
        if blocker:
            return {"mode": HOST, "reason": f"{need}; {blocker}"}
        try:
            self.netns = Namespace.start(preexec=die_with_parent())
        except OSError as err:
            return {"mode": HOST, "reason": f"no private network namespace: {err}"}
        if not need:
            return {"mode": ISOLATED}
        try:
            self.netns.outbound(dict(os.environ), preexec=die_with_parent(), log=sys.stderr)
        except OSError as err:
            self.netns.close()
            self.netns = None
            return {"mode": HOST, "reason": f"{need}; {err}"}
        return {"mode": ISOLATED, "outbound": "slirp4netns"}

    def preexec(self, nice: int = 0):
        """Runs in each replica before exec: die with the supervisor, join the namespace,
        lower its priority by `nice` (the plan's, see plan.replica_nice)."""
        die, netns = die_with_parent(), self.netns

        def preexec() -> None:
            die()
            if netns is not None:
                netns.join()
            if nice:
                os.nice(nice)

        return preexec

    def start(self, replica: Replica) -> None:
        replica.restart_at = None
        argv = replica.spec["argv"]
        env = child_env(replica.spec["env"], dict(os.environ))
        if "TMPDIR" not in replica.spec["env"]:  # a /tmp of its own, as a container's: what a process killed
            # outright leaves there (the trainer's AutoGraph files) goes as it exits, not into this machine's /tmp
            env["TMPDIR"] = str(private_dir(self.run.tmp_path(replica.id)))
        for ref in replica.spec.get("secretEnv", []):
            value = resolve(ref, env)
            if value is None:
                replica.ended()
                replica.phase, replica.exit_code = "Failed", 127
                replica.message = f"no value for secret env {ref['name']}"
                return self.fail("TFJobFailed", f"replica {replica.id}: {unresolved([ref], env)}")
            env[ref["name"]] = value
        # $(VAR) as the kubelet expands it, from the container's own variables only
        variables = container_variables(replica.spec.get("declared", []), env)
        env.update(variables)
        argv = [expand(arg, variables) for arg in argv]
        try:
            with open_private(replica.log_path) as out:
                replica.proc = subprocess.Popen(
                    argv, env=env, cwd=replica.spec.get("cwd"),
                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                    # a process group of its own (signalled as one), in the supervisor's
                    # session: with the kernel's autogroups (a CPU share per session) the
                    # whole job shares one, inside which the plan's nice values apply
                    process_group=0, preexec_fn=self.preexec(replica.spec.get("nice", 0)))
        except OSError as err:
            replica.ended()
            replica.phase, replica.exit_code = "Failed", 127
            replica.message = f"cannot start {argv[0]!r}: {err.strerror}"
            return self.fail("TFJobFailed", f"replica {replica.id} could not start {argv[0]!r}: {err.strerror}")
        replica.pid_start = start_time(replica.proc.pid)
        replica.phase, replica.exit_code, replica.message = "Running", None, ""
        replica.started, replica.started_at = now(), time.monotonic()
        log(f"{replica.id} started, pid {replica.proc.pid}")

    def on_exit(self, replica: Replica, returncode: int) -> None:
        code = exit_code(returncode)
        ran = time.monotonic() - replica.started_at
        # what it started goes with it (as a container's processes with its main one), not
        # left running after the job, nor once per restart
        terminate_members(os.getsid(0), {replica.proc.pid}, 0)
        shutil.rmtree(self.run.tmp_path(replica.id), ignore_errors=True)
        replica.proc, replica.exit_code = None, code
        replica.ended()
        log(f"{replica.id} exited with code {code}")
        if code == 0:
            replica.phase, replica.message = "Succeeded", ""
            if replica.id == self.plan["deciding"]:
                self.outcome = ("Succeeded", "TFJobSucceeded", f"{self.job} successfully completed.")
            return
        policy = replica.spec["restartPolicy"]
        if not should_restart(policy, code):
            replica.phase, replica.message = "Failed", f"exited with code {code}"
            return self.fail("TFJobFailed", f"{self.job} has failed because replica {replica.id} exited "
                             f"with code {code} (restartPolicy {policy})")
        limit = self.run_policy.get("backoffLimit")
        if backoff_exceeded(limit, self.total_restarts):
            replica.phase, replica.message = "Failed", f"exited with code {code}"
            return self.fail("BackoffLimitExceeded", f"{self.job} has failed because it has reached the "
                             f"specified backoff limit ({limit} restarts): replica {replica.id} exited "
                             f"with code {code}")
        self.schedule_restart(replica, code, ran)

    def schedule_restart(self, replica: Replica, code: int, ran: float) -> None:
        if ran >= BACKOFF_RESET_AFTER:
            replica.consecutive = 0
        delay = restart_delay(replica.consecutive)
        replica.consecutive += 1
        replica.restarts += 1
        self.total_restarts += 1
        replica.phase = "Pending"
        replica.restart_at = time.monotonic() + delay
        replica.message = f"exited with code {code}; restart {replica.restarts} in {delay:g} s"
        self.condition("Restarting", "TFJobRestarting",
                       f"{self.job} is restarting because replica {replica.id} exited with code {code}.")

    # ---- end of the job ---------------------------------------------------------
    def fail(self, reason: str, message: str) -> None:
        self.outcome = ("Failed", reason, message)

    def finish(self) -> None:
        ctype, reason, message = self.outcome
        log(f"{ctype}: {message}")
        live = [r for r in self.replicas if r.proc]
        terminate_groups([(r.proc.pid, r.pid_start) for r in live], self.grace)
        if self.netns:
            self.netns.close()
        policy = self.run_policy.get("cleanPodPolicy", "Running")
        note = f"stopped because the job {ctype.lower()} (cleanPodPolicy {policy}"
        note += "; processes cannot outlive a local job)" if policy == "None" else ")"
        for replica in self.replicas:
            if replica.proc:
                replica.exit_code = exit_code(replica.proc.wait())
                replica.proc = None
            elif replica.phase != "Pending":
                continue
            replica.ended()
            replica.restart_at = None
            replica.phase = "Succeeded" if ctype == "Succeeded" else "Failed"
            replica.message = note
        shutil.rmtree(self.run.tmp, ignore_errors=True)
        self.condition(ctype, reason, message)
        self.exit_status = 0 if ctype == "Succeeded" else 1
        self.write()

    # ---- status.json ------------------------------------------------------------
    def condition(self, ctype: str, reason: str, message: str) -> None:
        self.conditions = set_condition(self.conditions, ctype, reason, message)

    def snapshot(self) -> dict:
        me = os.getpid()
        return {
            "apiVersion": STATUS_VERSION,
            "name": self.name, "namespace": self.namespace, "created": self.created,
            "supervisor": {"pid": me, "start": start_time(me)},
            "conditions": self.conditions,
            "replicas": [r.row() for r in self.replicas],
            "log_times": True,  # logs/REPLICA.times are kept (an earlier supervisor kept none)
            "restarts": self.total_restarts,
            "network": self.network,
            "exit_code": self.exit_status,
            "finished": now() if self.exit_status is not None else None,
        }

    def write(self) -> None:
        snap = self.snapshot()
        self.history += self._seen.fresh(snapshot_entries(snap))
        snap["history"] = self.history
        if snap != self._written:
            self.run.write_status(snap)
            self._written = snap


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="launcher.backends.local.supervisor", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    args = parser.parse_args(argv)
    os.umask(os.umask(0) | PRIVATE_UMASK)  # what it and the replicas write is the user's only
    return Supervisor(RunDir(Path(args.run_dir))).main()


if __name__ == "__main__":
    sys.exit(main())
