"""Bad values never render: values.schema.json (per value) and the chart's `fail` rules
(across values) reject them in helm template and helm lint, naming the value."""
from __future__ import annotations

import pytest

from tests.support.chart import CHART, write_values
from tests.support.tools import run_helm

# (case, values overriding the defaults, text helm's error must contain: "- FIELD:" for
# schema errors, the chart's own message for rules across values)
BAD_VALUES = [
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
]


@pytest.mark.parametrize("values,expected", [case[1:] for case in BAD_VALUES], ids=[c[0] for c in BAD_VALUES])
def test_helm_template_rejects_bad_values(values, expected, tmp_path):
    done = run_helm(["template", "rel", str(CHART), "--values", str(write_values(tmp_path, values))], tmp_path)
    assert done.returncode != 0, f"helm accepted bad values {values}:\n{done.stdout}"
    assert expected in done.stderr, done.stderr
    assert "kind: TFJob" not in done.stdout


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
