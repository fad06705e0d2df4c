"""The chart renders the same TFJob and NetworkPolicy as the launcher: values_for(spec) ->
helm template (the real helm binary) == render(spec) and render_network_policy(spec),
after dropping only the labels Helm generates."""
from __future__ import annotations

import pytest

from launcher.render import render, render_network_policy
from launcher.spec import JobSpec, ReplicaSpec, SecretEnv, Volume
from tests.support.chart import CHART, DIGEST, TRICKY, helm_docs, helm_tfjob, spec_matrix, without_generated_labels
from tests.support.tools import helm_template

@pytest.mark.parametrize("case", list(spec_matrix()))
def test_chart_renders_the_launchers_tfjob(case, tmp_path):
    spec = spec_matrix()[case]
    chart = helm_tfjob(spec, tmp_path)
    assert chart["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
    assert without_generated_labels(chart) == without_generated_labels(render(spec))


@pytest.mark.parametrize("case", ["plain-ps", "tricky-strings", "service-account", "no-network-policy"])
def test_chart_renders_the_launchers_network_policy(case, tmp_path):
    spec = {**spec_matrix(), "no-network-policy": JobSpec(name="open", replicas={"Worker": ReplicaSpec(2)},
                                                          network_policy=False)}[case]
    docs = helm_docs(spec, tmp_path)
    launcher = render_network_policy(spec)
    if launcher is None:
        assert "NetworkPolicy" not in docs
        return
    assert launcher["spec"]["podSelector"] == {"matchLabels": {"training.kubeflow.org/job-name": spec.name}}
    assert without_generated_labels(docs["NetworkPolicy"]) == without_generated_labels(launcher)


def test_tricky_strings_arrive_unchanged(tmp_path):
    """Not only equal to the launcher: equal to the input (neither side mangled them)."""
    spec = spec_matrix()["tricky-strings"]
    container = helm_tfjob(spec, tmp_path)["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert [e["value"] for e in container["env"]] == list(TRICKY)
    assert container["args"] == ["--job-dir", spec.job_dir, *TRICKY, "--flag=a b"]
    assert container["image"] == spec.image


def test_names_yaml_would_read_as_other_types_stay_strings(tmp_path):
    """Kubernetes names may be 'true', 'null', '1e3', 'on': YAML 1.1 reads them bare as a
    boolean, null or number, so each is quoted on both sides; and a gang without
    minAvailable needs every replica (4 here), on both sides."""
    spec = JobSpec(name="yaml-names", namespace="null", service_account="true", priority_class="1e3", queue_name="on",
                   gang=True, gang_queue="no", labels={"y": "on", "012": "null"}, node_selector={"true": "false"},
                   replicas={"Chief": ReplicaSpec(1), "PS": ReplicaSpec(1), "Worker": ReplicaSpec(2)},
                   volumes=(Volume("null", "/mnt/null"),), secret_env=(SecretEnv("Y", "true", "012"),))
    chart = without_generated_labels(helm_tfjob(spec, tmp_path))
    assert chart == without_generated_labels(render(spec))
    pod = chart["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]
    assert (pod["serviceAccountName"], pod["priorityClassName"], pod["nodeSelector"]) == ("true", "1e3", {"true": "false"})
    assert pod["volumes"][0]["persistentVolumeClaim"] == {"claimName": "null"}
    assert chart["metadata"]["namespace"] == "null"
    assert chart["spec"]["runPolicy"]["schedulingPolicy"] == {"minAvailable": 4, "priorityClass": "1e3", "queue": "no"}


@pytest.mark.usefixtures("cli_env")
def test_the_charts_defaults_are_the_launchers(cli, tmp_path):
    """`helm install mnist charts/tfjob` with no values runs the job `render --name mnist-tfjob`
    (its defaults: chief, one ps, two workers, the same image, policies and security)."""
    chart = [d for d in helm_template(CHART, [], tmp_path, release="mnist", namespace="training") if d["kind"] == "TFJob"]
    launcher = cli("render", "--backend", "k8s", "--name", "mnist-tfjob", "-n", "training")
    assert launcher.code == 0, launcher.err
    assert without_generated_labels(chart[0]) == without_generated_labels(launcher.manifest())


def test_an_image_pinned_by_digest_alone_gets_no_tag(tmp_path):
    """image.digest without image.tag: the image as given (the appVersion tag is only the default of no pin)."""
    spec = JobSpec(name="pinned", image=f"gcr.io/p/trainer@{DIGEST}", replicas={"Worker": ReplicaSpec(1)})
    chart = helm_tfjob(spec, tmp_path)
    assert chart["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["image"] == spec.image
    assert without_generated_labels(chart) == without_generated_labels(render(spec))
