"""Bad values never render: values.schema.json (per value) and the chart's `fail` rules
(across values) reject them in helm template and helm lint, naming the value."""
from __future__ import annotations

import json

import pytest

from launcher.spec import ACCELERATOR_LABEL, GKE_ACCELERATORS
from tests.support.chart import CHART, write_values
from tests.support.tools import run_helm

# (case, values overriding the defaults, text helm's error must contain: "- FIELD:" for
# schema errors, the chart's own message for rules across values)
BAD_VALUES = [
    ("mount-usr", {"volumes": [{"claimName": "c", "mountPath": "/usr"}]},
     'volumes[0].mountPath: "/usr" would hide the image\'s /usr'),
    ("mount-dev-shm", {"volumes": [{"claimName": "c", "mountPath": "//dev/shm"}]},
     'volumes[0].mountPath: "//dev/shm" is under /dev, which the container runtime provides'),
    ("accelerator-vs-selector", {"accelerator": "nvidia-l4", "replicas": {"worker": {
        "gpus": 1, "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"}}}},
     "replicas.worker.nodeSelector: cloud.google.com/gke-accelerator=nvidia-tesla-t4 conflicts with accelerator nvidia-l4"),
    ("negative-workers", {"replicas": {"worker": {"count": -1}}}, "- replicas.worker.count:"),
    ("negative-ps", {"replicas": {"ps": {"count": -2}}}, "- replicas.ps.count:"),
    ("fractional-count", {"replicas": {"worker": {"count": 1.5}}}, "- replicas.worker.count:"),
    ("gpus-on-ps", {"replicas": {"ps": {"gpus": 1}}}, "- replicas.ps.gpus:"),
    ("negative-gpus", {"replicas": {"worker": {"gpus": -1}}}, "- replicas.worker.gpus:"),
    ("two-chiefs", {"replicas": {"chief": {"count": 2}}}, "- replicas.chief.count:"),
    ("two-evaluators", {"replicas": {"evaluator": {"count": 2}}}, "- replicas.evaluator.count:"),
    ("unknown-top-level-key", {"workers": 3}, "Additional property workers is not allowed"),
    ("unknown-replica-type", {"replicas": {"master": {"count": 1}}}, "- replicas: Additional property master"),
    ("unknown-replica-key", {"replicas": {"worker": {"gpu": 1}}}, "- replicas.worker: Additional property gpu"),
    ("bad-quantity", {"replicas": {"worker": {"memory": "4 gigs"}}}, "- replicas.worker.memory:"),
    ("bad-restart-policy", {"restartPolicy": "Sometimes"}, "- restartPolicy:"),
    ("bad-clean-pod-policy", {"runPolicy": {"cleanPodPolicy": "Some"}}, "- runPolicy.cleanPodPolicy:"),
    ("negative-backoff", {"runPolicy": {"backoffLimit": -1}}, "- runPolicy.backoffLimit:"),
    ("tf-config-env", {"env": [{"name": "TF_CONFIG", "value": "{}"}]}, "- env.0.name:"),
    ("env-as-map", {"env": {"A": "b"}}, "- env:"),
    ("env-number-value", {"env": [{"name": "A", "value": 1}]}, "- env.0.value:"),
    ("bad-label-value", {"nodeSelector": {"pool": "not valid!"}}, "- nodeSelector.pool:"),
    ("bad-label-key", {"labels": {"bad key": "x"}}, 'Property name of "bad key"'),
    ("bad-accelerator", {"accelerator": "nvidia tesla"}, "- accelerator:"),
    ("accelerator-not-a-gke-name", {"accelerator": "NVIDIA_TESLA_T4", "replicas": {"worker": {"gpus": 1}}},
     "- accelerator: accelerator must be one of the following"),
    ("active-deadline-zero", {"runPolicy": {"activeDeadlineSeconds": 0}}, "- runPolicy.activeDeadlineSeconds:"),
    ("volume-nul-in-path", {"volumes": [{"claimName": "data", "mountPath": "/mnt/a\x00b"}]}, "- volumes.0.mountPath:"),
    ("s3-job-dir", {"jobDir": "s3://bucket/run"}, "- jobDir:"),
    ("bad-gcs-job-dir", {"jobDir": "gs://B"}, "- jobDir:"),
    ("bad-job-name", {"jobName": "Mnist_1"}, "- jobName:"),
    ("image-with-space", {"image": {"repository": "my image"}}, "- image.repository:"),
    ("root-pods", {"podSecurityContext": {"runAsNonRoot": False}}, "- podSecurityContext.runAsNonRoot:"),
    ("privilege-escalation", {"securityContext": {"allowPrivilegeEscalation": True}},
     "- securityContext.allowPrivilegeEscalation:"),
    ("volume-bad-claim", {"volumes": [{"claimName": "Data", "mountPath": "/mnt/data"}]}, "- volumes.0.claimName:"),
    ("volume-relative-path", {"volumes": [{"claimName": "data", "mountPath": "mnt/data"}]}, "- volumes.0.mountPath:"),
    ("volume-unknown-key", {"volumes": [{"claimName": "data", "mountPath": "/d", "subPath": "x"}]},
     "- volumes.0: Additional property subPath"),
    ("volume-no-claim", {"volumes": [{"mountPath": "/mnt/data"}]}, "- volumes.0: claimName is required"),
    ("secret-env-bad-secret", {"secretEnv": [{"name": "T", "secretName": "Hf_Token", "key": "t"}]},
     "- secretEnv.0.secretName:"),
    ("secret-env-tf-config", {"secretEnv": [{"name": "TF_CONFIG", "secretName": "s", "key": "k"}]},
     "- secretEnv.0.name:"),
    ("secret-env-no-key", {"secretEnv": [{"name": "T", "secretName": "s"}]}, "- secretEnv.0: key is required"),
    ("network-policy-not-bool", {"networkPolicy": {"enabled": "yes"}}, "- networkPolicy.enabled:"),
    # rules across values: the chart's `fail` messages name the value and the fix
    ("no-chief-no-worker", {"replicas": {"chief": {"count": 0}, "worker": {"count": 0}}},
     "replicas: a job needs a chief or at least one worker"),
    ("ps-without-chief", {"replicas": {"chief": {"count": 0}}}, "replicas.chief.count: parameter-server training"),
    ("accelerator-without-gpus", {"accelerator": "nvidia-tesla-t4"}, "accelerator: set GPUs too"),
    ("ps-without-workers", {"replicas": {"worker": {"count": 0}}}, "replicas.worker.count: parameter-server training"),
    ("bad-success-policy", {"successPolicy": "AllChiefs"}, "- successPolicy:"),
    ("bad-queue-name", {"queueName": "Team A"}, "- queueName:"),
    ("bad-gang-queue", {"gang": {"enabled": True, "queue": "Research Team"}}, "- gang.queue:"),
    ("gang-min-available-zero", {"gang": {"enabled": True, "minAvailable": 0}}, "- gang.minAvailable:"),
    ("gang-min-available-over-replicas", {"gang": {"enabled": True, "minAvailable": 5}},
     "gang.minAvailable: 5 is more than the job's 4 replicas"),
    ("volume-claim-twice", {"volumes": [{"claimName": "data", "mountPath": "/a"}, {"claimName": "data", "mountPath": "/b"}]},
     'volumes[1].claimName: claim "data" is given twice'),
    ("volume-path-twice", {"volumes": [{"claimName": "a", "mountPath": "/d"}, {"claimName": "b", "mountPath": "/d/"}]},
     'volumes[1].mountPath: "/d/" is used twice'),
    ("name-too-long", {"jobName": "a" * 55, "replicas": {"worker": {"count": 10}}},
     'jobName: "' + "a" * 55 + '" is too long'),
    ("bad-module-name", {"moduleName": "trainer-task"}, "- moduleName:"),
    ("relative-package-path", {"moduleName": "trainer.task", "packagePath": "code/trainer"}, "- packagePath:"),
    ("module-and-command", {"moduleName": "trainer.task", "command": ["python", "x.py"]},
     "moduleName: conflicts with command"),
    ("package-without-module", {"packagePath": "/mnt/code/trainer"}, "packagePath: needs moduleName"),
    ("module-not-in-package", {"moduleName": "other.task", "packagePath": "/mnt/code/trainer"},
     'packagePath: the module other.task is not in package "trainer"'),
    # what the launcher refuses (launcher/spec.py), refused by the chart with the same rule
    ("accelerator-label-for-every-replica", {"nodeSelector": {ACCELERATOR_LABEL: "nvidia-tesla-t4"}},
     f"nodeSelector: {ACCELERATOR_LABEL} would put the chief replicas, which have no GPUs, on GPU nodes"),
    ("accelerator-label-for-cpu-role", {"replicas": {"chief": {"gpus": 1}, "worker": {"gpus": 1},
                                                     "ps": {"nodeSelector": {ACCELERATOR_LABEL: "nvidia-l4"}}}},
     f"replicas.ps.nodeSelector: {ACCELERATOR_LABEL} would put the ps replicas, which have no GPUs"),
    ("evaluator-gpus-without-evaluator", {"replicas": {"evaluator": {"gpus": 1}}},
     "replicas.evaluator.gpus: the job has no evaluator (replicas.evaluator.count is 0); "
     "set replicas.evaluator.count: 1 or replicas.evaluator.gpus: 0"),
    ("chief-gpus-without-chief", {"replicas": {"chief": {"count": 0, "gpus": 1}, "ps": {"count": 0}}},
     "replicas.chief.gpus: the job has no chief"),
    ("gang-min-available-without-gang", {"gang": {"minAvailable": 3}},
     "gang.minAvailable: only with gang.enabled; set gang.enabled: true or gang.minAvailable: null"),
    ("gang-queue-without-gang", {"gang": {"queue": "research"}}, "gang.queue: only with gang.enabled"),
    ("gang-timeout-without-gang", {"gang": {"timeoutSeconds": 600}}, "gang.timeoutSeconds: only with gang.enabled"),
    ("volume-hides-etc", {"volumes": [{"claimName": "data", "mountPath": "/etc"}]},
     'volumes[0].mountPath: "/etc" would hide the image\'s /etc; mount the claim elsewhere'),
    ("volume-hides-root", {"volumes": [{"claimName": "data", "mountPath": "//"}]},
     'volumes[0].mountPath: "//" would hide the image\'s /;'),
    ("volume-dot-dot", {"volumes": [{"claimName": "data", "mountPath": "/mnt/../etc"}]},
     'volumes[0].mountPath: "/mnt/../etc" has a \'..\' segment'),
    ("volume-path-twice-trailing-slashes",
     {"volumes": [{"claimName": "a", "mountPath": "/d"}, {"claimName": "b", "mountPath": "/d//"}]},
     'volumes[1].mountPath: "/d//" is used twice'),
    ("package-path-dot-dot", {"moduleName": "trainer.task", "packagePath": "/mnt/../trainer"},
     'packagePath: "/mnt/../trainer" has a \'..\' segment'),
    ("secret-env-repeats-env", {"env": [{"name": "TOKEN", "value": "x"}],
                                "secretEnv": [{"name": "TOKEN", "secretName": "s", "key": "k"}]},
     'secretEnv[0].name: "TOKEN" is set twice'),
    ("pythonpath-with-package-path", {"moduleName": "trainer.task", "packagePath": "/mnt/code/trainer",
                                      "env": [{"name": "PYTHONPATH", "value": "/x"}]},
     "env[0].name: PYTHONPATH is set by packagePath"),
    ("cpu-of-an-absent-role", {"replicas": {"evaluator": {"cpu": "2"}}},
     "replicas.evaluator.cpu: the job has no evaluator (replicas.evaluator.count is 0)"),
    ("selector-of-an-absent-role", {"replicas": {"ps": {"count": 0, "nodeSelector": {"pool": "a"}}}},
     "replicas.ps.nodeSelector: the job has no ps"),
    ("job-dir-as-env", {"env": [{"name": "JOB_DIR", "value": "gs://b/runs/x"}]},
     "env[0].name: JOB_DIR is the trainer's job dir"),
    ("standard-label", {"labels": {"app.kubernetes.io/name": "mine"}},
     "labels: app.kubernetes.io/name is set by the chart and would be overwritten"),
    ("operator-label", {"labels": {"training.kubeflow.org/job-role": "master"}},  # on every pod, not the master's
     "labels: training.kubeflow.org/job-role is the training-operator's: it sets its own on each pod"),
    ("queue-label-with-queue-name", {"queueName": "team-a", "labels": {"kueue.x-k8s.io/queue-name": "team-b"}},
     "labels: kueue.x-k8s.io/queue-name is set by queueName"),
]

# Valid neighbours of the refused values above: the rules are no broader than the launcher's.
GOOD_NEIGHBOURS = [
    ("job-dir-env-of-own-module", {"moduleName": "my_trainer.task", "env": [{"name": "JOB_DIR", "value": "/x"}]}),
    ("listed-accelerator", {"accelerator": "nvidia-l4", "replicas": {"worker": {"gpus": 1}}}),
    ("unlisted-gpu-by-role-selector", {"replicas": {"worker": {"gpus": 1, "nodeSelector": {
        ACCELERATOR_LABEL: "nvidia-rtx-pro-6000"}}}}),
    ("active-deadline-one", {"runPolicy": {"activeDeadlineSeconds": 1}}),
    ("mount-paths-near-refused-ones", {"volumes": [{"claimName": "a", "mountPath": "/mnt/..data"},
                                                   {"claimName": "b", "mountPath": "/etcetera"},
                                                   {"claimName": "c", "mountPath": "/app/data/"},
                                                   {"claimName": "d", "mountPath": "/usr2"},
                                                   {"claimName": "e", "mountPath": "/devices"}]}),
    ("gang-options-with-gang", {"gang": {"enabled": True, "minAvailable": 3, "queue": "research",
                                         "timeoutSeconds": 600}}),
    ("evaluator-with-gpus", {"replicas": {"evaluator": {"count": 1, "gpus": 1}}}),
    ("pythonpath-without-package-path", {"env": [{"name": "PYTHONPATH", "value": "/x"}],
                                         "labels": {"kueue.x-k8s.io/queue-name": "team-b",
                                                    "kubeflow.org/team": "a"}}),
]


@pytest.mark.parametrize("values,expected", [case[1:] for case in BAD_VALUES], ids=[c[0] for c in BAD_VALUES])
def test_helm_template_rejects_bad_values(values, expected, tmp_path):
    done = run_helm(["template", "rel", str(CHART), "--values", str(write_values(tmp_path, values))], tmp_path)
    assert done.returncode != 0, f"helm accepted bad values {values}:\n{done.stdout}"
    assert expected in done.stderr, done.stderr
    assert "kind: TFJob" not in done.stdout


@pytest.mark.parametrize("values", [case[1] for case in GOOD_NEIGHBOURS], ids=[c[0] for c in GOOD_NEIGHBOURS])
def test_helm_template_accepts_valid_neighbours(values, tmp_path):
    done = run_helm(["template", "rel", str(CHART), "--values", str(write_values(tmp_path, values))], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "kind: TFJob" in done.stdout


def test_schema_accelerators_are_the_launchers():
    """The accelerator enum is spec.GKE_ACCELERATORS (plus "" for none): the two refuse the same names."""
    schema = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    assert schema["properties"]["accelerator"]["enum"] == ["", *GKE_ACCELERATORS]


def test_helm_lint_strict_rejects_bad_values(tmp_path):
    bad = write_values(tmp_path, {"replicas": {"ps": {"gpus": 1}}})
    done = run_helm(["lint", "--strict", str(CHART), "--values", str(bad)], tmp_path)
    assert done.returncode != 0
    assert "replicas.ps.gpus" in done.stdout + done.stderr


def test_good_edge_values_are_accepted(tmp_path):
    """The schema is not simply closed: boundary values that are valid do render."""
    good = {"replicas": {"chief": {"count": 0}, "ps": {"count": 0, "gpus": 0},
                         "worker": {"count": 1, "gpus": 0, "cpu": 0.5, "memory": "1.5Gi"}},
            "runPolicy": {"backoffLimit": 0, "ttlSecondsAfterFinished": 0},
            "jobDir": "/local/path:with-colon", "labels": {"example.com/team": "ml_1.x"}}
    done = run_helm(["template", "rel", str(CHART), "--values", str(write_values(tmp_path, good))], tmp_path)
    assert done.returncode == 0, done.stderr
    assert '"cpu":"0.5"' in done.stdout and '"backoffLimit":0' in done.stdout


IMAGES = ["tfjob-trainer:0.1.0", "gcr.io/my-project/trainer:0.1.0", "localhost:5000/tfjob-trainer:abc",
          "localhost/tfjob-trainer", "registry.local:5000/a/b_c/d-e:v1.2", "my-registry:5000/x@sha256:" + "a" * 64,
          "UPPER/img:1", "gcr.io/PROJECT/trainer:1", "img@sha256:short", "a/b:.bad", "x\"y", "gcr.io//x",
          "UPPER.example.com/img:1"]


@pytest.mark.parametrize("image", IMAGES)
def test_the_schema_takes_the_images_the_launcher_takes(image, tmp_path):
    """image.repository/tag/digest's patterns against spec.check_image, on the same references
    split as the launcher's values file splits them (helm_values.split_image)."""
    from launcher.helm_values import split_image
    from launcher.spec import SpecError, check_image

    try:
        check_image(image)
        launcher_takes = True
    except SpecError:
        launcher_takes = False
    repository, tag, digest = split_image(image)
    values = write_values(tmp_path, {"image": {"repository": repository, "tag": tag, "digest": digest}})
    done = run_helm(["template", "x", str(CHART), "--values", str(values)], tmp_path)
    assert (done.returncode == 0) == launcher_takes, (image, launcher_takes, done.stderr[-500:])
