"""The job's NetworkPolicy through the CLI: rendered from the second Jinja template, shown
by `submit --dry-run` for the k8s backend, handed to the backend by `submit`, left out with
--no-network-policy and on the local backend (FakeBackend, no cluster)."""
from __future__ import annotations

import json

import yaml

import pytest

from launcher.render import render_network_policy
from launcher.spec import JobSpec, ReplicaSpec
from tests.support.fakes.backend import FakeBackend

pytestmark = pytest.mark.usefixtures("cli_env")  # the packaged TFJob CRD, a per-session schema cache

TRICKY = JobSpec(name="x-y", namespace="ml-team", replicas={"Worker": ReplicaSpec(1)},
                 labels={"example.com/team": "on"})  # YAML 1.1 boolean-looking value stays a string


def test_policy_admits_only_the_jobs_pods_on_the_tf_port():
    policy = render_network_policy(TRICKY)
    job_pods = {"matchLabels": {"training.kubeflow.org/job-name": "x-y"}}
    assert policy == {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": "x-y-tf-port", "namespace": "ml-team", "labels": TRICKY.all_labels()},
        "spec": {"podSelector": job_pods, "policyTypes": ["Ingress"],
                 "ingress": [{"from": [{"podSelector": job_pods}], "ports": [{"protocol": "TCP", "port": 2222}]}]}}


def test_dry_run_shows_the_policy_after_the_tfjob(cli):
    result = cli("submit", "--name", "mnist", "--backend", "k8s", "--dry-run", backend=FakeBackend(name="k8s"))
    assert result.code == 0, result.err
    docs = list(yaml.safe_load_all(result.out))
    assert [d["kind"] for d in docs] == ["TFJob", "NetworkPolicy"]
    assert docs[1]["metadata"]["name"] == "mnist-tf-port"


def test_dry_run_as_json_is_a_list_of_both_as_kubectl_prints_them(cli):
    import json

    result = cli("submit", "--name", "mnist", "--backend", "k8s", "--dry-run", "-o", "json",
                 backend=FakeBackend(name="k8s"))
    assert result.code == 0, result.err
    listed = json.loads(result.out)
    assert (listed["apiVersion"], listed["kind"]) == ("v1", "List")
    assert [d["kind"] for d in listed["items"]] == ["TFJob", "NetworkPolicy"]


def test_no_network_policy_leaves_it_out_of_dry_run_and_submit(cli):
    result = cli("submit", "--name", "mnist", "--backend", "k8s", "--dry-run", "--no-network-policy",
                 backend=FakeBackend(name="k8s"))
    assert [d["kind"] for d in yaml.safe_load_all(result.out)] == ["TFJob"]
    backend = FakeBackend(name="k8s")
    assert cli("submit", "--name", "mnist", "--backend", "k8s", "--detach", "--no-network-policy",
               backend=backend).code == 0
    assert backend.network_policies == [None]


def test_submit_hands_the_policy_to_the_k8s_backend_only(cli):
    k8s = FakeBackend(name="k8s")
    assert cli("submit", "--name", "mnist", "--backend", "k8s", "--detach", backend=k8s).code == 0
    (policy,) = k8s.network_policies
    assert policy["kind"] == "NetworkPolicy" and policy["metadata"]["namespace"] == "default"
    local = FakeBackend(name="local")
    assert cli("submit", "--name", "mnist", "--backend", "local", "--detach", backend=local).code == 0
    assert local.network_policies == [None]  # the local backend isolates by network namespace instead


def test_a_server_dry_run_sends_and_prints_the_tfjob_and_its_policy_as_its_help_says(cli, capsys):
    """kubectl's --dry-run=server sends every object, and so does the launcher's: the TFJob,
    then its NetworkPolicy, both printed as the server answered (two YAML documents, or json's
    v1 List); without the policy, the TFJob alone."""
    from launcher.cli import main

    backend = FakeBackend(name="k8s")
    result = cli("submit", "--name", "mnist", "--backend", "k8s", "--dry-run=server", backend=backend)
    assert result.code == 0, result.err
    printed = list(yaml.safe_load_all(result.out))
    assert [d["kind"] for d in printed] == ["TFJob", "NetworkPolicy"] and len(backend.dry_runs) == 1
    assert all(d["status"] == {"dryRun": True} for d in printed)  # the server's answers, not the requests
    assert backend.network_policies[0]["metadata"]["name"] == "mnist-tf-port"
    as_json = cli("submit", "--name", "mnist", "--backend", "k8s", "--dry-run=server", "-o", "json", backend=backend)
    assert [d["kind"] for d in json.loads(as_json.out)["items"]] == ["TFJob", "NetworkPolicy"]
    alone = cli("submit", "--name", "mnist", "--backend", "k8s", "--dry-run=server", "--no-network-policy",
                backend=backend)
    assert [d["kind"] for d in yaml.safe_load_all(alone.out)] == ["TFJob"] and backend.network_policies[-1] is None
    with pytest.raises(SystemExit):
        main(["submit", "--help"])
    assert "server has the API server validate both (dryRun=All" in " ".join(capsys.readouterr().out.split())
