"""The chart renders the same TFJob and NetworkPolicy as the launcher: values_for(spec) ->
helm template (the real helm binary) == render(spec) and render_network_policy(spec),
after dropping only the labels Helm generates."""
from __future__ import annotations

import pytest

from launcher.render import render, render_network_policy
from launcher.spec import JobSpec, ReplicaSpec
from tests.support.chart import TRICKY, helm_docs, helm_tfjob, spec_matrix, without_generated_labels

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
