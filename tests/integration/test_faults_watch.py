"""`submit` and `status -w` (real launcher processes, k8s backend) keep following a job while
its watch streams are dropped and while the API server restarts (issue 7): every TFJob
condition transition is printed exactly once, in order, and the exit code is the job's.

The API server is the FAKE one of tests/support/apiserver/ (a test double: no control
plane runs here), reached through `TcpRelay` (tests/support/faults.py), which can take it
off the network and bring it back on the same address, as a restart looks to a client.
A restart also forgets the watch cache (`compact()`): clients must relist, not resume.
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import urllib3
import yaml

from tests.support.faults import TcpRelay
from tests.support.k8s_backend import Collector, watches_open
from tests.support.launcher_process import LAUNCHER
from tests.support.polling import wait_for
from tests.support.tools import ROOT

pytestmark = pytest.mark.usefixtures("cli_env")  # the packaged TFJob CRD, a per-session schema cache

WAIT = 60.0
PODS = ("mnist-chief-0", "mnist-ps-0", "mnist-worker-0", "mnist-worker-1")
WATCHES = 8  # submit: events + logs feeds, status -w: events feed; a TFJob and a pod watch each, and the
# events feeds a watch of the scheduler's FailedScheduling events
OLD_LIMIT = 5  # failures in a row the launcher once gave up after (~6 s: less than a real restart)
CONNECTS = 1 + urllib3.Retry.DEFAULT.total  # connection attempts per failed request (urllib3 retries)
EXPECTED = ["Created", "Running", "Restarting", "Running", "Succeeded"]  # Running=False not printed
_CONDITION = re.compile(r"^mnist: (Created|Running|Restarting|Succeeded|Failed)(=False)? \(")


@pytest.fixture
def relay(fake_apiserver):
    with TcpRelay(urlsplit(fake_apiserver.url).port) as relay:
        yield relay


@pytest.fixture
def kubeconfig(fake_apiserver, relay, tmp_path) -> Path:
    config = fake_apiserver.kubeconfig()
    config["clusters"][0]["cluster"]["server"] = relay.url
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


class Launcher:
    """`python -m launcher ARGS --backend k8s --kubeconfig K`, its stdout lines collected."""

    def __init__(self, kubeconfig: Path, *args: str):
        self.proc = subprocess.Popen([*LAUNCHER, *args, "--backend", "k8s",
                                      "--kubeconfig", str(kubeconfig)], cwd=ROOT, env=dict(os.environ),
                                     text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines = Collector(iter(self.proc.stdout.readline, ""))

    def wait_for(self, condition: str, count: int = 1) -> None:
        self.lines.wait_for(lambda lines: conditions(lines).count(condition) >= count,
                            f"{count} x {condition!r}", WAIT)

    def wait_for_line(self, prefix: str) -> None:
        self.lines.wait_for(lambda lines: any(line.startswith(prefix) for line in lines), repr(prefix), WAIT)

    def finish(self) -> tuple[int, list[str], str]:
        lines = self.lines.wait_done(WAIT)
        return self.proc.wait(WAIT), [line.rstrip("\n") for line in lines], self.proc.stderr.read()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(WAIT)
        self.proc.stdout.close()
        self.proc.stderr.close()


@pytest.fixture
def launch(kubeconfig):
    started: list[Launcher] = []

    def start(*args: str) -> Launcher:
        started.append(Launcher(kubeconfig, *args))
        return started[-1]

    yield start
    for launcher in started:
        launcher.stop()


def conditions(lines: list[str]) -> list[str]:
    """The condition transitions printed (plain view lines "mnist: Type[=False] (...)")."""
    return [m[1] + (m[2] or "") for m in map(_CONDITION.match, lines) if m]


def run_job(operator, outage, followers: list[Launcher]) -> None:
    """Drive the job from Created to Succeeded with a worker restart. `outage(change)` makes
    `change` while the followers' connections are broken in some way (twice); it may add
    followers."""
    def start(*pods: str) -> None:
        for pod in pods:
            operator.start(pod)
        operator.set_condition("mnist", "Running")

    operator.create_pods("mnist")
    for follower in followers:
        follower.wait_for("Created")
    outage(lambda: start(*PODS))
    for follower in followers:
        follower.wait_for("Running")
    operator.crash("mnist-worker-1", code=137)
    operator.set_condition("mnist", "Restarting")
    for follower in followers:  # a state that comes and goes inside an outage with a relist is
        follower.wait_for("Restarting")  # not seen by anyone (kubectl neither): not tested
    outage(lambda: start("mnist-worker-1"))
    for follower in followers:  # the TFJob and pod watches are apart: the restarted pod may come after
        follower.wait_for("Running", count=2)  # Running, and once the job ended only its end is listed
        follower.wait_for_line("[worker-1] Running (restarts 1")
    for pod in PODS:
        if "-ps-" not in pod:
            operator.exit(pod, 0)
    operator.set_condition("mnist", "Succeeded")


def assert_followed(launcher: Launcher, expected: list[str] = EXPECTED) -> list[str]:
    code, lines, err = launcher.finish()
    assert code == 0, "\n".join(lines[-20:]) + err[-2000:]
    assert conditions(lines) == expected, lines
    return lines


def test_submit_follows_through_dropped_watch_streams(launch, fake_apiserver, fake_operator):
    submit = launch("submit", "--name", "mnist", "--workers", "2", "--ps", "1")
    wait_for(lambda: watches_open(fake_apiserver), "the launcher's watches", WAIT)

    def outage(change) -> None:
        fake_apiserver.drop_watches(hold=True)  # every stream cut; changes happen while none is open
        change()
        fake_apiserver.release_watches()

    run_job(fake_operator, outage, [submit])
    assert_followed(submit)
    # one list per feed (events, logs), then only watches resumed from the last version seen
    assert fake_apiserver.count("tfjobs", "list") == 2 and len(fake_apiserver.watches("tfjobs")) > 2


def test_submit_and_status_w_follow_through_an_api_server_restart(launch, fake_apiserver, fake_operator, relay):
    submit = launch("submit", "--name", "mnist", "--workers", "2", "--ps", "1")
    wait_for(lambda: watches_open(fake_apiserver), "the launcher's watches", WAIT)
    followers = [submit]
    lists_before = fake_apiserver.count("tfjobs", "list")
    outages = []

    def outage(change) -> None:
        if not outages:  # `status -w` joins the running job: it must not repeat what is past
            followers.append(launch("status", "mnist", "-w"))
            followers[1].wait_for("Created")
        # each watch (3 per events feed, 2 per logs feed) in a stream
        wait_for(lambda: fake_apiserver.open_watches == WATCHES, f"{WATCHES} open watches", WAIT)
        refused = relay.rejected
        relay.down()  # connections reset, new ones refused ...
        # the second outage lasts until some watch failed more than OLD_LIMIT times in a row
        attempts = 2 if not outages else OLD_LIMIT * CONNECTS * WATCHES + 1
        wait_for(lambda: relay.rejected >= refused + attempts, f"{attempts} reconnection attempts", WAIT)
        change()
        fake_apiserver.compact()  # ... and the restarted server's watch cache starts empty
        relay.up()
        outages.append(relay.rejected - refused)

    run_job(fake_operator, outage, followers)
    for follower in followers:
        assert_followed(follower)
    assert fake_apiserver.count("tfjobs", "list") > lists_before  # 410 Gone after the restart: relisted


def test_log_lines_written_while_the_api_server_is_down_are_shown_once(launch, fake_apiserver, fake_operator, relay):
    """A log stream cut by an API server restart is opened again from the time of its last
    line (the kubelet's timestamps, sinceTime): every line comes once, in order, also those
    of the second the stream resumed in, which the kubelet serves again; the rest of a
    container restarted meanwhile is read as the previous instance, then the new one's."""
    submit = launch("submit", "--name", "mnist", "--workers", "2", "--ps", "1")
    wait_for(lambda: watches_open(fake_apiserver), "the launcher's watches", WAIT)
    fake_operator.create_pods("mnist")
    for pod in PODS:
        fake_operator.start(pod)
    fake_operator.set_condition("mnist", "Running")
    logs = launch("logs", "mnist", "--replica", "all", "-f")
    fake_operator.log("mnist-chief-0", "step 1")
    fake_operator.log("mnist-worker-1", "worker step 1")
    for follower, line in ((submit, "[chief-0] step 1"), (logs, "[chief-0] step 1"), (logs, "[worker-1] worker step 1")):
        follower.wait_for_line(line)
    refused = relay.rejected
    relay.down()  # every stream reset; the lines below are kept by the "kubelet" meanwhile
    fake_operator.log("mnist-chief-0", "step 2", "step 3")
    fake_operator.log("mnist-worker-1", "worker's last line")
    fake_operator.crash("mnist-worker-1", code=137)
    fake_operator.start("mnist-worker-1")
    fake_operator.log("mnist-worker-1", "worker restarted")
    wait_for(lambda: relay.rejected >= refused + 4, "reconnection attempts", WAIT)
    relay.up()
    fake_operator.log("mnist-chief-0", "step 4")
    for follower in (submit, logs):
        follower.wait_for_line("[chief-0] step 4")
    logs.wait_for_line("[worker-1] worker restarted")
    for pod in PODS:
        if "-ps-" not in pod:
            fake_operator.exit(pod, 0)
    fake_operator.set_condition("mnist", "Succeeded")
    code, lines, err = logs.finish()
    assert code == 0, err
    assert [line for line in lines if line.startswith("[chief-0]")] == [f"[chief-0] step {n}" for n in range(1, 5)]
    assert [line for line in lines if line.startswith("[worker-1]")] == [
        "[worker-1] worker step 1", "[worker-1] worker's last line", "[worker-1] worker restarted"], lines
    code, lines, err = submit.finish()
    assert code == 0, err
    assert [line for line in lines if line.startswith("[chief-0] step")] == [f"[chief-0] step {n}" for n in range(1, 5)]


def test_a_log_stream_followed_with_since_resumes_from_its_last_line_alone(launch, fake_apiserver, fake_operator,
                                                                            relay):
    """`logs -f --since 1h` cut by an API server restart asks again from the time of its last
    line (sinceTime) without --since's sinceSeconds: the API server refuses a log request
    with both ("at most one of sinceTime or sinceSeconds"), and the rest of the log would be
    lost without a word."""
    submit = launch("submit", "--name", "mnist", "--workers", "1", "--detach")
    assert submit.finish()[0] == 0
    fake_operator.create_pods("mnist")
    for pod in ("mnist-chief-0", "mnist-worker-0"):
        fake_operator.start(pod)
    fake_operator.set_condition("mnist", "Running")
    logs = launch("logs", "mnist", "--replica", "chief-0", "-f", "--since", "1h")
    fake_operator.log("mnist-chief-0", "step 1")
    logs.wait_for_line("[chief-0] step 1")
    refused = relay.rejected
    relay.down()
    fake_operator.log("mnist-chief-0", "step 2")
    wait_for(lambda: relay.rejected >= refused + 2, "reconnection attempts", WAIT)
    relay.up()
    fake_operator.log("mnist-chief-0", "step 3")
    logs.wait_for_line("[chief-0] step 3")
    fake_operator.exit("mnist-chief-0", 0)
    fake_operator.set_condition("mnist", "Succeeded")
    code, lines, err = logs.finish()
    assert code == 0, err
    assert lines == ["[chief-0] step 1", "[chief-0] step 2", "[chief-0] step 3"]
    asked = [r.query for r in fake_apiserver.requests if r.verb == "log"]
    assert any("sinceTime" in query for query in asked), asked  # resumed
    assert [query for query in asked if "sinceTime" in query and "sinceSeconds" in query] == []
    assert all(query.get("sinceSeconds") == "3600" for query in asked if "sinceTime" not in query)
