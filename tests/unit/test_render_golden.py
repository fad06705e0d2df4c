"""Golden TFJobs from `python -m launcher render`, each also valid against the real CRD.

Regenerate after an intended change with UPDATE_GOLDEN=1 and review the diff.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from launcher.validate import validate
from tests.support.cli_env import CRD

pytestmark = pytest.mark.usefixtures("cli_env")  # the packaged TFJob CRD, a per-session schema cache

GOLDEN = Path(__file__).parent / "golden"

STANDARD_1 = """\
trainingInput:
  scaleTier: STANDARD_1
  jobDir: gs://ml-bucket/census
  args: ["--train-steps", "2000"]
labels:
  team: ml
"""

CUSTOM = """\
trainingInput:
  scaleTier: CUSTOM
  masterType: n1-highcpu-16
  workerType: n1-highcpu-16
  parameterServerType: n1-highmem-8
  evaluatorType: n1-highcpu-16
  workerCount: 3
  parameterServerCount: "2"
  evaluatorCount: 1
  useChiefInTfConfig: true
  masterConfig:
    imageUri: gcr.io/my-project/trainer:2.0
    acceleratorConfig: {count: 1, type: NVIDIA_TESLA_T4}
  workerConfig:
    acceleratorConfig: {count: 2, type: NVIDIA_TESLA_T4}
  jobDir: gs://ml-bucket/custom
  scheduling: {maxRunningTime: 7200s}
"""

CASES = {
    "ps_chief_4_workers": ["--name", "mnist-ps", "--workers", "4", "--ps", "1", "--chief", "1",
                           "--image", "gcr.io/my-project/trainer:1.0", "--job-dir", "gs://ml-bucket/mnist",
                           "--", "--train-steps", "1000"],
    "gpu_workers": ["--name", "mnist-gpu", "--workers", "2", "--ps", "1", "--gpus-per-worker", "1",
                    "--gpus-per-chief", "1", "--accelerator", "nvidia-tesla-t4", "--cpu", "ps=2",
                    "--memory", "ps=4Gi", "--cpu", "worker=4", "--node-selector", "pool=train"],
    "evaluator": ["--name", "mnist-eval", "--workers", "2", "--ps", "0", "--evaluator", "1",
                  "--restart-policy", "ExitCode", "--clean-pod-policy", "All", "--ttl-seconds", "3600",
                  "--active-deadline-seconds", "7200", "--backoff-limit", "3", "--env", "LOG_LEVEL=debug",
                  "--label", "team=ml", "--service-account", "trainer"],
    "volumes": ["--name", "mnist-pvc", "--workers", "2", "--ps", "1", "--job-dir", "/mnt/runs/mnist-pvc",
                "--volume", "training-runs:/mnt/runs", "--volume", "mnist.data:/mnt/data/:ro",
                "--", "--data-dir", "/mnt/data/mnist"],
    "cloudml_standard_1": ["--name", "census", "--config", "{STANDARD_1}"],
    "cloudml_custom": ["--name", "custom-job", "--config", "{CUSTOM}"],
}


def _argv(case: str, tmp_path: Path) -> list[str]:
    files = {}
    for key, text in (("STANDARD_1", STANDARD_1), ("CUSTOM", CUSTOM)):
        files[key] = tmp_path / f"{key.lower()}.yaml"
        files[key].write_text(text)
    return [arg.format(**files) if arg.startswith("{") else arg for arg in CASES[case]]


@pytest.mark.parametrize("case", sorted(CASES))
def test_render_matches_golden_and_crd(case, cli, tmp_path):
    result = cli("render", *_argv(case, tmp_path))
    assert result.code == 0, result.err
    manifest = result.manifest()
    golden = GOLDEN / f"{case}.yaml"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(result.out)
    assert manifest == yaml.safe_load(golden.read_text())
    assert validate(manifest, crd=CRD) is True


def test_json_output_is_the_same_object(cli, tmp_path):
    as_yaml = cli("render", *_argv("gpu_workers", tmp_path)).manifest()
    as_json = cli("render", "-o", "json", *_argv("gpu_workers", tmp_path))
    import json

    assert json.loads(as_json.out) == as_yaml


def test_gpu_settings_only_on_gpu_replicas():
    manifest = yaml.safe_load((GOLDEN / "gpu_workers.yaml").read_text())
    specs = manifest["spec"]["tfReplicaSpecs"]
    for rtype in ("Chief", "Worker"):
        pod = specs[rtype]["template"]["spec"]
        assert pod["nodeSelector"] == {"pool": "train", "cloud.google.com/gke-accelerator": "nvidia-tesla-t4"}
        assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    ps = specs["PS"]["template"]["spec"]
    assert ps["nodeSelector"] == {"pool": "train"}
    assert "tolerations" not in ps
    assert "limits" not in ps["containers"][0]["resources"]
    assert specs["Worker"]["template"]["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}


def test_cloudml_tiers_become_replica_counts():
    counts = {case: {t: s["replicas"] for t, s in yaml.safe_load((GOLDEN / f"{case}.yaml").read_text())
                     ["spec"]["tfReplicaSpecs"].items()}
              for case in ("cloudml_standard_1", "cloudml_custom")}
    assert counts["cloudml_standard_1"] == {"Chief": 1, "PS": 3, "Worker": 4}
    assert counts["cloudml_custom"] == {"Chief": 1, "PS": 2, "Worker": 3, "Evaluator": 1}


@pytest.mark.parametrize("case", sorted(CASES))
def test_pods_mount_no_api_token(case):
    """The trainer needs no API token, and whoever reaches a replica's TF port (no
    authentication there) could read it: no pod mounts one, whichever service account."""
    manifest = yaml.safe_load((GOLDEN / f"{case}.yaml").read_text())
    assert all(replica["template"]["spec"]["automountServiceAccountToken"] is False
               for replica in manifest["spec"]["tfReplicaSpecs"].values())


def test_volumes_are_mounted_in_every_replica():
    manifest = yaml.safe_load((GOLDEN / "volumes.yaml").read_text())
    for replica in manifest["spec"]["tfReplicaSpecs"].values():
        pod = replica["template"]["spec"]
        assert pod["volumes"] == [{"name": "pvc-0", "persistentVolumeClaim": {"claimName": "training-runs"}},
                                  {"name": "pvc-1", "persistentVolumeClaim": {"claimName": "mnist.data"}}]
        assert pod["containers"][0]["volumeMounts"] == [
            {"name": "pvc-0", "mountPath": "/mnt/runs", "readOnly": False},
            {"name": "pvc-1", "mountPath": "/mnt/data/", "readOnly": True}]


def test_gke_scheduling_flags_reach_the_tfjob(cli):
    result = cli("render", "--name", "queued", "--success-policy", "AllWorkers", "--queue-name", "team-a",
                 "--priority-class", "high-priority", "--gang", "--gang-timeout-seconds", "300")
    assert result.code == 0, result.err
    tfjob = result.manifest()
    assert tfjob["spec"]["successPolicy"] == "AllWorkers"
    assert tfjob["spec"]["runPolicy"]["suspend"] is True
    assert tfjob["spec"]["runPolicy"]["schedulingPolicy"] == {"minAvailable": 4, "priorityClass": "high-priority",
                                                              "scheduleTimeoutSeconds": 300}
    assert tfjob["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    for replica in tfjob["spec"]["tfReplicaSpecs"].values():
        template = replica["template"]
        assert "kueue.x-k8s.io/queue-name" not in template["metadata"]["labels"]
        assert template["metadata"]["annotations"] == {"sidecar.istio.io/inject": "false"}
        assert template["spec"]["priorityClassName"] == "high-priority"
    assert validate(tfjob, crd=CRD) is True
    queued = cli("render", "--name", "gang", "--gang", "--gang-queue", "research", "--gang-min-available", "3")
    assert queued.code == 0, queued.err
    assert queued.manifest()["spec"]["runPolicy"]["schedulingPolicy"] == {"minAvailable": 3, "queue": "research"}
    assert validate(queued.manifest(), crd=CRD) is True
    with_sidecar = cli("render", "--name", "mesh", "--istio-sidecar").manifest()
    assert all("annotations" not in r["template"]["metadata"] for r in with_sidecar["spec"]["tfReplicaSpecs"].values())


def test_user_strings_reach_the_tfjob_as_given(cli):
    """Env values and arguments the YAML reader would take apart (specials, 1.1 booleans, line
    separators, U+0085, characters beyond U+FFFF) arrive in the printed TFJob as given."""
    from tests.support.chart import TRICKY

    env = [f"--env=V{i}={value}" for i, value in enumerate(TRICKY)]
    result = cli("render", "--name", "tricky", "--image", "gcr.io/p/trainer:1", *env, "--", *TRICKY)
    assert result.code == 0, result.err
    for replica in result.manifest()["spec"]["tfReplicaSpecs"].values():
        container = replica["template"]["spec"]["containers"][0]
        assert [e["value"] for e in container["env"]] == list(TRICKY)
        assert container["args"] == list(TRICKY)


def test_printed_strings_that_go_reads_otherwise_are_quoted(cli):
    """kubectl and helm read YAML with Go's YAML 1.1, where a bare y or n is a boolean and 1e3,
    1.5e3, 0o17 or 0X1F a number (PyYAML reads them all as text): `render | kubectl apply -f -`
    gets the strings given only if the printed TFJob quotes them."""
    go_not_text = ["y", "N", "1e3", "1.5e3", "-.5e1", "0o17", "0X1F", "0B11"]
    result = cli("render", "--name", "quoted", "--image", "gcr.io/p/trainer:1", "--env", "FLAG=y", "--",
                 *go_not_text, "--train-steps")
    assert result.code == 0, result.err
    lines = [line.strip() for line in result.out.splitlines()]
    assert all(f"- '{value}'" in lines for value in go_not_text)
    assert "value: 'y'" in lines and "- --train-steps" in lines  # the rest as before


def test_every_value_in_the_launchers_templates_is_written_with_tojson():
    """The templates are data: every {{ }} of them goes through tojson, so no value (an image
    YAML would read as a number, a string with a line break) is left to YAML's reading."""
    import re
    from pathlib import Path

    import launcher

    templates = sorted((Path(launcher.__file__).parent / "templates").glob("*.j2"))
    assert {t.name for t in templates} >= {"tfjob.yaml.j2", "networkpolicy.yaml.j2"}
    raw = [(t.name, expr) for t in templates for expr in re.findall(r"{{.*?}}", t.read_text(), re.S)
           if not re.fullmatch(r"{{ [^{}|]+ \| tojson }}", expr)]
    assert raw == []


def test_characters_go_refuses_raw_are_escaped_in_the_printed_tfjob(cli):
    """DEL, C1 controls (U+0085 beyond), U+FFFE and U+FFFF in a string make Go's YAML (kubectl,
    helm) refuse the whole document ("control characters are not allowed"): the printed TFJob
    holds them (and U+2029) as \\u escapes, and they read back as given. PyYAML refuses them
    raw as well, so the template's JSON, which render reads back, must escape them too."""
    values = ["del\x7f", "csi\x9b[2J", "c1\x86\x9f", "para\u2029graph", "non\ufffechar", "end\uffff"]
    env = [f"--env=V{i}={value}" for i, value in enumerate(values)]
    result = cli("render", "--name", "escaped", "--image", "gcr.io/p/trainer:1", *env, "--", *values)
    assert result.code == 0, result.err
    assert not any(c in result.out for c in "\x7f\x86\x9b\x9f\u2029\ufffe\uffff")
    container = result.manifest()["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert [e["value"] for e in container["env"]] == values and container["args"] == values


@pytest.mark.parametrize("flag, field", [("--backoff-limit", "backoffLimit"),
                                         ("--ttl-seconds", "ttlSecondsAfterFinished")])
def test_a_run_policy_number_of_0_reaches_the_tfjob(cli, flag, field):
    """--backoff-limit 0 (fail at the first failure) and --ttl-seconds 0 (delete at the end)
    are settings, not their absence: left out, the operator's default applies (no limit,
    kept)."""
    result = cli("render", "--name", "zero", flag, "0")
    assert result.code == 0, result.err
    assert result.manifest()["spec"]["runPolicy"][field] == 0
    assert field not in cli("render", "--name", "unset").manifest()["spec"]["runPolicy"]
