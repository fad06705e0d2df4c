"""Runs-directory state of the local backend: operator-style conditions, transitions,
atomic status writes, listing."""
import json

from launcher.backends.local.runs import (RunsDir, Transitions, history_after, job_status, set_condition,
                                          snapshot_entries, write_json_atomic)


def types(conditions):
    return [(c["type"], c["status"]) for c in conditions]


def test_conditions_follow_the_operator():
    conds = set_condition([], "Created", "TFJobCreated", "")
    conds = set_condition(conds, "Running", "TFJobRunning", "")
    assert types(conds) == [("Created", "True"), ("Running", "True")]
    conds = set_condition(conds, "Restarting", "TFJobRestarting", "")  # replaces Running
    assert types(conds) == [("Created", "True"), ("Restarting", "True")]
    conds = set_condition(conds, "Running", "TFJobRunning", "")  # replaces Restarting
    assert types(conds) == [("Created", "True"), ("Running", "True")]
    assert set_condition(conds, "Running", "TFJobRunning", "") == conds  # no change, same times
    conds = set_condition(conds, "Failed", "TFJobFailed", "boom")  # Running turns False
    assert types(conds) == [("Created", "True"), ("Running", "False"), ("Failed", "True")]
    assert set_condition(conds, "Succeeded", "TFJobSucceeded", "") == conds  # Failed is final


def status(conditions, phases):
    return {"name": "j", "namespace": "ns", "conditions": conditions,
            "replicas": [{"id": rid, "type": "Worker", "index": 0, "phase": phase, "restarts": restarts}
                         for rid, (phase, restarts) in phases.items()]}


def test_transitions_report_each_change_once_and_terminal_last():
    seen = Transitions()
    created = set_condition([], "Created", "TFJobCreated", "")
    running = set_condition(created, "Running", "TFJobRunning", "")
    first = seen.fresh(snapshot_entries(status(running, {"worker-0": ("Running", 0)})))
    assert len(first) == 3
    assert seen.fresh(snapshot_entries(status(running, {"worker-0": ("Running", 0)}))) == []
    restarting = set_condition(running, "Restarting", "TFJobRestarting", "")
    news = seen.fresh(snapshot_entries(status(restarting, {"worker-0": ("Pending", 1)})))
    assert [list(e) for e in news] == [["replica"], ["condition"]]  # Restarting after the replica that exited
    # Running again with the very same timestamp is still news: it was gone in between
    again = set_condition(restarting, "Running", "TFJobRunning", "")
    again[-1] = running[-1]
    assert [e["condition"]["type"] for e in seen.fresh(snapshot_entries(status(again, {})))] == ["Running"]
    done = set_condition(again, "Succeeded", "TFJobSucceeded", "")
    news = seen.fresh(snapshot_entries(status(done, {"worker-0": ("Succeeded", 1)})))
    assert [e.get("condition", {}).get("type", "replica") for e in news] == ["Running", "replica", "Succeeded"]


def test_history_after_adds_only_the_difference():
    before = status(set_condition([], "Created", "TFJobCreated", ""), {"worker-0": ("Running", 0)})
    before["history"] = snapshot_entries(before)
    after = {**before, "conditions": set_condition(before["conditions"], "Failed", "SupervisorLost", "")}
    assert history_after(before, after)[len(before["history"]):] == [{"condition": after["conditions"][-1]}]


def test_job_status_phase_is_the_last_true_condition():
    conds = set_condition(set_condition([], "Created", "TFJobCreated", ""), "Running", "TFJobRunning", "")
    conds = set_condition(conds, "Succeeded", "TFJobSucceeded", "")
    st = job_status(status(conds, {"worker-0": ("Succeeded", 2)}))
    assert st.phase == "Succeeded" and st.backend == "local"
    assert (st.replicas[0].replica, st.replicas[0].restarts, st.replicas[0].node) == ("worker-0", 2, "localhost")


def test_atomic_write_leaves_no_temporary_files(tmp_path):
    path = tmp_path / "status.json"
    write_json_atomic(path, {"a": 1})
    write_json_atomic(path, {"a": 2})
    assert json.loads(path.read_text()) == {"a": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["status.json"]


def test_runs_dir_lists_jobs_by_namespace(tmp_path, monkeypatch):
    monkeypatch.setenv("TFJOB_RUNS_DIR", str(tmp_path))
    runs = RunsDir()
    assert runs.root == tmp_path
    for ns, name in (("a", "one"), ("a", "two"), ("b", "three")):
        runs.job(name, ns).create({"metadata": {"name": name, "namespace": ns}}, {"replicas": []})
    (tmp_path / "a" / "stray").mkdir()  # not a job: no manifest
    assert [r.path.name for r in runs.jobs("a")] == ["one", "two"]
    assert [r.path.name for r in runs.jobs(None)] == ["one", "two", "three"]
    assert runs.jobs("missing") == []


def test_the_runs_dir_defaults_to_the_users_data_dir_and_expands_a_tilde(tmp_path, monkeypatch):
    """README: state lives in $TFJOB_RUNS_DIR (default ~/.local/share/tfjob-launcher/runs)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("TFJOB_RUNS_DIR", raising=False)
    assert RunsDir().root == tmp_path / ".local" / "share" / "tfjob-launcher" / "runs"
    monkeypatch.setenv("TFJOB_RUNS_DIR", "~/runs")
    assert RunsDir().root == tmp_path / "runs"
    assert RunsDir("~/other").root == tmp_path / "other"


def test_remove_keeps_a_non_empty_output_unless_asked(tmp_path):
    run = RunsDir(tmp_path).job("j", "ns")
    run.create({"kind": "TFJob"}, {})
    run.log_path("chief-0").write_text("log")
    (run.output / "export" / "1").mkdir(parents=True)
    (run.output / "export" / "1" / "saved_model.pb").write_bytes(b"model")
    assert run.remove(keep_output=True) == run.output
    assert sorted(p.name for p in run.path.iterdir()) == ["output"] and not run.exists()
    assert (run.output / "export" / "1" / "saved_model.pb").read_bytes() == b"model"
    assert run.remove() is None and not run.path.exists()


def test_remove_drops_an_empty_output(tmp_path):
    run = RunsDir(tmp_path).job("j", "ns")
    run.create({"kind": "TFJob"}, {})
    run.output.mkdir()
    assert run.remove(keep_output=True) is None and not run.path.exists()


def test_a_ctrl_c_while_stopping_is_ignored_until_the_stop_is_done():
    """procs.uninterrupted, around every stop after a Ctrl-C (submit's job, serve's model): a
    second Ctrl-C there left processes running and the model or job listed."""
    import os
    import signal

    from launcher.backends.local.procs import uninterrupted

    done, before = [], signal.getsignal(signal.SIGINT)
    with uninterrupted():
        os.kill(os.getpid(), signal.SIGINT)  # delivered at once to this (the main) thread: ignored
        done.append("stopped")
    assert done == ["stopped"] and signal.getsignal(signal.SIGINT) is before
