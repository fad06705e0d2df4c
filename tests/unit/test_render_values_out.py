"""`render --values-out FILE` writes the Helm values of the same JobSpec, and nothing on error."""
from __future__ import annotations

import yaml

import pytest

from launcher.cli import build_parser
from launcher.cli.args import build_spec
from launcher.helm_values import values_for

pytestmark = pytest.mark.usefixtures("cli_env")  # the packaged TFJob CRD, a per-session schema cache

ARGV = ["--name", "mnist", "--workers", "3", "--gpus-per-worker", "1", "--accelerator", "nvidia-tesla-t4",
        "--env", "A=1", "--", "--train-steps", "10"]


def test_values_file_matches_values_for_the_spec(cli, tmp_path):
    target = tmp_path / "values.yaml"
    result = cli("render", *ARGV[:-3], "--values-out", str(target), *ARGV[-3:])
    assert result.code == 0, result.err
    args = build_parser().parse_args(["render", *ARGV[:-3]])
    spec, _ = build_spec(args, tuple(ARGV[-2:]))
    assert yaml.safe_load(target.read_text()) == values_for(spec)
    assert result.manifest()["kind"] == "TFJob"
    assert [p.name for p in tmp_path.iterdir()] == ["values.yaml"]  # no temp file left


def test_bad_input_writes_no_values(cli, tmp_path):
    target = tmp_path / "values.yaml"
    result = cli("render", "--name", "Bad_Name", "--values-out", str(target))
    assert result.code == 2 and result.out == ""
    assert not target.exists()


def test_missing_directory_is_reported(cli, tmp_path):
    result = cli("render", "--name", "mnist", "--values-out", str(tmp_path / "nope" / "values.yaml"))
    assert result.code == 2 and result.out == ""
    assert result.err.startswith("error: --values-out: ")


@pytest.mark.parametrize("given, message", [
    ("", "error: --values-out: is empty; give the file to write, e.g. --values-out job.values.yaml"),
    ("DIR", "error: --values-out: 'DIR' is a directory; give a file in it, e.g. 'DIR/values.yaml'"),
])
def test_an_empty_or_directory_target_is_one_line(cli, tmp_path, given, message):
    given = given.replace("DIR", str(tmp_path))
    result = cli("render", "--name", "a", "--values-out", given)
    assert (result.code, result.out, result.err) == (2, "", message.replace("DIR", str(tmp_path)) + "\n")
    assert list(tmp_path.iterdir()) == []


def test_the_file_gets_the_umasks_mode_or_keeps_its_own_and_a_link_is_written_through(cli, tmp_path):
    import os

    fresh = tmp_path / "fresh.yaml"
    old = os.umask(0o022)
    try:
        assert cli("render", "--name", "a", "--values-out", str(fresh)).code == 0
    finally:
        os.umask(old)
    assert fresh.stat().st_mode & 0o777 == 0o644  # not mkstemp's 0600: `helm -f` run by another user reads it
    kept = tmp_path / "kept.yaml"
    kept.write_text("old\n")
    kept.chmod(0o640)
    link = tmp_path / "link.yaml"
    link.symlink_to(kept)
    assert cli("render", "--name", "b", "--values-out", str(link)).code == 0
    assert link.is_symlink() and yaml.safe_load(kept.read_text())["jobName"] == "b"
    assert kept.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh.yaml", "kept.yaml", "link.yaml"]


def test_values_file_is_accepted_by_real_helm_with_yaml_boolean_lookalikes(cli, tmp_path):
    """Helm's YAML reads bare y/on/off as booleans: the file must quote every string."""
    from tests.support.tools import ROOT, helm_template

    target = tmp_path / "values.yaml"
    result = cli("render", "--name", "mnist", "--workers", "2", "--env", "A=y", "--env", "B=on",
                 "--values-out", str(target), "--", "--image-feature", "off")
    assert result.code == 0, result.err
    docs = helm_template(ROOT / "charts" / "tfjob", [target], tmp_path / "helm-home")
    tfjob = next(doc for doc in docs if doc["kind"] == "TFJob")
    container = tfjob["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert container["env"] == [{"name": "A", "value": "y"}, {"name": "B", "value": "on"}]
    assert container["args"][-1] == "off"


def test_values_out_with_volumes_renders_the_same_tfjob_in_real_helm(cli, tmp_path):
    from tests.support.tools import ROOT, helm_template

    target = tmp_path / "values.yaml"
    result = cli("render", "--name", "mnist", "--workers", "2", "--volume", "runs:/mnt/runs",
                 "--volume", "on:/mnt/on:ro", "--values-out", str(target))
    assert result.code == 0, result.err
    docs = helm_template(ROOT / "charts" / "tfjob", [target], tmp_path / "helm-home")
    tfjob = next(doc for doc in docs if doc["kind"] == "TFJob")
    for rtype, replica in result.manifest()["spec"]["tfReplicaSpecs"].items():
        pod = tfjob["spec"]["tfReplicaSpecs"][rtype]["template"]["spec"]
        assert pod["volumes"] == replica["template"]["spec"]["volumes"]
        assert pod["containers"][0]["volumeMounts"] == replica["template"]["spec"]["containers"][0]["volumeMounts"]
        assert pod["volumes"][1] == {"name": "pvc-1", "persistentVolumeClaim": {"claimName": "on"}}


def test_a_full_disk_names_the_values_file_and_keeps_the_old_one(cli, tmp_path, monkeypatch):
    """It was `error: cannot write the output: No space left on device`, read as stdout's."""
    import errno
    import os

    target = tmp_path / "values.yaml"
    target.write_text("old: values\n")

    def full(*args):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr("launcher.cli.submit.os.replace", full)
    result = cli("render", "--name", "mnist", "--values-out", str(target))
    assert (result.code, result.out) == (1, "")
    assert result.err == f"error: --values-out: cannot write {target}: No space left on device\n"
    assert target.read_text() == "old: values\n" and [p.name for p in tmp_path.iterdir()] == ["values.yaml"]
