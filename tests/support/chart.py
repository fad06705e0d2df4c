"""The chart's test inputs, shared by the chart's tests (tests/unit/test_helm_*.py) and the
e2e Helm test: the chart path, a matrix of JobSpecs that covers every value the chart takes,
`helm template` of a spec's values (the real helm binary), and what Helm alone labels."""
from __future__ import annotations

import yaml

from launcher.helm_values import values_yaml
from launcher.spec import JobSpec, ReplicaSpec, RunPolicy, SecretEnv, Volume
from tests.support.tools import ROOT, helm_template

CHART = ROOT / "charts" / "tfjob"
GENERATED_LABELS = ("helm.sh/chart", "app.kubernetes.io/managed-by")
DIGEST = "sha256:" + "0123456789abcdef" * 4

# Strings that break naive YAML: 1.1 booleans and numbers, null, quotes, newlines,
# comment and mapping markers, Go/Jinja template syntax, unicode line separators (U+0085
# too, which JSON leaves raw), characters beyond U+FFFF (a surrogate pair in JSON's escapes).
TRICKY = ("y", "on", "No", "null", "~", "0x1F", "1e3", "012", "", " lead and trail ",
          'say "hi"\n  injected: true', "a: b # not a comment", "- item", "{{ .Release.Name }}",
          "{% raw %}", "ünï ☃ \u2028 tab\t", "back\\slash", "'single'", "&anchor *alias !tag",
          "next\x85line", "emoji 🙂 \U0001d518")


def spec_matrix() -> dict[str, JobSpec]:
    ps, worker = ReplicaSpec(1), ReplicaSpec(2)
    return {
        "plain-ps": JobSpec(name="mnist-ps", replicas={"Chief": ReplicaSpec(1), "PS": ReplicaSpec(2),
                                                       "Worker": ReplicaSpec(3)}),
        "gpu-workers": JobSpec(
            name="gpu", namespace="ml-team", image="gcr.io/proj/trainer:1.2-gpu", accelerator="nvidia-tesla-t4",
            replicas={"Chief": ReplicaSpec(1, gpus=1, cpu="4", memory="16Gi"),
                      "PS": ReplicaSpec(2, cpu="2", memory="8Gi"),
                      "Worker": ReplicaSpec(4, gpus=2, cpu="8", memory="30Gi")}),
        "evaluator": JobSpec(name="with-eval", replicas={"Chief": ReplicaSpec(1), "PS": ps, "Worker": worker,
                                                         "Evaluator": ReplicaSpec(1, gpus=1, memory="2Gi")}),
        "tricky-strings": JobSpec(
            name="tricky", image=f"localhost:5000/team/trainer:v1@{DIGEST}",
            replicas={"Chief": ReplicaSpec(1), "Worker": worker},
            env={f"V{i}": value for i, value in enumerate(TRICKY)},
            trainer_args=TRICKY + ("--flag=a b",), command=("python", "-u", "-m", "trainer.task"),
            job_dir="gs://bucket-1/runs/a b/{{x}}"),
        "run-policy": JobSpec(name="policy", restart_policy="ExitCode",
                              replicas={"Chief": ReplicaSpec(1), "PS": ps, "Worker": worker},
                              run_policy=RunPolicy(clean_pod_policy="All", ttl_seconds_after_finished=3600,
                                                   active_deadline_seconds=7200, backoff_limit=0)),
        "service-account": JobSpec(name="wi", namespace="training", service_account="tfjob-trainer",
                                   labels={"team": "ml", "example.com/cost-center": "c-42"},
                                   replicas={"Chief": ReplicaSpec(1), "PS": ps, "Worker": worker}),
        "node-selectors": JobSpec(name="pools", accelerator="nvidia-l4",
                                  node_selector={"cloud.google.com/gke-nodepool": "train",
                                                 "kubernetes.io/arch": "amd64"},
                                  replicas={"Chief": ReplicaSpec(1, gpus=1), "PS": ps, "Worker": worker}),
        "mwms-no-ps": JobSpec(name="mwms", image="registry.local:5000/trainer:dev",
                              replicas={"Worker": ReplicaSpec(4, gpus=1, cpu="500m", memory="1Gi")},
                              job_dir="/mnt/runs/mwms", trainer_args=("--strategy", "multi-worker")),
        "role-node-selectors": JobSpec(name="roles", accelerator="nvidia-tesla-t4",
                                       node_selector={"cloud.google.com/gke-nodepool": "cpu", "zone": "a"},
                                       role_node_selectors={"Worker": {"cloud.google.com/gke-nodepool": "t4"},
                                                            "PS": {"highmem": "true"}},
                                       replicas={"Chief": ReplicaSpec(1), "PS": ps, "Worker": ReplicaSpec(2, gpus=1)}),
        "gke-scheduling": JobSpec(name="queued", replicas={"Chief": ReplicaSpec(1), "PS": ps, "Worker": worker},
                                  success_policy="AllWorkers", queue_name="team-a", priority_class="high.priority",
                                  istio_sidecar=True, gang=True, gang_timeout_seconds=600,
                                  gang_queue="research.gpu", gang_min_available=3),
        "volumes": JobSpec(name="pvc", replicas={"Chief": ReplicaSpec(1), "PS": ps, "Worker": worker},
                           job_dir="/mnt/runs/pvc",
                           volumes=(Volume("training-runs", "/mnt/runs"), Volume("mnist.data", "/mnt/data", True))),
        "secret-env": JobSpec(name="secrets", replicas={"Worker": worker}, env={"PLAIN": "on"},
                              secret_env=(SecretEnv("HF_TOKEN", "hf-token", "token"),
                                          SecretEnv("DB.PASSWORD", "db.creds", "pass_word-1"))),
        "chief-only": JobSpec(name="a" * 55, replicas={"Chief": ReplicaSpec(1), "Worker": ReplicaSpec(0)}),
        "module-package": JobSpec(name="own-pkg", replicas={"Chief": ReplicaSpec(1), "PS": ps, "Worker": worker},
                                  env={"A": "1"}, secret_env=(SecretEnv("TOKEN", "tok", "t"),),
                                  volumes=(Volume("code", "/mnt/code", True),),
                                  module_name="my_trainer.task", package_path="/mnt/code/src/my_trainer/"),
        "module-in-image": JobSpec(name="in-image", replicas={"Worker": worker}, module_name="trainer.task"),
    }


def without_generated_labels(doc: dict) -> dict:
    """Drop the labels only Helm (or only the launcher) can set the way it does, from a
    TFJob (also its pod templates) or a NetworkPolicy."""
    def strip(labels: dict) -> dict:
        return {k: v for k, v in labels.items() if k not in GENERATED_LABELS}

    doc["metadata"]["labels"] = strip(doc["metadata"]["labels"])
    for replica in doc.get("spec", {}).get("tfReplicaSpecs", {}).values():
        replica["template"]["metadata"]["labels"] = strip(replica["template"]["metadata"]["labels"])
    return doc


def helm_docs(spec: JobSpec, tmp_path) -> dict[str, dict]:
    values = tmp_path / "values.yaml"
    values.write_text(values_yaml(spec), encoding="utf-8")
    docs = helm_template(CHART, [values], tmp_path / "helm", release="some-release", namespace=spec.namespace)
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == sorted(["TFJob"] + (["NetworkPolicy"] if spec.network_policy else [])), kinds
    return {d["kind"]: d for d in docs}


def helm_tfjob(spec: JobSpec, tmp_path) -> dict:
    return helm_docs(spec, tmp_path)["TFJob"]


def write_values(tmp_path, values: dict, name: str = "values.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(values), encoding="utf-8")
    return path
