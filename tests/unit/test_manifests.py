"""The plain manifests in k8s/: valid Kubernetes objects (kubernetes-validate, strict
schemas of a supported and the latest Kubernetes), least-privilege RBAC, one namespace,
the kind config, the operator kustomization; and every pod template the project ships
(TFJob replicas, served models) runs as non-root without privilege escalation and mounts no
Kubernetes API token."""
from __future__ import annotations

import pytest
import yaml
from kubernetes_validate import ValidationError, validate
from kubernetes_validate.utils import latest_version

from launcher.render import render
from launcher.serving import k8s as serving
from launcher.spec import JobSpec, ReplicaSpec
from tests.support.tools import ROOT, helm_template

K8S = ROOT / "k8s"
MANIFESTS = ("namespace.yaml", "serviceaccount.yaml", "rbac.yaml")
KUBERNETES_VERSIONS = ("1.30.0", latest_version())
OPERATOR_OVERLAY = "github.com/kubeflow/training-operator.git/manifests/overlays/standalone?ref=v1.9."


def documents(name: str) -> list[dict]:
    with (K8S / name).open(encoding="utf-8") as handle:
        return [doc for doc in yaml.safe_load_all(handle) if doc]


def objects() -> list[dict]:
    return [doc for name in MANIFESTS for doc in documents(name)]


def by_kind(kind: str) -> list[dict]:
    return [doc for doc in objects() if doc["kind"] == kind]


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("name", MANIFESTS)
def test_manifest_is_a_valid_kubernetes_object(name, version):
    docs = documents(name)
    assert docs, f"k8s/{name} is empty"
    for doc in docs:
        try:
            validate(doc, version, strict=True)
        except ValidationError as exc:
            pytest.fail(f"k8s/{name} {doc.get('kind')}: {str(exc).splitlines()[0]}", pytrace=False)


def test_every_object_lives_in_the_training_namespace():
    (namespace,) = by_kind("Namespace")
    name = namespace["metadata"]["name"]
    namespaced = [doc for doc in objects() if doc["kind"] != "Namespace"]
    assert namespaced and {doc["metadata"]["namespace"] for doc in namespaced} == {name}
    labels = namespace["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"


def test_launcher_role_is_least_privilege():
    (role,) = by_kind("Role")
    granted = {(group, resource, verb) for rule in role["rules"] for group in rule["apiGroups"]
               for resource in rule["resources"] for verb in rule["verbs"]}
    tfjob_verbs = ("create", "get", "list", "watch", "delete")  # no update/patch: the launcher never changes one
    assert granted == {("kubeflow.org", "tfjobs", v) for v in tfjob_verbs} | {
        ("", "pods", "get"), ("", "pods", "list"), ("", "pods", "watch"),
        ("", "pods/log", "get"), ("", "events", "list"), ("", "events", "watch")} | {
        ("networking.k8s.io", "networkpolicies", v) for v in ("create", "update")} | {
        ("serving.kserve.io", "inferenceservices", v) for v in ("create", "get", "list", "delete")} | {
        ("", "services/proxy", "get"), ("", "services/proxy", "create")}  # predict --backend k8s
    assert all("resourceNames" not in rule and "nonResourceURLs" not in rule for rule in role["rules"])


def test_role_binding_grants_the_role_to_an_existing_account():
    (role,), (binding,) = by_kind("Role"), by_kind("RoleBinding")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": role["metadata"]["name"]}
    accounts = {(a["metadata"]["namespace"], a["metadata"]["name"]) for a in by_kind("ServiceAccount")}
    for subject in binding["subjects"]:
        assert subject["kind"] == "ServiceAccount"
        assert (subject["namespace"], subject["name"]) in accounts


def test_trainer_account_mounts_no_api_token():
    trainer = [a for a in by_kind("ServiceAccount") if a["metadata"]["name"] == "tfjob-trainer"]
    assert trainer and trainer[0]["automountServiceAccountToken"] is False


def test_kind_cluster_config():
    (config,) = documents("kind-cluster.yaml")
    assert (config["apiVersion"], config["kind"]) == ("kind.x-k8s.io/v1alpha4", "Cluster")
    roles = [node["role"] for node in config["nodes"]]
    assert roles.count("control-plane") == 1 and set(roles) <= {"control-plane", "worker"}
    assert roles.count("worker") >= 1


def test_operator_kustomization_references_upstream_v1_9():
    (kustomization,) = documents("operator/kustomization.yaml")
    assert (kustomization["apiVersion"], kustomization["kind"]) == ("kustomize.config.k8s.io/v1beta1",
                                                                   "Kustomization")
    (resource,) = kustomization["resources"]
    assert resource.startswith(OPERATOR_OVERLAY), resource
    # the version the e2e and node tiers run (and the packaged CRD comes from), not another v1.9
    versions = dict(line.split("=", 1) for line in (ROOT / "scripts/controlplane/versions.env").read_text().splitlines()
                    if "=" in line and not line.startswith("#"))
    assert resource.endswith("?ref=" + versions["TRAINING_OPERATOR_VERSION"]), resource
    assert [p.name for p in (K8S / "operator").iterdir()] == ["kustomization.yaml"], "no upstream copies here"


def pod_specs(node):
    """Every pod spec (a mapping with `containers`) anywhere in a manifest."""
    if isinstance(node, dict):
        if isinstance(node.get("containers"), list):
            yield node
        for value in node.values():
            yield from pod_specs(value)
    elif isinstance(node, list):
        for value in node:
            yield from pod_specs(value)


def shipped_manifests(tmp_path) -> list[dict]:
    spec = JobSpec(name="mnist", replicas={"Chief": ReplicaSpec(1), "PS": ReplicaSpec(1),
                                           "Worker": ReplicaSpec(2, gpus=1), "Evaluator": ReplicaSpec(1)})
    chart = helm_template(ROOT / "charts" / "tfjob", [], tmp_path)
    return objects() + [render(spec)] + chart


def assert_restricted(pod: dict, containers: list[dict]) -> None:
    """Pod Security "restricted" for a pod's securityContext and its containers'; and no
    Kubernetes API token mounted (none of the project's servers calls the API)."""
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for container in containers:
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False
        assert context.get("privileged", False) is False
        assert "ALL" in context["capabilities"]["drop"]


def test_every_pod_meets_pod_security_restricted(tmp_path):
    pods = [pod for doc in shipped_manifests(tmp_path) for pod in pod_specs(doc)]
    assert len(pods) >= 7  # 4 launcher replica types + 3 chart ones
    for pod in pods:
        assert_restricted(pod, pod["containers"])


def test_served_models_meet_pod_security_restricted():
    """Both predictors of `serve --backend k8s`: the project's server (--runtime-image) and
    KServe's TensorFlow Serving runtime (its container's securityContext is the
    ServingRuntime's: the `model` entry, merged over it, gives none)."""
    for extra, containers in (({"runtime_image": "trainer:0.1.0"}, "containers"), ({}, None)):
        predictor = serving.render("mnist", "training", "gs://bucket/mnist/export", **extra)["spec"]["predictor"]
        assert_restricted(predictor, predictor[containers] if containers else [])
    # the project's server writes nothing of its own: a read-only root, /tmp an emptyDir
    predictor = serving.render("mnist", "training", "pvc://models/export", runtime_image="t:1")["spec"]["predictor"]
    (container,) = predictor["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}]
    assert predictor["volumes"] == [{"name": "tmp", "emptyDir": {}}]
