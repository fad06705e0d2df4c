"""What the local backend's refusals tell a user to type next, through the CLI: a job
looked up in the wrong namespace, a name already taken outside `default`. Jobs are
folders in a runs dir of the test's own (no supervisor, no process)."""
from __future__ import annotations

import pytest

from launcher.backends.base import AlreadyExists
from launcher.backends.local import LocalBackend

pytestmark = pytest.mark.usefixtures("cli_env")

MANIFEST = {"apiVersion": "kubeflow.org/v1", "kind": "TFJob",
            "spec": {"tfReplicaSpecs": {"Worker": {"replicas": 1, "template": {"spec": {
                "containers": [{"name": "tensorflow", "image": "tfjob-trainer:0.1.0"}]}}}}}}


def backend_with(tmp_path, *jobs: tuple[str, str]) -> LocalBackend:
    """A local backend whose runs dir holds the jobs (namespace, name), not started."""
    backend = LocalBackend(runs_dir=str(tmp_path / "runs"))
    for namespace, name in jobs:
        manifest = {**MANIFEST, "metadata": {"name": name, "namespace": namespace}}
        backend.runs.job(name, namespace).create(manifest, {"replicas": []})
    return backend


@pytest.mark.parametrize("command", [("status",), ("logs",), ("delete",), ("delete", "--purge")])
def test_a_job_asked_for_in_the_wrong_namespace_names_the_one_it_is_in(cli, tmp_path, command):
    """`status nsjob` of a job submitted with -n a said `see list`, whose default namespace
    does not show it either."""
    backend = backend_with(tmp_path, ("a", "nsjob"))
    result = cli(*command, "nsjob", "--backend", "local", backend=backend)
    assert result.code == 1 and result.out == ""
    assert result.err.strip().endswith("no local job default/nsjob in "
                                       f"{backend.runs.root}; namespace a has one: add -n a"), result.err
    assert backend.runs.job("nsjob", "a").exists()


def test_a_name_in_several_other_namespaces_names_them_all(cli, tmp_path):
    backend = backend_with(tmp_path, ("a", "nsjob"), ("b", "nsjob"), ("c", "other"))
    result = cli("status", "nsjob", "-n", "c", "--backend", "local", backend=backend)
    assert result.code == 1
    assert result.err.strip().endswith("namespaces a, b have one each: add -n NAMESPACE"), result.err


def test_a_name_in_no_namespace_points_at_every_namespaces_list(cli, tmp_path):
    backend = backend_with(tmp_path, ("a", "other"))
    result = cli("status", "nsjob", "--backend", "local", backend=backend)
    assert result.code == 1
    assert result.err.strip().endswith("; see `list -A`"), result.err


def test_a_taken_name_outside_default_says_how_to_delete_it_there(tmp_path):
    """The refusal's `delete NAME` lacked -n: typed as said, it found no job."""
    backend = backend_with(tmp_path, ("a", "nsjob"))
    manifest = {**MANIFEST, "metadata": {"name": "nsjob", "namespace": "a"}}
    with pytest.raises(AlreadyExists) as refused:
        backend.submit(manifest)
    assert str(refused.value).endswith("use --replace or `delete nsjob -n a`")


def test_a_deleted_job_whose_outputs_were_kept_says_where_they_are(cli, tmp_path):
    """After `delete` kept a job's outputs, `status` or `tensorboard` of it said only that
    there is no such job, and `list -A` does not show it."""
    backend = backend_with(tmp_path, ("a", "kept"))
    run = backend.runs.job("kept", "a")
    (run.output / "checkpoints").mkdir(parents=True)
    assert backend.delete("kept", "a") == run.output
    result = cli("status", "kept", "-n", "a", "--backend", "local", backend=backend)
    assert result.code == 1
    assert result.err.strip().endswith(f"; see `list -A`; its outputs, kept when it was deleted, are in {run.output} "
                                       "(`delete kept -n a --purge` removes them)"), result.err
    assert cli("delete", "kept", "-n", "a", "--purge", "--backend", "local", backend=backend).code == 0
    assert "outputs" not in cli("status", "kept", "-n", "a", "--backend", "local", backend=backend).err


def test_previous_of_every_replica_when_none_restarted_is_one_line(cli, tmp_path):
    """`logs --replica all -p` of a job none of whose replicas restarted: one line naming the
    job (the message of one replica's, `replica chief-0 has no process before ...`, would
    send the user to that replica alone)."""
    backend = backend_with(tmp_path, ("default", "once"))
    run = backend.runs.job("once", "default")
    rows = [{"id": rid, "type": rtype, "index": 0, "phase": "Succeeded", "restarts": 0, "log_ends": [3]}
            for rid, rtype in (("chief-0", "Chief"), ("worker-0", "Worker"))]
    run.write_status({"name": "once", "namespace": "default", "supervisor": {"pid": 1, "start": 0}, "log_times": True,
                      "conditions": [{"type": "Succeeded", "status": "True", "reason": "TFJobSucceeded",
                                      "message": "", "time": ""}], "replicas": rows, "history": []})
    run.plan_path.write_text('{"replicas": [{"id": "chief-0"}, {"id": "worker-0"}], "uid": "u"}')
    result = cli("logs", "once", "--replica", "all", "-p", "--backend", "local", backend=backend)
    assert (result.code, result.out) == (1, "")
    assert result.err.strip().endswith("--previous: no replica of once has a process before its current one"), \
        result.err
    one = cli("logs", "once", "--replica", "worker-0", "-p", "--backend", "local", backend=backend)
    assert one.code == 1 and one.err.strip().endswith(
        "--previous: replica worker-0 has no process before its current one (restarts 0)"), one.err


def test_list_skips_a_job_being_deleted_meanwhile(cli, tmp_path):
    """`list` while another shell's `delete` removes a job's files (here: its plan gone,
    its manifest not yet): the other jobs, no traceback."""
    backend = backend_with(tmp_path, ("default", "staying"), ("default", "leaving"))
    backend.runs.job("leaving", "default").plan_path.unlink()
    result = cli("list", "--backend", "local", backend=backend)
    assert result.code == 0, result.err
    assert [line.split()[0] for line in result.out.splitlines()[1:]] == ["staying"]
