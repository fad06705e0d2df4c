"""charts/tfjob with the real helm binary: lint --strict, the TFJob CRD schema, the
security defaults, the optional ServiceAccount (Workload Identity) and the NOTES.
(Pod security of every shipped pod template: test_manifests.py.)"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from kubernetes_validate import validate as validate_k8s
from kubernetes_validate.utils import latest_version

from launcher.helm_values import values_yaml
from launcher.render import context
from launcher.schemas import packaged_path
from launcher.validate import validate
from tests.support.chart import CHART, helm_tfjob, spec_matrix, write_values
from tests.support.tools import helm_template, run_helm


def crd() -> Path:
    return packaged_path("tfjob")


def pod_specs(doc: dict):
    for replica in doc["spec"]["tfReplicaSpecs"].values():
        yield replica["template"]["spec"]


def test_lint_strict_with_defaults(tmp_path):
    done = run_helm(["lint", "--strict", str(CHART)], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[WARNING]" not in done.stdout and "[ERROR]" not in done.stdout


def test_lint_strict_with_launcher_values(tmp_path):
    values = tmp_path / "values.yaml"
    values.write_text(values_yaml(spec_matrix()["gpu-workers"]), encoding="utf-8")
    done = run_helm(["lint", "--strict", str(CHART), "--values", str(values)], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_default_values_render_a_valid_ps_job(tmp_path):
    docs = {d["kind"]: d for d in helm_template(CHART, [], tmp_path, release="mnist", namespace="training")}
    assert sorted(docs) == ["NetworkPolicy", "TFJob"]  # the NetworkPolicy is on by default
    tfjob = docs["TFJob"]
    assert validate(tfjob, crd=crd())
    assert (tfjob["metadata"]["name"], tfjob["metadata"]["namespace"]) == ("mnist-tfjob", "training")
    assert {t: r["replicas"] for t, r in tfjob["spec"]["tfReplicaSpecs"].items()} == {"Chief": 1, "PS": 1, "Worker": 2}
    image = tfjob["spec"]["tfReplicaSpecs"]["Chief"]["template"]["spec"]["containers"][0]["image"]
    assert image == "tfjob-trainer:0.1.0"  # tag defaults to the chart appVersion


@pytest.mark.parametrize("case", list(spec_matrix()))
def test_rendered_tfjob_passes_the_crd_schema(case, tmp_path):
    assert validate(helm_tfjob(spec_matrix()[case], tmp_path), crd=crd())


def test_chart_security_defaults_are_the_launchers():
    defaults = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    ctx = context(spec_matrix()["plain-ps"])
    assert defaults["podSecurityContext"] == ctx["pod_security_context"]
    assert defaults["securityContext"] == ctx["container_security_context"]


def test_created_service_account_carries_workload_identity(tmp_path):
    gsa = "trainer@my-project.iam.gserviceaccount.com"
    values = write_values(tmp_path, {"jobName": "wi", "serviceAccount": {
        "create": True, "gcpServiceAccount": gsa, "annotations": {"team": "ml"}}})
    docs = {d["kind"]: d for d in helm_template(CHART, [values], tmp_path / "h", release="r", namespace="training")}
    account = docs["ServiceAccount"]
    assert account["metadata"]["name"] == "r-tfjob"
    assert account["metadata"]["namespace"] == "training"
    assert account["metadata"]["annotations"] == {"iam.gke.io/gcp-service-account": gsa, "team": "ml"}
    assert account["automountServiceAccountToken"] is False
    validate_k8s(account, latest_version(), strict=True)
    assert {pod["serviceAccountName"] for pod in pod_specs(docs["TFJob"])} == {"r-tfjob"}
    assert validate(docs["TFJob"], crd=crd())


def test_existing_service_account_is_used_not_created(tmp_path):
    values = write_values(tmp_path, {"serviceAccount": {"create": False, "name": "tfjob-trainer"}})
    docs = {d["kind"]: d for d in helm_template(CHART, [values], tmp_path / "h")}
    assert sorted(docs) == ["NetworkPolicy", "TFJob"]
    assert {pod["serviceAccountName"] for pod in pod_specs(docs["TFJob"])} == {"tfjob-trainer"}


@pytest.mark.parametrize("account", [{}, {"create": False, "name": "tfjob-trainer"}, {"create": True}])
def test_trainer_pods_mount_no_api_token_whichever_account(account, tmp_path):
    """The trainer needs no API token, and whoever reaches a replica's TF port could read it
    (no authentication there): the pods mount none, from the namespace's default account
    or a named one too (the launcher's TFJob likewise, test_helm_parity); automount: true asks."""
    docs = {d["kind"]: d for d in helm_template(CHART, [write_values(tmp_path, {"serviceAccount": account})],
                                                tmp_path / "h")}
    assert {pod["automountServiceAccountToken"] for pod in pod_specs(docs["TFJob"])} == {False}
    opted = write_values(tmp_path, {"serviceAccount": {**account, "automount": True}}, "opted.yaml")
    tfjob = [d for d in helm_template(CHART, [opted], tmp_path / "h2") if d["kind"] == "TFJob"][0]
    assert {pod["automountServiceAccountToken"] for pod in pod_specs(tfjob)} == {True}


def test_network_policy_admits_the_jobs_own_pods_on_the_tf_port_and_can_be_left_out(tmp_path):
    docs = {d["kind"]: d for d in helm_template(CHART, [write_values(tmp_path, {"jobName": "np"})],
                                                tmp_path / "h", release="r", namespace="ml")}
    policy = docs["NetworkPolicy"]
    validate_k8s(policy, latest_version(), strict=True)
    job_pods = {"matchLabels": {"training.kubeflow.org/job-name": "np"}}
    assert (policy["metadata"]["name"], policy["metadata"]["namespace"]) == ("np-tf-port", "ml")
    assert policy["spec"] == {"podSelector": job_pods, "policyTypes": ["Ingress"],
                              "ingress": [{"from": [{"podSelector": job_pods}],
                                           "ports": [{"protocol": "TCP", "port": 2222}]}]}
    off = write_values(tmp_path, {"networkPolicy": {"enabled": False}}, "off.yaml")
    assert [d["kind"] for d in helm_template(CHART, [off], tmp_path / "h2")] == ["TFJob"]


def notes(tmp_path, values: dict, *flags: str) -> str:
    """NOTES.txt as `helm install` (or, with --is-upgrade, `helm upgrade`) prints it for release
    rel in namespace ml. helm template does not print NOTES.txt, so it renders a copy of the chart
    where NOTES.txt becomes a named template included into a ConfigMap."""
    chart = tmp_path / "tfjob"
    shutil.copytree(CHART, chart)
    text = (chart / "templates" / "NOTES.txt").read_text(encoding="utf-8")
    (chart / "templates" / "NOTES.txt").unlink()
    (chart / "templates" / "_notes.tpl").write_text('{{- define "notes" -}}\n' + text + "{{- end }}\n")
    (chart / "templates" / "notes.yaml").write_text(
        'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\ndata:\n  notes: {{ include "notes" . | toJson }}\n')
    done = run_helm(["template", "rel", str(chart), "--namespace", "ml", "--show-only", "templates/notes.yaml",
                     "--values", str(write_values(tmp_path, values)), *flags], tmp_path / "h")
    assert done.returncode == 0, done.stderr
    return yaml.safe_load(done.stdout)["data"]["notes"]


def test_notes_tell_how_to_follow_status_and_logs(tmp_path):
    text = notes(tmp_path, {"jobName": "mnist", "jobDir": "gs://bucket/mnist"})
    for line in ("kubectl get tfjob mnist -n ml",
                 "kubectl logs -n ml -l training.kubeflow.org/job-name=mnist,"
                 "training.kubeflow.org/replica-type=chief -f",
                 "python -m launcher status mnist -n ml -w",
                 "python -m launcher logs mnist -n ml --replica all -f",
                 "helm uninstall rel -n ml",
                 '"gs://bucket/mnist"'):
        assert line in text, f"NOTES.txt lacks {line!r}:\n{text}"
    assert text.startswith('TFJob "mnist" submitted') and "does not restart" not in text


def test_notes_follow_worker_0_when_the_job_has_no_chief(tmp_path):
    """A MultiWorkerMirrored job (workers only) has no chief pod: the chief's selector would
    find nothing; worker 0 is the one the launcher's logs shows then."""
    text = notes(tmp_path, {"jobName": "mwms", "replicas": {"chief": {"count": 0}, "ps": {"count": 0},
                                                            "worker": {"count": 4}}})
    assert "replica-type=chief" not in text, text
    assert ("kubectl logs -n ml -l training.kubeflow.org/job-name=mwms,training.kubeflow.org/replica-type=worker,"
            "training.kubeflow.org/replica-index=0 -f") in text, text


def test_notes_after_an_upgrade_say_the_running_job_is_not_restarted(tmp_path):
    """training-operator (v1.9: ReconcilePods creates missing pods only, a finished job is left
    alone) applies no new spec to running replicas nor reruns a finished job: `helm upgrade`
    with new values changes only the object, which NOTES.txt says, with what reruns it."""
    text = notes(tmp_path, {"jobName": "mnist"}, "--is-upgrade")
    assert text.startswith('TFJob "mnist" updated in namespace "ml".'), text
    assert "does not restart a job whose spec changed" in text and "a finished job does not" in text
    assert "give a new jobName and jobDir" in text


@pytest.mark.parametrize("release, values, job, service_account", [
    ("r", {}, "r-tfjob", "r-tfjob"),
    ("tfjob-mnist", {}, "tfjob-mnist", "tfjob-mnist"),  # a release named after the chart is not repeated
    ("r", {"nameOverride": "trainer"}, "r-trainer", "r-trainer"),
    ("r", {"fullnameOverride": "mnist"}, "mnist", "mnist"),
    ("r", {"fullnameOverride": "mnist", "jobName": "run-1", "serviceAccount": {"create": True, "name": "sa-1"}},
     "run-1", "sa-1"),
])
def test_names_follow_helm_create(release, values, job, service_account, tmp_path):
    """The fullname (jobName's default and the created ServiceAccount's) as `helm create` makes it."""
    values = {**values, "serviceAccount": {"create": True, **values.get("serviceAccount", {})}}
    docs = {d["kind"]: d for d in helm_template(CHART, [write_values(tmp_path, values)], tmp_path / "h", release=release)}
    assert docs["TFJob"]["metadata"]["name"] == job and docs["NetworkPolicy"]["metadata"]["name"] == f"{job}-tf-port"
    assert docs["ServiceAccount"]["metadata"]["name"] == service_account
    assert {pod["serviceAccountName"] for pod in pod_specs(docs["TFJob"])} == {service_account}
    name = values.get("nameOverride", "tfjob")
    assert docs["TFJob"]["metadata"]["labels"]["app.kubernetes.io/name"] == name


def test_a_release_name_the_job_cannot_take_is_refused(tmp_path):
    """Helm takes release names starting with a digit; a TFJob's replicas' services cannot
    (DNS-1035): the render fails naming jobName, not the operator later."""
    done = run_helm(["template", "1st-run", str(CHART)], tmp_path)
    assert done.returncode != 0 and "kind: TFJob" not in done.stdout
    assert ('jobName: "1st-run-tfjob" is not a DNS-1035 label; set jobName to lowercase letters, digits and '
            "'-', starting with a letter") in done.stderr, done.stderr
    assert run_helm(["template", "1st-run", str(CHART), "--set", "jobName=first-run"], tmp_path).returncode == 0


def test_image_pull_policy_reaches_every_container(tmp_path):
    """image.pullPolicy, a chart value the launcher has no flag for: given, on every replica; empty, left out."""
    given = write_values(tmp_path, {"image": {"repository": "gcr.io/p/trainer", "pullPolicy": "Always"}})
    tfjob = [d for d in helm_template(CHART, [given], tmp_path / "h") if d["kind"] == "TFJob"][0]
    assert [pod["containers"][0]["imagePullPolicy"] for pod in pod_specs(tfjob)] == ["Always"] * 3
    default = [d for d in helm_template(CHART, [], tmp_path / "h2") if d["kind"] == "TFJob"][0]
    assert all("imagePullPolicy" not in pod["containers"][0] for pod in pod_specs(default))


def test_an_older_cluster_is_refused_by_kube_version(tmp_path):
    """Chart.yaml's kubeVersion: an older cluster gets Helm's line naming the requirement."""
    done = run_helm(["template", "rel", str(CHART), "--kube-version", "1.24.0"], tmp_path)
    assert done.returncode != 0 and "chart requires kubeVersion: >=1.25.0-0" in done.stderr, done.stderr
    assert run_helm(["template", "rel", str(CHART), "--kube-version", "1.25.0"], tmp_path).returncode == 0
