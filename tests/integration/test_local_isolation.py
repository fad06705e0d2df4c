"""Issue 22: the local backend's replicas run in a private network namespace, so their
unauthenticated TensorFlow ports are reachable by the job's own processes only.

Real trainer processes (`python -m launcher submit --backend local --workers 2 --ps 1`)
train on real MNIST while the test, from a network namespace of its own joined to the
host by a veth pair ("another machine on the LAN") and from the host's own non-loopback
address, finds every replica port closed; `ss -ltn` in the host namespace lists none of
them, while inside the replicas' namespace each one listens. The job still ends
Succeeded. Needs root for `ip netns` (skipped otherwise)."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading

import pytest

from launcher.backends.local import LocalBackend
from launcher.render import render
from launcher.spec import JobSpec, ReplicaSpec
from tests.support import netns
from tests.support.launcher_process import LAUNCHER
from tests.support.polling import wait_for
from tests.support.tools import ROOT

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(netns.unavailable() is not None, reason=str(netns.unavailable()))]
DATA = ROOT / "data" / "mnist"
TIMEOUT = 480.0
NAME = "mnist-isolated"


@pytest.fixture
def env(tmp_path):
    runs = tmp_path / "runs"
    yield dict(os.environ, TFJOB_RUNS_DIR=str(runs), TFJOB_LOCAL_STOP_GRACE_SECONDS="10", PYTHONPATH=str(ROOT))
    backend = LocalBackend(runs_dir=str(runs))
    for job in backend.list(None):
        backend.stop(job.name, job.namespace)


def submit(env: dict, *extra: str) -> subprocess.Popen:
    if not list(DATA.glob("train-*.tfrecord")):
        pytest.skip(f"no MNIST TFRecords in {DATA}; run scripts/setup")
    argv = [*LAUNCHER, "submit", "--backend", "local", "--name", NAME,
            "--workers", "2", "--ps", "1", *extra, "--", "--train-steps", "150", "--data-dir", str(DATA),
            "--threads", "1", "--log-every-steps", "5", "--steps-per-execution", "5",
            "--eval-every-steps", "0", "--checkpoint-every-steps", "50"]
    return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def training(env: dict) -> dict:
    """status.json once the chief logs training steps (every server is up by then)."""
    run = LocalBackend(runs_dir=env["TFJOB_RUNS_DIR"]).runs.job(NAME, "default")
    wait_for(lambda: run.log_path("chief-0").exists()
             and "Train [chief/0] step" in run.log_path("chief-0").read_text(errors="replace"),
             "the chief's first training step", TIMEOUT)
    return run.status()


def test_replica_ports_are_unreachable_from_outside_the_job_while_it_trains(env):
    with netns.peer_namespace("lan") as lan, netns.listener() as control:
        # the probe works: a port open on every interface of the host is reachable from "the LAN"
        assert lan.connect(lan.host_ip, control) == "open"
        job = submit(env)
        try:
            status = training(env)
            rows = {r["id"]: r for r in status["replicas"]}
            ports = {rid: int(r["address"].rsplit(":", 1)[1]) for rid, r in rows.items()}
            inside = netns.listening_ports(rows["chief-0"]["pid"])
            outside = netns.listening_ports()
            probes = {rid: (lan.connect(lan.host_ip, port), lan.connect(lan.peer_ip, port))
                      for rid, port in ports.items()}
            host_view = {rid: _connect_from_host(lan.host_ip, port) for rid, port in ports.items()}
            assert {r["phase"] for r in LocalBackend(runs_dir=env["TFJOB_RUNS_DIR"]).runs.job(
                NAME, "default").status()["replicas"]} == {"Running"}  # still training: the probes meant something
            out, err = job.communicate(timeout=TIMEOUT)
        finally:
            job.kill()
            job.wait()
    servers = {rid for rid in ports if rid != "chief-0"}  # ps and workers serve; the chief is the client
    assert servers <= {rid for rid, port in ports.items() if port in inside}, (ports, inside)
    assert not set(ports.values()) & outside, (ports, outside)
    assert all(p == ("ConnectionRefusedError", "ConnectionRefusedError") for p in probes.values()), probes
    assert all(v == "ConnectionRefusedError" for v in host_view.values()), host_view
    assert status["network"] == {"mode": "isolated"}
    assert job.returncode == 0, out[-3000:] + err[-3000:]
    assert "reachable from other machines" not in err


def _connect_from_host(host: str, port: int) -> str:
    import socket
    with socket.socket() as sock:
        sock.settimeout(3)
        try:
            sock.connect((host, port))
        except OSError as err:
            return type(err).__name__
    return "open"


def run_standin(tmp_path, argv: tuple[str, ...], name: str = "needs-net", timeout: float = 60,
                workers: int = 1) -> tuple[str, list, dict]:
    """Run a job of `workers` workers whose command is `argv` (python ...) on the real local
    backend: (final phase, the notes submit printed, status.json)."""
    notes: list[str] = []
    backend = LocalBackend(runs_dir=str(tmp_path / "runs"), note=notes.append)
    try:
        backend.submit(render(JobSpec(name=name, replicas={"Worker": ReplicaSpec(workers)}, command=argv)))
        wait_for(lambda: backend.status(name, "default").phase in ("Succeeded", "Failed"), "the job", timeout)
    finally:
        backend.stop(name, "default")
    return backend.status(name, "default").phase, notes, backend.runs.job(name, "default").status()


# worker-1 serves on its TF_CONFIG address; worker-0 connects to it there and says what it got.
PEERS = ("import json, os, socket, time\n"
         "tf = json.loads(os.environ['TF_CONFIG'])\n"
         "host, port = tf['cluster']['worker'][1].rsplit(':', 1)\n"
         "if tf['task']['index'] == 1:\n"
         "    server = socket.create_server((host, int(port)))\n"
         "    while True:\n"
         "        server.accept()[0].sendall(b'hello from worker-1')\n"
         "deadline = time.monotonic() + 20\n"
         "while True:\n"
         "    try:\n"
         "        with socket.create_connection((host, int(port)), timeout=2) as sock:\n"
         "            print('got:', sock.recv(100).decode())\n"
         "        break\n"
         "    except OSError as err:\n"
         "        if time.monotonic() > deadline:\n"
         "            print('no peer:', type(err).__name__)\n"
         "            break\n"
         "        time.sleep(0.1)\n")


def test_the_replicas_reach_each_other_on_127_0_0_1_in_their_namespace(tmp_path):
    """The namespace's loopback is up: a replica reaches another at its TF_CONFIG address
    (the real trainers' tests show the same, in minutes rather than a second)."""
    phase, notes, status = run_standin(tmp_path, ("python", "-c", PEERS), name="peers", workers=2)
    assert status["network"] == {"mode": "isolated"} and notes == []
    log = (tmp_path / "runs" / "default" / "peers" / "logs" / "worker-0.log").read_text()
    assert phase == "Succeeded" and log == "got: hello from worker-1\n", log


@pytest.mark.parametrize("env, words", [
    ({"TFJOB_LOCAL_SLIRP4NETNS": ""}, "install slirp4netns"),
    ({"https_proxy": "http://127.0.0.1:3128"}, "https_proxy points at this machine's loopback"),
])
def test_a_job_that_needs_the_network_but_cannot_have_it_isolated_says_so_once(tmp_path, monkeypatch, env, words):
    """A gs:// argument needs outbound network; without slirp4netns, or with a proxy on
    loopback, the replicas run unisolated and submit says so in one line (a stand-in
    command that only carries the URL: no traffic leaves)."""
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    phase, notes, status = run_standin(tmp_path, ("python", "-c", "import sys", "gs://some-bucket/data"))
    assert phase == "Succeeded"
    assert len(notes) == 1 and "reachable from other machines" in notes[0], notes
    assert "gs://some-bucket/data" in notes[0] and words in notes[0], notes
    assert status["network"]["mode"] == "host"


SERVE_AND_FETCH = """
import os, socket, sys, time, urllib.request
body = urllib.request.urlopen(sys.argv[1], timeout=20).read().decode()  # outbound, through slirp4netns
server = socket.socket(); server.bind(("0.0.0.0", 0)); server.listen()  # as TensorFlow binds
state = sys.argv[2]
open(os.path.join(state, "port.tmp"), "w").write(str(server.getsockname()[1]))
os.replace(os.path.join(state, "port.tmp"), os.path.join(state, "port"))
deadline = time.monotonic() + 60
while not os.path.exists(os.path.join(state, "done")) and time.monotonic() < deadline:
    time.sleep(0.05)
sys.exit(0 if body == "weights-from-the-lan" else 3)
"""


@pytest.mark.skipif(shutil.which("slirp4netns") is None, reason="slirp4netns is not installed")
def test_outbound_only_through_slirp4netns(tmp_path, monkeypatch):
    """A job that needs the network stays isolated with slirp4netns: its replica fetches a
    file from a server on "the LAN" (a test namespace), while a port it listens on (on
    every interface, as TensorFlow does) is refused from that same LAN."""
    for proxy in ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(proxy, raising=False)
    served, state = tmp_path / "www", tmp_path / "state"
    served.mkdir()
    state.mkdir()
    (served / "model.txt").write_text("weights-from-the-lan")
    with netns.peer_namespace("wan") as lan, netns.http_server(lan, served) as port:
        url = f"http://{lan.peer_ip}:{port}/model.txt"
        job = threading.Thread(target=lambda: result.append(run_standin(
            tmp_path, ("python", "-c", SERVE_AND_FETCH, url, str(state)), name="outbound")))
        result: list = []
        job.start()
        try:
            listening = int(wait_for(lambda: (state / "port").exists() and (state / "port").read_text(),
                                     "the replica's listening port", 60))
            probe = lan.connect(lan.host_ip, listening)
            on_host = listening in netns.listening_ports()
        finally:
            (state / "done").write_text("")
            job.join(timeout=90)
    phase, notes, status = result[0]
    assert probe == "ConnectionRefusedError" and not on_host
    assert status["network"] == {"mode": "isolated", "outbound": "slirp4netns"}
    assert phase == "Succeeded" and notes == []


# Connects to slirp4netns's address of the host's loopback (10.0.2.2) and says what came of it.
TO_HOST_LOOPBACK = ("import socket, sys\n"
                    "with socket.socket() as sock:\n"
                    "    sock.settimeout(5)\n"
                    "    try:\n"
                    "        sock.connect(('10.0.2.2', int(sys.argv[1])))\n"
                    "        print('reached')\n"
                    "    except OSError as err:\n"
                    "        print('not reached:', type(err).__name__)\n")


@pytest.mark.skipif(shutil.which("slirp4netns") is None, reason="slirp4netns is not installed")
def test_a_job_behind_slirp4netns_does_not_reach_this_machines_loopback(tmp_path, monkeypatch):
    """Outbound only: slirp4netns runs with host loopback disabled, so a service listening
    on this machine's 127.0.0.1 only is not the job's to reach (README: Security)."""
    for proxy in ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(proxy, raising=False)
    with socket.socket() as service:
        service.bind(("127.0.0.1", 0))
        service.listen()
        port = service.getsockname()[1]
        phase, notes, status = run_standin(tmp_path, ("python", "-c", TO_HOST_LOOPBACK, str(port),
                                                      "gs://some-bucket/data"), name="no-loopback")
    assert status["network"] == {"mode": "isolated", "outbound": "slirp4netns"} and notes == []
    log = (tmp_path / "runs" / "default" / "no-loopback" / "logs" / "worker-0.log").read_text()
    assert phase == "Succeeded" and log.startswith("not reached: "), log


def test_without_user_namespaces_the_job_runs_and_says_why_once(tmp_path):
    """A kernel that refuses user namespaces, for real: the launcher runs inside a user
    namespace whose user.max_user_namespaces is 0 (a per-namespace sysctl), so its
    supervisor cannot make one; the job still runs, and one line names the reason."""
    code = ("import sys, time\n"
            "from launcher.backends.local import LocalBackend\n"
            "from launcher.render import render\n"
            "from launcher.spec import JobSpec, ReplicaSpec\n"
            "b = LocalBackend(runs_dir=sys.argv[1], note=print)\n"
            "b.submit(render(JobSpec(name='no-userns', replicas={'Worker': ReplicaSpec(2)}, "
            "command=('python', '-c', 'pass'))))\n"
            "deadline = time.monotonic() + 60\n"
            "while b.status('no-userns', 'default').phase not in ('Succeeded', 'Failed') "
            "and time.monotonic() < deadline:\n    time.sleep(0.1)\n"
            "print('phase', b.status('no-userns', 'default').phase)\n")
    if subprocess.run(["unshare", "--user", "true"], capture_output=True, timeout=30).returncode != 0:
        pytest.skip("this machine has no user namespaces to restrict")
    shell = 'echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"'
    done = subprocess.run(["unshare", "--user", "--map-root-user", "sh", "-c", shell, "sh", sys.executable, "-c",
                           code, str(tmp_path / "runs")], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    lines = done.stdout.splitlines()
    assert lines[-1] == "phase Succeeded", done.stdout + done.stderr
    warnings = [line for line in lines if line.startswith("warning:")]
    assert len(warnings) == 1 and "user namespaces are disabled here" in warnings[0], lines
