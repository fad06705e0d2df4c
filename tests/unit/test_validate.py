"""launcher.validate against the real TFJob CRD schema (the packaged copy) and operator rules."""
from __future__ import annotations

import copy

import pytest

from launcher import validate as v
from launcher.render import render
from launcher.spec import INT32_MAX, JobSpec, ReplicaSpec, SpecError, check_quantity
from tests.support.cli_env import CRD

pytestmark = pytest.mark.usefixtures("cli_env")  # the packaged TFJob CRD, a per-session schema cache

WORKER = ("spec", "tfReplicaSpecs", "Worker")
CONTAINER = (*WORKER, "template", "spec", "containers", 0)


@pytest.fixture(scope="module")
def tfjob() -> dict:
    spec = JobSpec(name="mnist", replicas={"Chief": ReplicaSpec(1), "PS": ReplicaSpec(1),
                                           "Worker": ReplicaSpec(2, gpus=1, cpu="2", memory="4Gi")},
                   accelerator="nvidia-tesla-t4", env={"A": "1"}, trainer_args=("--train-steps", "10"))
    return render(spec)


def mutated(tfjob: dict, path: tuple, value) -> dict:
    changed = copy.deepcopy(tfjob)
    node = changed
    for key in path[:-1]:
        node = node[key]
    if value is KeyError:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return changed


def test_rendered_tfjob_is_valid(tfjob):
    assert v.validate(tfjob, crd=CRD) is True


@pytest.mark.parametrize("path, value, field, fix", [
    ((*WORKER, "replicas"), "two", "spec.tfReplicaSpecs.Worker.replicas", "use an integer"),
    ((*WORKER, "replicas"), 2**31, "spec.tfReplicaSpecs.Worker.replicas", "int32 range"),
    ((*WORKER, "replica"), 2, "spec.tfReplicaSpecs.Worker", "unknown field(s) 'replica'"),
    ((*CONTAINER, "resources", "requests", "cpu"), "2 cores",
     "spec.tfReplicaSpecs.Worker.template.spec.containers[0].resources.requests.cpu", "Kubernetes quantity"),
    ((*CONTAINER, "resources", "requests", "cpu"), "2\n",
     "spec.tfReplicaSpecs.Worker.template.spec.containers[0].resources.requests.cpu", "Kubernetes quantity"),
    ((*CONTAINER, "ports", 0, "containerPort"), "2222",
     "spec.tfReplicaSpecs.Worker.template.spec.containers[0].ports[0].containerPort", "integer"),
    ((*CONTAINER, "env"), {"A": "1"}, "spec.tfReplicaSpecs.Worker.template.spec.containers[0].env", "array"),
    ((*CONTAINER, "name"), KeyError, "spec.tfReplicaSpecs.Worker.template.spec.containers[0]", "'name' is a required"),
    (("spec", "runPolicy", "backoffLimit"), 2**40, "spec.runPolicy.backoffLimit", "int32"),
    (("spec", "runPolicy", "cleanPodPolicies"), "All", "spec.runPolicy", "unknown field"),
    (("metadata", "name"), "Bad_Name", "metadata.name", "valid"),
    (("metadata", "labels"), {"team": "a b"}, 'metadata.labels.team', "valid"),
    (("metadata", "namespace"), "a" * 64, "metadata.namespace", "longer than 63 characters"),
    (("spec", "tfReplicaSpecs"), KeyError, "spec", "'tfReplicaSpecs' is a required property; add it"),
])
def test_schema_errors_name_the_path_and_fix(tfjob, path, value, field, fix):
    with pytest.raises(v.SchemaError) as caught:
        v.validate(mutated(tfjob, path, value), crd=CRD)
    assert caught.value.field == field
    assert fix in str(caught.value)


@pytest.mark.parametrize("path, value, field, fix", [
    ((*CONTAINER, "name"), "trainer", "spec.tfReplicaSpecs.Worker.template.spec.containers",
     "container with name tensorflow"),
    ((*CONTAINER, "image"), "", "spec.tfReplicaSpecs.Worker.template.spec.containers[0].image", "--image"),
    ((*WORKER, "template", "spec", "containers"), [], "spec.tfReplicaSpecs.Worker.template.spec.containers",
     "must be specified"),
    (("spec", "tfReplicaSpecs", "Master"), None, "spec.tfReplicaSpecs", "more than 1 Chief or Master"),
    (("spec", "tfReplicaSpecs", "Launcher"), None, "spec.tfReplicaSpecs.Launcher", "unknown replica type"),
    (("metadata", "name"), "a.b", "metadata.name", "DNS-1035"),
    (("metadata", "name"), "a" * 64, "metadata.name", "DNS-1035"),  # a label: 63 at most
    (("spec", "runPolicy", "backoffLimit"), -1, "spec.runPolicy.backoffLimit", "greater than or equal to 0"),
])
def test_operator_webhook_rules(tfjob, path, value, field, fix):
    if value is None:  # copy an existing replica spec under a new type
        value = copy.deepcopy(tfjob["spec"]["tfReplicaSpecs"]["Chief"])
    with pytest.raises(v.SchemaError) as caught:
        v.validate(mutated(tfjob, path, value), crd=CRD)
    assert caught.value.field == field
    assert fix in str(caught.value)


def test_crd_path_from_env(monkeypatch, tmp_path):
    monkeypatch.setenv("TFJOB_CRD", str(CRD))
    assert v.crd_path() == CRD
    monkeypatch.setenv("TFJOB_CRD", str(tmp_path / "missing.yaml"))
    with pytest.raises(v.CRDNotFound, match="TFJOB_CRD"):
        v.crd_path()


def test_without_tfjob_crd_the_packaged_copy_is_used(monkeypatch, tfjob):
    monkeypatch.delenv("TFJOB_CRD", raising=False)
    assert v.crd_path() == CRD and CRD.is_file()
    with pytest.raises(v.SchemaError, match="unknown field"):
        v.validate(mutated(tfjob, (*WORKER, "unknownField"), 1))


def test_tfjob_crd_wins_over_the_packaged_copy(monkeypatch, tmp_path, tfjob):
    import yaml

    crd = yaml.safe_load(CRD.read_text())
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"][
        "tfReplicaSpecs"]["additionalProperties"]["properties"]["replicas"]["maximum"] = 1
    stricter = tmp_path / "stricter.yaml"
    stricter.write_text(yaml.safe_dump(crd))
    assert v.validate(tfjob) is True
    monkeypatch.setenv("TFJOB_CRD", str(stricter))
    with pytest.raises(v.SchemaError) as caught:
        v.validate(tfjob)
    assert caught.value.field == "spec.tfReplicaSpecs.Worker.replicas"


def test_a_crd_object_from_a_cluster_is_used_as_given(tfjob):
    import yaml

    crd = yaml.safe_load(CRD.read_text())
    assert v.validate(tfjob, crd=crd) is True
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"][
        "runPolicy"]["properties"].pop("cleanPodPolicy")
    with pytest.raises(v.SchemaError, match="cleanPodPolicy"):
        v.validate(tfjob, crd=crd)


def test_not_a_crd_is_reported(tmp_path):
    bogus = tmp_path / "crd.yaml"
    bogus.write_text("kind: ConfigMap\n")
    with pytest.raises(v.CRDNotFound, match="not the TFJob CRD"):
        v.crd_schema(bogus)


def test_strict_closes_listed_objects_only():
    schema = v.strict({"type": "object", "properties": {
        "metadata": {"type": "object"},
        "spec": {"type": "object", "properties": {"a": {"type": "string"}},
                 "x-kubernetes-preserve-unknown-fields": True},
        "m": {"type": "object", "additionalProperties": {"type": "object", "properties": {"b": {}}}},
    }})
    assert schema["additionalProperties"] is False
    assert "additionalProperties" not in schema["properties"]["spec"]
    assert schema["properties"]["m"]["additionalProperties"]["additionalProperties"] is False
    assert schema["properties"]["metadata"] == v.OBJECT_META


def test_schema_cache_is_reused(schema_cache):
    first = v.strict_schema(CRD)
    cached = v._cache_file(CRD)
    assert cached.is_file() and cached.parent.parent == schema_cache
    assert v.strict_schema(CRD) == first


def test_field_path_formatting():
    assert v.field_path(["spec", "tfReplicaSpecs", "Worker", "x", 0, "y"]) == "spec.tfReplicaSpecs.Worker.x[0].y"
    assert v.field_path(["metadata", "labels", "app.kubernetes.io/name"]) == 'metadata.labels["app.kubernetes.io/name"]'
    assert v.field_path([]) == "(root)"


QUANTITIES = ["500m", "2", "1.5", ".5", "1.", "+1", "0", "4Gi", "1Ei", "1e3", "1E3", "2e-3", "1E", "100n", "10u",
              "1.2.3", ".", "", "1..5", "1e", "4KiB", "4 Gi", "4Gi\n", "m", "Gi", "e3", "0x10"]


@pytest.mark.parametrize("value", QUANTITIES)
def test_the_spec_refuses_every_quantity_the_crd_refuses(tfjob, value):
    """--cpu/--memory are checked by the JobSpec (naming the flag) before the schema check (naming a manifest path):
    whatever the CRD's quantity pattern refuses, the JobSpec has already refused."""
    try:
        check_quantity(value, "--cpu")
    except SpecError:
        return
    assert v.validate(mutated(tfjob, (*CONTAINER, "resources", "requests", "cpu"), value), crd=CRD) is True


def test_the_spec_int32_limit_is_the_schemas():
    assert v.INT_RANGES["int32"][1] == INT32_MAX
    assert v.validate(render(JobSpec(name="big", replicas={"Worker": ReplicaSpec(INT32_MAX)})), crd=CRD) is True
