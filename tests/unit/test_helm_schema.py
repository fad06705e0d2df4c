"""Bad values never render: values.schema.json (per value) and the chart's `fail` rules
(across values) reject them in helm template and helm lint, naming the value."""
from __future__ import annotations

import json

import pytest

from launcher.spec import ACCELERATOR_LABEL, GKE_ACCELERATORS, HIDDEN_MOUNT_PATHS, KERNEL_MOUNT_PATHS
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
    ("nul-in-arg", {"args": ["--x", "a\x00b"]}, "- args.1:"),
    ("nul-in-command", {"command": ["python\x00"]}, "- command.0:"),
    ("nul-in-env-value", {"env": [{"name": "A", "value": "\x00"}]}, "- env.0.value:"),
    ("s3-job-dir", {"jobDir": "s3://bucket/run"}, "- jobDir:"),
    ("bad-gcs-job-dir", {"jobDir": "gs://B"}, "- jobDir:"),
    ("bad-job-name", {"jobName": "Mnist_1"}, "- jobName:"),
    ("image-with-space", {"image": {"repository": "my image"}}, "- image.repository:"),
    ("root-pods", {"podSecurityContext": {"runAsNonRoot": False}}, "- podSecurityContext.runAsNonRoot:"),
    ("privilege-escalation", {"securityContext": {"allowPrivilegeEscalation": True}},
     "- securityContext.allowPrivilegeEscalation:"),
    # Pod Security 'restricted', as the schema says: no root container, capability or unconfined profile
    ("root-container", {"securityContext": {"runAsNonRoot": False, "runAsUser": 0}},
     "- securityContext.runAsNonRoot:"),
    ("added-capability", {"securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}},
     "- securityContext.capabilities.add.0:"),
    ("capabilities-kept", {"securityContext": {"capabilities": {"drop": []}}}, "- securityContext.capabilities.drop:"),
    ("unconfined-container", {"securityContext": {"seccompProfile": {"type": "Unconfined"}}},
     "- securityContext.seccompProfile.type:"),
    ("unmasked-proc", {"securityContext": {"procMount": "Unmasked"}}, "- securityContext.procMount:"),
    ("super-privileged-selinux", {"podSecurityContext": {"seLinuxOptions": {"type": "spc_t"}}},
     "Additional property seLinuxOptions is not allowed"),
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
    ("gcp-service-account-without-create", {"serviceAccount": {"create": False, "name": "trainer",
                                                                "gcpServiceAccount": "t@p.iam.gserviceaccount.com"}},
     "serviceAccount.gcpServiceAccount: only with serviceAccount.create"),
    ("service-account-annotations-without-create", {"serviceAccount": {"create": False, "annotations": {"a": "b"}}},
     "serviceAccount.annotations: only with serviceAccount.create"),
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
    ("env-twice", {"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}, {"name": "A", "value": "3"}]},
     'env[2].name: "A" is set twice; give each variable once'),
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
    ("helm-chart-label", {"labels": {"helm.sh/chart": "mine"}},
     "labels: helm.sh/chart is set by the chart and would be overwritten"),
    # numbers: Helm reads them as float64 (2^63-1 rendered as -2^63); the TFJob's int32 fields
    ("active-deadline-above-2-53", {"runPolicy": {"activeDeadlineSeconds": 9223372036854775807}},
     "- runPolicy.activeDeadlineSeconds: Must be less than or equal to"),
    ("workers-above-int32", {"replicas": {"worker": {"count": 2147483648}}}, "- replicas.worker.count:"),
    ("ps-above-int32", {"replicas": {"ps": {"count": 2147483648}}}, "- replicas.ps.count:"),
    ("ttl-above-int32", {"runPolicy": {"ttlSecondsAfterFinished": 2147483648}}, "- runPolicy.ttlSecondsAfterFinished:"),
    ("backoff-above-int32", {"runPolicy": {"backoffLimit": 2147483648}}, "- runPolicy.backoffLimit:"),
    ("gang-of-more-than-int32-replicas", {"gang": {"enabled": True}, "replicas": {"worker": {"count": 2147483647}}},
     "gang.minAvailable: the job has 2147483649 replicas, more than a gang's minAvailable (an int32) can hold"),
    # quantities: the launcher's grammar (spec._QUANTITY)
    ("quantity-two-dots", {"replicas": {"worker": {"memory": "1.2.3"}}}, "- replicas.worker.memory:"),
    ("quantity-dot-alone", {"replicas": {"worker": {"cpu": "."}}}, "- replicas.worker.cpu:"),
    ("quantity-lowercase-binary-suffix", {"replicas": {"worker": {"memory": "1ki"}}}, "- replicas.worker.memory:"),
    # the package where the pods have it: on a claim (the chart ships no files)
    ("package-not-on-a-claim", {"moduleName": "trainer.task", "packagePath": "/opt/trainer"},
     "packagePath: /opt/trainer is not in the pods: the chart ships no files; bake the package into the image "
     "and give moduleName alone, or put it on a claim"),
    ("package-beside-the-claim", {"moduleName": "trainer.task", "packagePath": "/mnt/codex/trainer",
                                  "volumes": [{"claimName": "code", "mountPath": "/mnt/code"}]},
     "packagePath: /mnt/codex/trainer is not in the pods"),
    # the job dir once (launcher: cli.args.check_job_dir_once), whatever the container runs
    ("job-dir-twice", {"jobDir": "gs://b-1/x", "args": ["--train-steps", "5", "--job-dir", "gs://b-1/y"]},
     'jobDir: given twice: "gs://b-1/x" by jobDir and "gs://b-1/y" by args[3] (--job-dir); give it once, as jobDir'),
    ("job-dir-twice-own-program", {"command": ["python", "train.py"], "jobDir": "/runs/a", "args": ["--model_dir=/b"]},
     'jobDir: given twice: "/runs/a" by jobDir and "/b" by args[0] (--model_dir)'),
    ("job-dir-twice-in-args", {"args": ["--model_dir=/a", "--output_path", "/b"]},
     "args: the job dir is given 2 times (--model_dir, --output_path); give it once, as jobDir"),
    ("job-dir-flag-as-a-value", {"args": ["--job_dir", "--model_dir", "/b"]},
     "args: the job dir is given 2 times (--job_dir, --model_dir)"),
    ("job-dir-in-args-empty", {"args": ["--job-dir="]}, "args[0] (--job-dir): is empty; use a local path or gs://BUCKET/path"),
    ("job-dir-in-args-ip-bucket", {"args": ["--output_path", "gs://10.0.0.1/x"]},
     'args[1] (--output_path): "10.0.0.1" in "gs://10.0.0.1/x" is an IP address'),
    ("job-dir-in-args-s3", {"args": ["--job-dir=s3://b/x"]}, 'args[0] (--job-dir): "s3://b/x" is not supported'),
    # Cloud Storage job dirs (launcher: spec.check_job_dir, _bucket_problem)
    ("job-dir-ip-bucket", {"jobDir": "gs://192.168.0.1/runs"},
     'jobDir: "192.168.0.1" in "gs://192.168.0.1/runs" is an IP address, which Cloud Storage refuses'),
    ("job-dir-goog-bucket", {"jobDir": "gs://goog-runs/x"},
     'jobDir: "goog-runs" in "gs://goog-runs/x" is reserved by Cloud Storage (no "goog" prefix, no "google")'),
    ("job-dir-google-bucket", {"jobDir": "gs://runs.google.example/x"}, "is reserved by Cloud Storage"),
    ("job-dir-64-char-bucket", {"jobDir": "gs://" + "a" * 64 + "/x"}, "- jobDir:"),
    ("job-dir-64-char-bucket-part", {"jobDir": "gs://" + "a" * 64 + ".b/x"}, "- jobDir:"),
    ("job-dir-223-char-bucket", {"jobDir": "gs://" + ("a" * 63 + ".") * 3 + "a" * 31 + "/x"}, "- jobDir:"),
    ("job-dir-carriage-return", {"jobDir": "gs://b-1/x\ry"}, "- jobDir:"),
    ("local-job-dir-carriage-return", {"jobDir": "/runs/x\ry"}, "- jobDir:"),
    ("blank-job-dir", {"jobDir": " \t"}, 'jobDir: " \\t" is blank; use a local path or gs://BUCKET/path'),
    # image references (launcher: spec.check_image); more in IMAGES below
    ("image-host-starting-with-dash", {"image": {"repository": "-bad.io/trainer"}}, "- image.repository:"),
    ("image-host-ending-with-dash", {"image": {"repository": "bad-.io/trainer"}}, "- image.repository:"),
    ("image-host-with-underscore", {"image": {"repository": "bad_host.io/trainer"}}, "- image.repository:"),
    ("image-name-of-256", {"image": {"repository": "a/" + "b" * 254}}, "- image.repository:"),
    # label keys: a prefix of at most 253 characters
    ("label-prefix-of-254", {"labels": {("a" * 63 + ".") * 3 + "a" * 62 + "/x": "v"}},
     "- labels: Does not match pattern '^([^/]{1,253}/)?[^/]+$'"),
    # every bound the launcher holds (spec.RunPolicy, JobSpec._check_gang)
    ("negative-ttl", {"runPolicy": {"ttlSecondsAfterFinished": -1}}, "- runPolicy.ttlSecondsAfterFinished:"),
    ("gang-timeout-zero", {"gang": {"enabled": True, "timeoutSeconds": 0}}, "- gang.timeoutSeconds:"),
    # a default dropped with null (Helm deletes the key): the restricted security stays required
    ("pods-run-as-non-root-dropped", {"podSecurityContext": {"runAsNonRoot": None}},
     "- podSecurityContext: runAsNonRoot is required"),
    ("privilege-escalation-dropped", {"securityContext": {"allowPrivilegeEscalation": None}},
     "- securityContext: allowPrivilegeEscalation is required"),
    ("capabilities-dropped", {"securityContext": {"capabilities": None}}, "- securityContext: capabilities is required"),
    ("bad-pull-policy", {"image": {"pullPolicy": "Sometimes"}}, "- image.pullPolicy:"),
    ("env-name-with-space", {"env": [{"name": "MY VAR", "value": "x"}]}, "- env.0.name:"),
    ("secret-env-bad-name", {"secretEnv": [{"name": "1=2", "secretName": "s", "key": "k"}]}, "- secretEnv.0.name:"),
    ("secret-env-bad-key", {"secretEnv": [{"name": "T", "secretName": "s", "key": "a/key"}]}, "- secretEnv.0.key:"),
    ("secret-env-pythonpath-with-package-path", {"moduleName": "trainer.task", "packagePath": "/mnt/code/trainer",
                                                 "volumes": [{"claimName": "code", "mountPath": "/mnt/code"}],
                                                 "secretEnv": [{"name": "PYTHONPATH", "secretName": "s", "key": "k"}]},
     "secretEnv[0].name: PYTHONPATH is set by packagePath"),
    ("job-dir-env-of-the-trainer-module", {"moduleName": "trainer.task", "env": [{"name": "JOB_DIR", "value": "/x"}]},
     "env[0].name: JOB_DIR is the trainer's job dir"),
    ("memory-of-an-absent-role", {"replicas": {"ps": {"count": 0, "memory": "1Gi"}}},
     "replicas.ps.memory: the job has no ps (replicas.ps.count is 0); set replicas.ps.count or drop replicas.ps.memory"),
    ("worker-gpus-without-workers", {"replicas": {"ps": {"count": 0}, "worker": {"count": 0, "gpus": 1}}},
     "replicas.worker.gpus: the job has no worker (replicas.worker.count is 0); set replicas.worker.count >= 1 "
     "or replicas.worker.gpus: 0"),
    ("bad-priority-class", {"priorityClassName": "High Priority"}, "- priorityClassName:"),
    ("bad-service-account-name", {"serviceAccount": {"create": False, "name": "My SA"}}, "- serviceAccount.name:"),
    ("gcp-service-account-not-an-email", {"serviceAccount": {"create": True, "gcpServiceAccount": "trainer"}},
     "- serviceAccount.gcpServiceAccount:"),
    ("read-only-as-text", {"volumes": [{"claimName": "data", "mountPath": "/mnt/data", "readOnly": "yes"}]},
     "- volumes.0.readOnly:"),
    ("automount-as-text", {"serviceAccount": {"create": False, "automount": "yes"}}, "- serviceAccount.automount:"),
    ("istio-sidecar-as-text", {"istioSidecar": "false"}, "- istioSidecar:"),
    ("accelerator-vs-empty-selector", {"accelerator": "nvidia-l4", "replicas": {"worker": {
        "gpus": 1, "nodeSelector": {ACCELERATOR_LABEL: ""}}}},
     f'replicas.worker.nodeSelector: {ACCELERATOR_LABEL}="" conflicts with accelerator nvidia-l4'),
    ("accelerator-vs-every-replica-selector", {"accelerator": "nvidia-l4", "nodeSelector": {ACCELERATOR_LABEL: "nvidia-tesla-t4"},
                                               "replicas": {"chief": {"count": 0}, "ps": {"count": 0},
                                                            "worker": {"gpus": 1}}},
     f"): nodeSelector: {ACCELERATOR_LABEL}=nvidia-tesla-t4 conflicts with accelerator nvidia-l4"),  # not the role's
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
    ("gang-min-available-of-every-replica", {"gang": {"enabled": True, "minAvailable": 4}}),
    ("evaluator-with-gpus", {"replicas": {"evaluator": {"count": 1, "gpus": 1}}}),
    ("existing-service-account", {"serviceAccount": {"create": False, "name": "trainer", "gcpServiceAccount": "",
                                                     "annotations": {}}}),
    ("pythonpath-without-package-path", {"env": [{"name": "PYTHONPATH", "value": "/x"}],
                                         "labels": {"kueue.x-k8s.io/queue-name": "team-b",
                                                    "kubeflow.org/team": "a"}}),
    ("other-helm-sh-label", {"labels": {"helm.sh/team": "a"}}),
    ("int32-ceilings", {"replicas": {"worker": {"count": 2147483647}},
                        "runPolicy": {"ttlSecondsAfterFinished": 2147483647, "backoffLimit": 2147483647}}),
    ("gang-of-more-than-int32-replicas-with-min-available", {"gang": {"enabled": True, "minAvailable": 5},
                                                             "replicas": {"worker": {"count": 2147483647}}}),
    ("quantities-n-u-and-dots", {"replicas": {"worker": {"cpu": "1000000n", "memory": "1000000u"},
                                              "chief": {"cpu": ".5", "memory": "1.Gi"}, "ps": {"cpu": "+1e3"}}}),
    ("package-on-a-claim", {"moduleName": "trainer.task", "packagePath": "/mnt/code//trainer/",
                            "volumes": [{"claimName": "data", "mountPath": "/mnt/data"},
                                        {"claimName": "code", "mountPath": "/mnt/code/"}]}),
    ("package-is-the-claim", {"moduleName": "trainer.task", "packagePath": "/mnt/trainer",
                              "volumes": [{"claimName": "code", "mountPath": "/mnt/trainer"}]}),
    ("job-dir-in-args-once", {"args": ["--job-dir", "gs://b-1/x", "--job-dirs=/y", "--model-dir", "/z"],
                              "command": ["python", "train.py"]}),
    ("job-dir-not-a-bucket-ip", {"jobDir": "gs://256.1.1.1/x"}),
    ("job-dir-near-reserved", {"jobDir": "gs://my-goog.g00gle/x"}),
    ("job-dir-63-char-bucket", {"jobDir": "gs://" + "a" * 63}),
    ("job-dir-222-char-bucket", {"jobDir": "gs://" + ("a" * 63 + ".") * 3 + "a" * 30 + "/x y\tz"}),
    ("job-dir-odd-bucket", {"jobDir": "gs://a..b_-c/x"}),
    ("image-ipv6-registry", {"image": {"repository": "[::1]:5000/trainer", "tag": "1"}}),
    ("image-name-of-255", {"image": {"repository": "a/" + "b" * 253}}),
    ("label-prefix-of-253", {"labels": {("a" * 63 + ".") * 3 + "a" * 61 + "/x": "v"}}),
    ("accelerator-and-its-own-selector", {"accelerator": "nvidia-l4", "replicas": {"worker": {
        "gpus": 1, "nodeSelector": {ACCELERATOR_LABEL: "nvidia-l4"}}}}),
    ("restricted-security-contexts", {
        "podSecurityContext": {"supplementalGroups": [2000], "fsGroupChangePolicy": "OnRootMismatch",
                               "appArmorProfile": {"type": "RuntimeDefault"}},
        "securityContext": {"capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}, "runAsUser": 2000,
                            "readOnlyRootFilesystem": True,
                            "seccompProfile": {"type": "Localhost", "localhostProfile": "trainer.json"}}}),
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


IMAGES = ["[::1]:5000/trainer:1", "[fe80::1]/a/b:1", "-bad.io/trainer:1", "bad-.io/trainer:1", "bad_host.io/trainer:1",
          "a_b/trainer:1", "a/" + "b" * 253 + ":1", "a/" + "b" * 254 + ":1", "tfjob-trainer:0.1.0", "gcr.io/my-project/trainer:0.1.0", "localhost:5000/tfjob-trainer:abc",
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


def test_the_largest_deadline_renders_exactly(tmp_path):
    """2^53-1, the schema's maximum, is the largest integer a float64 keeps: it renders as given."""
    values = write_values(tmp_path, {"runPolicy": {"activeDeadlineSeconds": 9007199254740991}})
    done = run_helm(["template", "rel", str(CHART), "--values", str(values)], tmp_path)
    assert done.returncode == 0, done.stderr
    assert '"activeDeadlineSeconds":9007199254740991' in done.stdout


def test_a_role_selector_value_wins_even_empty(tmp_path):
    """A role's node selector key wins over nodeSelector's with an empty value too, as in the
    launcher (sprig's merge would fill the empty value from nodeSelector)."""
    from launcher.render import render
    from launcher.spec import JobSpec, ReplicaSpec
    from tests.support.chart import helm_tfjob, without_generated_labels

    spec = JobSpec(name="pools", node_selector={"pool": "a", "zone": "b"}, role_node_selectors={"Worker": {"pool": ""}},
                   replicas={"Chief": ReplicaSpec(1), "Worker": ReplicaSpec(2)})
    chart = without_generated_labels(helm_tfjob(spec, tmp_path))
    assert chart == without_generated_labels(render(spec))
    assert chart["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["nodeSelector"] == {"pool": "", "zone": "b"}


@pytest.mark.parametrize("package_path", ["/mnt/code/trainer//", "/mnt//code/trainer", "/mnt/code/trainer/"])
def test_the_package_parent_is_the_launchers(package_path, tmp_path):
    """PYTHONPATH and workingDir: the package's parent, whatever slashes packagePath repeats or ends with."""
    values = write_values(tmp_path, {"moduleName": "trainer.task", "packagePath": package_path,
                                     "volumes": [{"claimName": "code", "mountPath": "/mnt/code"}]})
    done = run_helm(["template", "rel", str(CHART), "--values", str(values)], tmp_path)
    assert done.returncode == 0, done.stderr
    assert 'workingDir: "/mnt/code"' in done.stdout and '{"name":"PYTHONPATH","value":"/mnt/code"}' in done.stdout


@pytest.mark.parametrize("hidden", HIDDEN_MOUNT_PATHS)
def test_the_chart_refuses_the_mount_paths_the_launcher_refuses(hidden, tmp_path):
    """volumes[].mountPath: each directory the launcher keeps a claim off (spec.HIDDEN_MOUNT_PATHS),
    and what lies under the runtime's /dev, /proc and /sys, is refused naming it."""
    paths = [hidden] + ([hidden + "/x"] if hidden in KERNEL_MOUNT_PATHS else [])
    for path in paths:
        values = write_values(tmp_path, {"volumes": [{"claimName": "data", "mountPath": path}]})
        done = run_helm(["template", "rel", str(CHART), "--values", str(values)], tmp_path)
        assert done.returncode != 0, f"helm mounted a claim at {path}"
        assert f'volumes[0].mountPath: "{path}" ' in done.stderr and hidden in done.stderr.split(path, 1)[1], done.stderr
