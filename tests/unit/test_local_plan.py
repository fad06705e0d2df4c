"""What the local backend would run per replica: command, env, TF_CONFIG, dry run."""
import json
import os
import re
import resource
import shlex
import subprocess
import sys

import pytest

from launcher.backends.base import BackendError
from launcher.backends.local import LocalBackend
from launcher.backends.local.logs import (Dating, Tail, Times, follow_logs, previous_span, read_logs, read_span,
                                         rfc3339)
from launcher.backends.local.runs import ended_instances
from launcher.events import LogEnded, LogLine
from launcher.backends.local.plan import (REPO_ROOT, SERVER_NICE, build_plan, child_env, command_line, proxy_env,
                                         replica_argv)
from launcher.render import render
from launcher.spec import JobSpec, ReplicaSpec
from launcher.tfconfig import tf_config


def job(command=(), **replicas):
    counts = replicas or {"Chief": 1, "PS": 1, "Worker": 2}
    return render(JobSpec(name="plan", replicas={k: ReplicaSpec(v) for k, v in counts.items()},
                          env={"MODE": "x y"}, trainer_args=("--train-steps", "5"),
                          job_dir="/tmp/out", command=command))


def test_default_command_is_the_trainer_module():
    plan = build_plan(job(), environ={})
    assert plan["replicas"][0]["argv"] == [sys.executable, "-m", "trainer.task", "--job-dir", "/tmp/out",
                                           "--train-steps", "5"]
    assert [r["id"] for r in plan["replicas"]] == ["chief-0", "ps-0", "worker-0", "worker-1"]
    assert plan["deciding"] == "chief-0"


@pytest.mark.parametrize("command, first", [
    (["python", "s.py"], sys.executable), (["python3", "s.py"], sys.executable),
    (["python3.11", "s.py"], sys.executable), (["/bin/sh", "-c"], "/bin/sh"),
    (["python2", "s.py"], "python2"), (["python3-config", "--libs"], "python3-config"),  # other programs
])
def test_container_command_runs_with_python_mapped_to_this_interpreter(command, first):
    argv = replica_argv({"command": command, "args": ["a"]})
    assert argv == [first, *command[1:], "a"]


def test_tf_config_is_the_operator_one_on_distinct_local_ports():
    tfjob = job()
    plan = build_plan(tfjob, environ={})
    addresses = {r["id"]: r["address"] for r in plan["replicas"]}
    assert len(set(addresses.values())) == 4 and all(a.startswith("127.0.0.1:") for a in addresses.values())
    for rep in plan["replicas"]:
        expected = tf_config(tfjob, rep["type"], rep["index"],
                             lambda rt, i: addresses[f"{rt}-{i}"])
        assert rep["env"]["TF_CONFIG"] == expected
    assert json.loads(plan["replicas"][3]["env"]["TF_CONFIG"])["task"] == {"type": "worker", "index": 1}


def test_single_replica_gets_no_tf_config_even_if_inherited():
    plan = build_plan(job(Worker=1), environ={})
    assert plan["replicas"][0]["env"]["TF_CONFIG"] is None
    assert plan["deciding"] == "worker-0"
    env = child_env(plan["replicas"][0]["env"], {"TF_CONFIG": "stale", "HOME": "/h"})
    assert "TF_CONFIG" not in env and env["HOME"] == "/h"


def test_the_containers_own_pythonpath_comes_before_the_launchers_checkout():
    """--package-path puts the package's parent on the container's PYTHONPATH: it must come
    first, or a package of the user's named like one of the checkout's would not be the one run."""
    tfjob = job()
    for spec in tfjob["spec"]["tfReplicaSpecs"].values():
        spec["template"]["spec"]["containers"][0]["env"].append({"name": "PYTHONPATH", "value": "/code"})
    env = build_plan(tfjob, environ={"PYTHONPATH": "/extra"})["replicas"][0]["env"]
    assert env["PYTHONPATH"].split(os.pathsep) == ["/code", REPO_ROOT, "/extra"]


def test_env_has_container_env_repo_on_pythonpath_and_unbuffered_output():
    env = build_plan(job(), environ={"PYTHONPATH": "/extra"})["replicas"][1]["env"]
    assert env["MODE"] == "x y"
    assert env["PYTHONPATH"].split(os.pathsep) == [REPO_ROOT, "/extra"]
    assert env["PYTHONUNBUFFERED"] == "1"
    assert "no_proxy" not in env


def test_proxy_gets_local_hosts_excluded():
    assert proxy_env({}) == {}
    assert proxy_env({"https_proxy": "http://p:3128"}) == {"no_proxy": "127.0.0.1,localhost",
                                                           "NO_PROXY": "127.0.0.1,localhost"}
    assert proxy_env({"HTTPS_PROXY": "http://p", "NO_PROXY": "corp,localhost"})["no_proxy"] == \
        "corp,localhost,127.0.0.1"


@pytest.mark.parametrize("replicas, nice", [
    # parameter-server training: the servers yield the CPU to the chief and an evaluator
    ({"Chief": 1, "PS": 1, "Worker": 2, "Evaluator": 1},
     {"chief-0": 0, "ps-0": SERVER_NICE, "worker-0": SERVER_NICE, "worker-1": SERVER_NICE, "evaluator-0": 0}),
    ({"Chief": 1, "PS": 2, "Worker": 1}, {"chief-0": 0, "ps-0": SERVER_NICE, "ps-1": SERVER_NICE,
                                          "worker-0": SERVER_NICE}),
    # synchronous training and one process: nobody yields
    ({"Worker": 2}, {"worker-0": 0, "worker-1": 0}),
    ({"Chief": 1, "Worker": 2}, {"chief-0": 0, "worker-0": 0, "worker-1": 0}),
    ({"Chief": 1}, {"chief-0": 0}),
])
def test_under_ps_the_servers_run_at_a_lower_priority_than_the_chief(replicas, nice):
    assert SERVER_NICE > 0
    assert {r["id"]: r["nice"] for r in build_plan(job(**replicas), environ={})["replicas"]} == nice


def test_manifest_without_replicas_is_refused():
    with pytest.raises(BackendError, match="tfReplicaSpecs"):
        build_plan({"spec": {}}, environ={})


def test_dry_run_annotates_each_replica_and_starts_nothing(tmp_path):
    backend = LocalBackend(runs_dir=str(tmp_path))
    tfjob = job()
    (annotated,) = backend.dry_run(tfjob)
    notes = annotated["metadata"]["annotations"]
    assert sorted(notes) == [f"local.tfjob-launcher/{r}" for r in ("chief-0", "ps-0", "worker-0", "worker-1")]
    assert notes["local.tfjob-launcher/ps-0"].startswith("TF_CONFIG='{\"cluster\":")
    assert "-m trainer.task --job-dir /tmp/out --train-steps 5" in notes["local.tfjob-launcher/ps-0"]
    assert f"' nice -n {SERVER_NICE} /" in notes["local.tfjob-launcher/ps-0"]  # what the supervisor does
    assert " nice " not in notes["local.tfjob-launcher/chief-0"]
    assert "annotations" not in tfjob["metadata"]  # the input is not modified
    assert list(tmp_path.iterdir()) == []


def test_default_job_dir_is_next_to_the_logs(tmp_path):
    backend = LocalBackend(runs_dir=str(tmp_path))
    assert backend.default_job_dir("mnist", "team") == str(tmp_path / "team" / "mnist" / "output")


@pytest.mark.parametrize("field, value", [
    ("name", "../../etc"), ("name", ".."), ("name", "."), ("name", ""), ("name", "a\x00b"),
    ("namespace", ".."), ("namespace", "a/b"),
])
def test_bad_names_cannot_escape_the_runs_dir(tmp_path, field, value):
    """A job named `..` is the runs dir itself (its delete would remove every job's folder)."""
    tfjob = job()
    tfjob["metadata"][field] = value
    runs = tmp_path / "runs"
    with pytest.raises(BackendError, match=f"^metadata.{field}: .* cannot name a local job; use a DNS-1035 name"):
        LocalBackend(runs_dir=str(runs)).submit(tfjob)
    assert not runs.exists()  # nothing written


def test_a_dry_runs_command_line_reads_back_as_the_argv_it_runs():
    """The dry run's annotation is a shell line: arguments with spaces or quotes are quoted."""
    argv = [sys.executable, "-m", "trainer.task", "--message", "two words", "it's", "$(HOME)", ""]
    line = command_line({"env": {"TF_CONFIG": '{"task": 1}'}, "nice": 3, "argv": argv})
    assert shlex.split(line) == ['TF_CONFIG={"task": 1}', "nice", "-n", "3", *argv]


def test_a_crlf_lines_carriage_return_is_not_part_of_it(tmp_path):
    path = tmp_path / "w.log"
    path.write_bytes(b"progress\r\ndone\r\n")
    assert [l.line for l in Tail("worker-0", path).read()] == ["progress", "done"]


def test_tail_0_shows_no_line_as_kubectls(tmp_path):
    path = tmp_path / "w.log"
    path.write_bytes(b"one\ntwo\nthree")
    assert list(read_logs([Tail("worker-0", path)], 0)) == []
    assert [l.line for l in read_logs([Tail("worker-0", path)], 2)] == ["two", "three"]
    assert [l.line for l in read_logs([Tail("worker-0", path)], 5)] == ["one", "two", "three"]


def test_tail_yields_whole_lines_and_the_rest_at_the_end(tmp_path):
    path = tmp_path / "w.log"
    tail = Tail("worker-0", path)
    assert tail.read() == []  # not started yet
    path.write_bytes(b"one\ntw")
    assert [l.line for l in tail.read()] == ["one"]
    with open(path, "ab") as f:
        f.write(b"o\nthree")
    assert [(l.replica, l.line) for l in tail.read()] == [("worker-0", "two")]
    assert [l.line for l in tail.flush()] == ["three"]


def test_follow_marks_each_process_end_where_its_lines_end(tmp_path):
    """The race the live view met: a process ended and the next one wrote its first lines
    before the follower read; the supervisor's recorded size puts the end between them,
    with the ended process's unterminated last line before its end."""
    path = tmp_path / "w.log"
    first, second = b"one\ncrashed", b"two\nthree\n"
    path.write_bytes(first + second)
    states = iter([(False, {"w": [len(first)]}), (True, {"w": [len(first), len(first) + len(second)]})])
    got = list(follow_logs([Tail("w", path)], lambda: next(states), ends=True))
    assert got == [LogLine("w", "one"), LogLine("w", "crashed"), LogEnded("w", 0),
                   LogLine("w", "two"), LogLine("w", "three"), LogEnded("w", 1)]
    # with --tail the file's last lines come first: the ends already read past follow, and
    # the unterminated line of a process still writing stays whole
    first = b"one\ncrashed\n"
    path.write_bytes(first + b"two\nthr")
    states = iter([(False, {"w": [len(first)]}), (True, {"w": [len(first), len(first) + len(second)]})])
    with open(path, "ab") as f:
        got = []
        for item in follow_logs([Tail("w", path)], lambda: next(states), tail_lines=1, ends=True):
            got.append(item)
            if item == LogEnded("w", 0):
                f.write(b"ee\n")
                f.flush()
    assert got == [LogLine("w", "two"), LogEnded("w", 0), LogLine("w", "three"), LogEnded("w", 1)]


def test_read_keeps_an_ended_processs_unterminated_last_line_its_own(tmp_path):
    path = tmp_path / "w.log"
    path.write_bytes(b"one\ncrashed" + b"two\n")  # the next process appends to the same file
    assert [l.line for l in read_logs([Tail("w", path)], ends={"w": [11]})] == ["one", "crashed", "two"]
    assert [l.line for l in read_logs([Tail("w", path)], tail_lines=2, ends={"w": [11, None]})] == ["crashed", "two"]
    assert [l.line for l in read_logs([Tail("w", path)])] == ["one", "crashedtwo"]


def test_follow_without_recorded_sizes_ends_after_what_is_written(tmp_path):
    path = tmp_path / "w.log"
    path.write_bytes(b"one\ntwo\n")
    states = iter([(True, {"w": [None]})])
    got = list(follow_logs([Tail("w", path)], lambda: next(states), ends=True))
    assert got == [LogLine("w", "one"), LogLine("w", "two"), LogEnded("w", 0)]
    states = iter([(True, {"w": [4]})])
    assert list(follow_logs([Tail("w", path)], lambda: next(states))) == [LogLine("w", "one"), LogLine("w", "two")]


def test_ended_instances_gives_each_ended_process_its_recorded_size():
    rows = [{"id": "chief-0", "phase": "Running", "restarts": 0, "log_ends": []},
            {"id": "worker-0", "phase": "Pending", "restarts": 2, "log_ends": [10, 25]},
            {"id": "worker-1", "phase": "Failed", "restarts": 1, "log_ends": [7]},  # never restarted
            {"id": "ps-0", "phase": "Succeeded", "restarts": 1}]  # written by an earlier version
    assert ended_instances({"replicas": rows}) == {
        "chief-0": [], "worker-0": [10, 25], "worker-1": [7, None], "ps-0": [None, None]}


@pytest.mark.parametrize("phase, restarts, ends, span", [
    ("Running", 0, [], None), ("Pending", 0, [], None), ("Failed", 0, [11], None),
    ("Running", 1, [11], (0, 11)), ("Pending", 1, [11], (0, 11)),  # a restart waits: the one that ended
    ("Running", 2, [11, 20], (11, 20)), ("Succeeded", 1, [11, 20], (0, 11)), ("Failed", 2, [11, 20, 26], (11, 20)),
])
def test_the_previous_process_is_the_kubelets_last_state(tmp_path, phase, restarts, ends, span):
    path = tmp_path / "w.log"
    path.write_bytes(b"one\ncrashed" + b"two\nthree\n" + b"four\n")  # processes end at 11, 20, 26
    found = previous_span({"id": "w", "phase": phase, "restarts": restarts}, ends)
    if span is None:
        assert found == f"replica w has no process before its current one (restarts {restarts})"
        return
    assert found == span
    lines = {(0, 11): ["one", "crashed"], (11, 20): ["two", "three"]}[span]
    assert [l.line for l in read_span(Tail("w", path), found)] == lines
    assert [l.line for l in read_span(Tail("w", path), found, tail_lines=1)] == lines[-1:]


def test_no_previous_process_is_told_apart_without_recorded_ends():
    assert "earlier launcher" in previous_span({"id": "w", "phase": "Succeeded", "restarts": 1}, [None, None])


def dated_log(tmp_path) -> tuple:
    """A log whose lines one, two, three end at bytes 4, 8, 14, then "four" unterminated
    (18), with the supervisor's records of when the log reached 4, 8 and 14 bytes, and a
    record still being written (no newline yet)."""
    log, times = tmp_path / "w.log", tmp_path / "w.times"
    log.write_bytes(b"one\ntwo\nthree\nfour")
    times.write_text("4 100.0\n8 200.5\n14 300.25\n18 4")
    os.utime(log, (400.0, 400.0))  # "four" has no record yet: the log's last write dates it
    return log, times


def dated(log, times, **dating) -> Tail:
    return Tail("w", log, Times(times, log), Dating(**dating))


def test_a_lines_time_is_the_first_record_that_holds_the_whole_line(tmp_path):
    log, times = dated_log(tmp_path)
    tail = dated(log, times, stamp=True)
    assert [l.line for l in tail.read() + tail.flush()] == [
        "1970-01-01T00:01:40.000000000Z one", "1970-01-01T00:03:20.500000000Z two",
        "1970-01-01T00:05:00.250000000Z three", "1970-01-01T00:06:40.000000000Z four"]
    assert [l.line for l in read_span(dated(log, times, stamp=True), (4, 14))] == [
        "1970-01-01T00:03:20.500000000Z two", "1970-01-01T00:05:00.250000000Z three"]
    assert [l.line for l in Tail("w", log, Times(times, log)).read()] == ["one", "two", "three"]  # nothing asked
    assert rfc3339(1.9999996) == "1970-01-01T00:00:02.000000000Z"


def test_since_keeps_the_lines_dated_at_or_after_it(tmp_path):
    log, times = dated_log(tmp_path)
    assert [l.line for l in read_logs([dated(log, times, since=200.5)])] == ["two", "three", "four"]
    assert [l.line for l in read_logs([dated(log, times, since=200.6)], tail_lines=1)] == ["four"]
    assert [l.line for l in read_logs([dated(log, times, since=500.0)])] == []
    states = iter([(True, {"w": [8]})])
    assert list(follow_logs([dated(log, times, since=300.0, stamp=True)], lambda: next(states),
                            ends=True)) == [LogEnded("w", 0), LogLine("w", "1970-01-01T00:05:00.250000000Z three"),
                                            LogLine("w", "1970-01-01T00:06:40.000000000Z four")]


def test_a_follower_reads_the_records_written_after_it_started(tmp_path):
    log, times = tmp_path / "w.log", tmp_path / "w.times"
    log.write_bytes(b"one\n")
    times.write_text("4 100.0\n")
    tail = dated(log, times, stamp=True)
    assert [l.line for l in tail.read()] == ["1970-01-01T00:01:40.000000000Z one"]
    with open(log, "ab") as out:
        out.write(b"two\n")
    with open(times, "a") as out:
        out.write("garbage\n8 200.0\n")  # a record it cannot read is skipped
    assert [l.line for l in tail.read()] == ["1970-01-01T00:03:20.000000000Z two"]


def test_running_out_of_ports_or_descriptors_is_one_line_not_a_traceback():
    """free_ports holds a socket per replica while it picks: under `ulimit -n 64` 200 cannot all be open."""
    probe = ("from launcher.backends.base import BackendError\n"
             "from launcher.backends.local.plan import free_ports\n"
             "try:\n    free_ports(200)\nexcept BackendError as err:\n    print(err)\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64)))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert re.fullmatch(r"cannot reserve a 127\.0\.0\.1 port for each of the job's 200 replicas \(\d+ reserved: "
                        r"Too many open files\); use fewer replicas here, raise the open-file limit \(ulimit -n\), "
                        r"or a cluster \(--backend k8s\)\n", done.stdout), done.stdout
