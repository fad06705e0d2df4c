"""JobSpec rules: every bad value is refused with the field that names the flag, and a value
of the wrong type (the Python API's) with the field that names it."""
from pathlib import Path, PurePosixPath

import pytest

from launcher.spec import (LOCAL_REPLICA_BYTES, JobSpec, ReplicaSpec, RunPolicy, SecretEnv, SpecError, Volume,
                           available_memory, check_local_capacity)


def ps_job(**kw):
    replicas = kw.pop("replicas", {"Chief": ReplicaSpec(1), "PS": ReplicaSpec(1), "Worker": ReplicaSpec(2)})
    return JobSpec(name=kw.pop("name", "mnist"), replicas=replicas, **kw)


@pytest.mark.parametrize("kwargs, field", [
    ({"name": "Bad_Name"}, "--name"),
    ({"name": "1starts-with-digit"}, "--name"),
    ({"name": "ends-with-"}, "--name"),
    ({"name": "a" * 60}, "--name"),
    ({"namespace": "No"}, "--namespace"),
    ({"replicas": {"Worker": ReplicaSpec(-1)}}, "--workers"),
    ({"replicas": {"Worker": ReplicaSpec(0)}}, "--workers"),
    ({"replicas": {"PS": ReplicaSpec(1), "Worker": ReplicaSpec(2)}}, "--chief"),
    ({"replicas": {"Chief": ReplicaSpec(2)}}, "--chief"),
    ({"replicas": {"Chief": ReplicaSpec(1), "Evaluator": ReplicaSpec(2)}}, "--evaluator"),
    ({"replicas": {"Chief": ReplicaSpec(1), "PS": ReplicaSpec(1, gpus=1)}}, "--gpus-per-ps"),
    ({"replicas": {"Worker": ReplicaSpec(1, gpus=-1)}}, "--gpus-per-worker"),
    ({"replicas": {"Worker": ReplicaSpec(1, cpu="two")}}, "--cpu worker="),
    ({"replicas": {"Worker": ReplicaSpec(1, memory="4 GB")}}, "--memory worker="),
    ({"restart_policy": "Sometimes"}, "--restart-policy"),
    ({"run_policy": RunPolicy(clean_pod_policy="Some")}, "--clean-pod-policy"),
    ({"run_policy": RunPolicy(backoff_limit=-1)}, "--backoff-limit"),
    ({"run_policy": RunPolicy(ttl_seconds_after_finished=-5)}, "--ttl-seconds"),
    ({"image": "has space"}, "--image"),
    ({"accelerator": "nvidia-tesla-t4"}, "--accelerator"),
    ({"node_selector": {"bad key!": "x"}}, "--node-selector"),
    ({"labels": {"team": "a: b"}}, "--label"),
    ({"env": {"TF_CONFIG": "{}"}}, "--env"),
    ({"env": {"1=2": "x"}}, "--env"),
    ({"job_dir": "gs://"}, "--job-dir"),
    ({"job_dir": "s3://bucket/x"}, "--job-dir"),
    ({"job_dir": "gs://B/x"}, "--job-dir"),
    ({"service_account": "Not Valid"}, "--service-account"),
    # replica types are TFJob's, spelled exactly: a typo or lower case is refused, not dropped
    ({"replicas": {"Chief": ReplicaSpec(1), "Workers": ReplicaSpec(2)}}, "replicas"),
    ({"replicas": {"worker": ReplicaSpec(2)}}, "replicas"),
    ({"replicas": {"Chief": ReplicaSpec(1), "ps": ReplicaSpec(1), "Worker": ReplicaSpec(1)}}, "replicas"),
    ({"replicas": {"Worker": 2}}, "replicas"),
    ({"replicas": [ReplicaSpec(2)]}, "replicas"),
    # argument lists: a str would be split into characters
    ({"trainer_args": "--train-steps=300"}, "trainer_args"),
    ({"trainer_args": ["--train-steps", 300]}, "trainer_args"),
    ({"trainer_args": 300}, "trainer_args"),
    ({"command": "python -m trainer.task"}, "command"),
    # int32 (int64) fields of the TFJob: refused here, naming the flag, not by the schema check
    ({"replicas": {"Worker": ReplicaSpec(2**31)}}, "--workers"),
    ({"replicas": {"Chief": ReplicaSpec(1), "PS": ReplicaSpec(2**31), "Worker": ReplicaSpec(1)}}, "--ps"),
    ({"replicas": {"Worker": ReplicaSpec(99999999999999999999)}}, "--workers"),
    ({"run_policy": RunPolicy(backoff_limit=2**31)}, "--backoff-limit"),
    ({"run_policy": RunPolicy(ttl_seconds_after_finished=2**31)}, "--ttl-seconds"),
    ({"run_policy": RunPolicy(active_deadline_seconds=2**53)}, "--active-deadline-seconds"),  # a float64 in Helm
    # values the launcher used to take that its own values file made the chart render otherwise or refuse
    ({"replicas": {"Worker": ReplicaSpec(2), "Evaluator": ReplicaSpec(0, cpu="1")}}, "--cpu evaluator="),
    ({"replicas": {"Worker": ReplicaSpec(2), "PS": ReplicaSpec(0, memory="4Gi")}}, "--memory ps="),
    ({"role_node_selectors": {"Evaluator": {"pool": "x"}}}, "--node-selector evaluator:"),
    ({"service_account": "a" * 254}, "--service-account"),
    ({"labels": {"helm.sh/chart": "mine"}}, "--label"),
    # image references: the distribution/reference grammar
    ({"image": 'x"y'}, "--image"),
    ({"image": "a/b:c:d"}, "--image"),
    ({"image": "UPPER/img:1"}, "--image"),
    ({"image": "gcr.io/PROJECT/trainer:0.1.0"}, "--image"),
    ({"image": "img@sha256:short"}, "--image"),
    ({"image": "img@sha256:" + "AB" * 32}, "--image"),
    ({"image": "img@md5:" + "0" * 32}, "--image"),
    ({"image": "img:"}, "--image"),
    ({"image": "img:-dev"}, "--image"),
    ({"image": "img:" + "a" * 129}, "--image"),
    ({"image": "-img"}, "--image"),
    ({"image": "a__-b/img"}, "--image"),
    ({"image": "localhost:port/img"}, "--image"),
    ({"image": "a" * 256}, "--image"),
    ({"image": "img\n"}, "--image"),
    ({"image": 5}, "image"),
    # gs:// buckets: Cloud Storage's naming rules
    ({"job_dir": "gs://BUCKET/runs/x"}, "--job-dir"),
    ({"job_dir": "gs://ab/x"}, "--job-dir"),
    ({"job_dir": "gs://" + "a" * 64 + "/x"}, "--job-dir"),
    ({"job_dir": "gs://" + "a" * 64 + ".b/x"}, "--job-dir"),
    ({"job_dir": "gs://-bucket/x"}, "--job-dir"),
    ({"job_dir": "gs://bucket_/x"}, "--job-dir"),
    ({"job_dir": "gs://goog-bucket/x"}, "--job-dir"),
    ({"job_dir": "gs://my-google-bucket/x"}, "--job-dir"),
    ({"job_dir": "gs://192.168.5.4/x"}, "--job-dir"),
    ({"job_dir": "gs://my-bucket/a\rb"}, "--job-dir"),
    # Kubernetes quantities (resource.Quantity's grammar)
    ({"replicas": {"Worker": ReplicaSpec(1, cpu="1.2.3")}}, "--cpu worker="),
    ({"replicas": {"Worker": ReplicaSpec(1, cpu=".")}}, "--cpu worker="),
    ({"replicas": {"Worker": ReplicaSpec(1, cpu="")}}, "--cpu worker="),
    ({"replicas": {"Worker": ReplicaSpec(1, cpu="-1")}}, "--cpu worker="),
    ({"replicas": {"Worker": ReplicaSpec(1, memory="1e")}}, "--memory worker="),
    ({"replicas": {"Worker": ReplicaSpec(1, memory="1e1.5")}}, "--memory worker="),
    ({"replicas": {"Worker": ReplicaSpec(1, memory="4KiB")}}, "--memory worker="),
    ({"replicas": {"Worker": ReplicaSpec(1, memory="4Ki\n")}}, "--memory worker="),
    # a label key's prefix is a DNS subdomain of at most 253 characters (here 254)
    ({"labels": {("a" * 63 + ".") * 3 + "a" * 62 + "/team": "ml"}}, "--label"),
    ({"node_selector": {("a" * 63 + ".") * 3 + "a" * 62 + "/pool": "gpu"}}, "--node-selector"),
    # a '..' segment at the end of a mount path: the API server refuses any (validatePathNoBacksteps)
    ({"volumes": (Volume("data", "/mnt/.."),)}, "--volume"),
    # the container command (a config file's containerCommand) and --module-name: one program to run
    ({"module_name": "trainer.task", "command": ("python", "train.py")}, "--module-name"),
    # PYTHONPATH is --package-path's, whether by --env or from a Secret
    ({"module_name": "trainer.task", "package_path": "/mnt/code/trainer", "volumes": (Volume("c", "/mnt/code"),),
      "env": {"PYTHONPATH": "/x"}}, "--env"),
    ({"module_name": "trainer.task", "package_path": "/mnt/code/trainer", "volumes": (Volume("c", "/mnt/code"),),
      "secret_env": (SecretEnv("PYTHONPATH", "paths", "python"),)}, "--secret-env"),
])
def test_bad_values_name_the_field(kwargs, field):
    with pytest.raises(SpecError) as err:
        ps_job(**kwargs)
    assert err.value.field == field
    assert str(err.value).startswith(field)
    assert "\n" not in str(err.value)


def test_gpu_replicas_get_selector_toleration_and_limits_ps_do_not():
    spec = ps_job(replicas={"Chief": ReplicaSpec(1), "PS": ReplicaSpec(1), "Worker": ReplicaSpec(2, gpus=2)},
                  accelerator="nvidia-tesla-t4", node_selector={"pool": "train"})
    assert spec.replica_node_selector("Worker") == {"pool": "train",
                                                   "cloud.google.com/gke-accelerator": "nvidia-tesla-t4"}
    assert spec.replica_node_selector("PS") == {"pool": "train"}
    assert spec.replica_tolerations("Worker") == [{"key": "nvidia.com/gpu", "operator": "Exists",
                                                   "effect": "NoSchedule"}]
    assert spec.replica_tolerations("PS") == []
    assert spec.replica_resources("Worker") == {"limits": {"nvidia.com/gpu": "2"}}
    assert spec.replica_resources("PS") == {}


def test_roles_are_ordered_and_zero_counts_inactive():
    spec = ps_job(replicas={"Worker": ReplicaSpec(2), "Evaluator": ReplicaSpec(0), "Chief": ReplicaSpec(1)})
    assert list(spec.replicas) == ["Chief", "Worker", "Evaluator"]
    assert spec.active_roles() == ["Chief", "Worker"]


def test_job_dir_goes_first_in_container_args():
    spec = ps_job(job_dir="gs://my-bucket/run1", trainer_args=("--train-steps", "5"))
    assert spec.container_args() == ["--job-dir", "gs://my-bucket/run1", "--train-steps", "5"]


def test_spec_is_immutable():
    spec = ps_job(env={"A": "1"})
    with pytest.raises(TypeError):
        spec.env["B"] = "2"


@pytest.mark.parametrize("args, kwargs, field", [
    (("2",), {}, "ReplicaSpec.count"),
    ((True,), {}, "ReplicaSpec.count"),
    ((2.0,), {}, "ReplicaSpec.count"),
    ((None,), {}, "ReplicaSpec.count"),
    ((1,), {"gpus": "1"}, "ReplicaSpec.gpus"),
    ((1,), {"gpus": True}, "ReplicaSpec.gpus"),
    ((1,), {"cpu": 2}, "ReplicaSpec.cpu"),
    ((1,), {"memory": 4.5}, "ReplicaSpec.memory"),
])
def test_replica_spec_fields_are_type_checked(args, kwargs, field):
    with pytest.raises(SpecError) as err:
        ReplicaSpec(*args, **kwargs)
    assert err.value.field == field
    assert str(err.value).startswith(f"{field}: ") and ";" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("kwargs, message", [
    ({"replicas": {"Chief": ReplicaSpec(1), "Workers": ReplicaSpec(2)}},
     "replicas: unknown replica type 'Workers'; did you mean 'Worker'? use Chief, PS, Worker or Evaluator "
     "(TFJob's names, case-sensitive)"),
    ({"replicas": {"worker": ReplicaSpec(2)}},
     "replicas: unknown replica type 'worker'; did you mean 'Worker'? use Chief, PS, Worker or Evaluator "
     "(TFJob's names, case-sensitive)"),
    ({"replicas": {"Worker": 2}}, "replicas: 'Worker' maps to 2 (int), not a ReplicaSpec; "
                                  "use e.g. {'Worker': ReplicaSpec(2)}"),
    ({"trainer_args": "--train-steps=300"},
     "trainer_args: '--train-steps=300' is a str, which would be split into characters; "
     "use a list of strings, e.g. ['--train-steps=300']"),
    ({"trainer_args": ("--train-steps", 300)},
     "trainer_args: item 1, 300, is an int; use a list of strings, e.g. '300'"),
    ({"replicas": {"Worker": ReplicaSpec(99999999999999999999)}},
     "--workers: replica count 99999999999999999999 is too large; use at most 2147483647"),
    ({"run_policy": RunPolicy(backoff_limit=2**31)},
     "--backoff-limit: 2147483648 is too large; use at most 2147483647"),
    ({"job_dir": "gs://BUCKET/runs/x"},
     "--job-dir: bucket 'BUCKET' of 'gs://BUCKET/runs/x' is not a Cloud Storage bucket name; bucket names are 3-63 "
     "lowercase letters, digits, '-', '_' and '.' (up to 222 with dots, 63 between dots), starting and ending "
     "with a letter or digit, e.g. gs://bucket/runs/x"),
    ({"image": "UPPER/img:1"},
     "--image: repository path 'UPPER/img' of 'UPPER/img:1' must be lowercase; use e.g. upper/img:1 "
     "(uppercase only in a registry host with a '.' or ':PORT')"),
    ({"image": "img@sha256:short"},
     "--image: digest 'sha256:short' of 'img@sha256:short' is invalid; use sha256: and 64 lowercase hex digits, "
     "or drop the @ part to pull by tag"),
    ({"image": "a/b:c:d"}, "--image: 'a/b:c:d' has a ':' inside its repository path; use one tag after the last "
                           "'/', e.g. a/b:c"),
    # an example made of the refused value never carries its line breaks or terminal escapes
    ({"image": "a:b\n\x1b[2J:c"}, "--image: 'a:b\\n\\x1b[2J:c' has a ':' inside its repository path; use one tag "
                                 "after the last '/', e.g. gcr.io/my-project/trainer:0.1.0"),
    ({"image": "UPPER/img:a\x1b[2J"}, "--image: repository path 'UPPER/img' of 'UPPER/img:a\\x1b[2J' must be "
                                     "lowercase; use e.g. gcr.io/my-project/trainer:0.1.0 (uppercase only in a "
                                     "registry host with a '.' or ':PORT')"),
    ({"job_dir": "gs://BAD/x\x1b[2J"},
     "--job-dir: bucket 'BAD' of 'gs://BAD/x\\x1b[2J' is not a Cloud Storage bucket name; bucket names are 3-63 "
     "lowercase letters, digits, '-', '_' and '.' (up to 222 with dots, 63 between dots), starting and ending "
     "with a letter or digit, e.g. gs://bad/runs/1"),
    ({"replicas": {"Worker": ReplicaSpec(1, cpu="1.2.3")}},
     "--cpu worker=: '1.2.3' is not a Kubernetes quantity; use digits with at most one '.' and an optional "
     "suffix n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei or e<N> (e.g. 500m, 1.5, 4Gi)"),
    ({"env": {"V": "a\udcffb"}}, "--env: the value of V is not UTF-8 text (a byte of another encoding?), "
                                  "which Kubernetes would change; give it in UTF-8"),
    ({"trainer_args": ("--x", "\ud83d")}, "trainer arguments (after --): '\\ud83d' is not UTF-8 text (a byte of "
                                         "another encoding?), which Kubernetes would change; give it in UTF-8"),
    ({"command": ("python", "-c", "print(1)\x00")}, "command: 'print(1)\\x00' holds a NUL byte, which no process "
                                                   "can take in its arguments or environment; drop it"),
    ({"env": {"HF_TOKEN": "hf_secret\x00"}}, "--env: the value of HF_TOKEN holds a NUL byte, which no process "
                                            "can take in its arguments or environment; drop it"),
    ({"volumes": (Volume("data", "/mnt/\udce9"),)}, "--volume: '/mnt/\\udce9' is not UTF-8 text (a byte of "
                                                    "another encoding?), which Kubernetes would change; give it in UTF-8"),
])
def test_refusals_say_the_rule(kwargs, message):
    with pytest.raises(SpecError) as err:
        ps_job(**kwargs)
    assert str(err.value) == message


# Each field of JobSpec and of its parts given a value of another type: one line naming the
# field, the value and its type, and what to give. These failed deep inside (AttributeError,
# TypeError), or passed: "false" as a bool is true, {"A": 1} rendered an int env value.
@pytest.mark.parametrize("fields, message", [
    (lambda: {"name": 5}, "name: 5 is an int; use a string, e.g. 'mnist-ps'"),
    (lambda: {"namespace": None}, "namespace: None; use a string, e.g. 'default'"),
    (lambda: {"restart_policy": 1}, "restart_policy: 1 is an int; use a string, e.g. 'OnFailure'"),
    (lambda: {"success_policy": None}, "success_policy: None; use a string, e.g. 'AllWorkers'"),
    (lambda: {"accelerator": 4}, "accelerator: 4 is an int; use a string, e.g. 'nvidia-l4', or None"),
    (lambda: {"service_account": ["trainer"]},
     "service_account: ['trainer'] is a list; use a string, e.g. 'trainer', or None"),
    (lambda: {"queue_name": 1}, "queue_name: 1 is an int; use a string, e.g. 'team-queue', or None"),
    (lambda: {"priority_class": 1}, "priority_class: 1 is an int; use a string, e.g. 'high-priority', or None"),
    (lambda: {"gang": True, "gang_queue": 1}, "gang_queue: 1 is an int; use a string, e.g. 'training', or None"),
    (lambda: {"module_name": b"trainer.task"},
     "module_name: b'trainer.task' is a bytes; use a string, e.g. 'trainer.task', or None"),
    (lambda: {"job_dir": 5}, "job_dir: 5 is an int; use a string, e.g. 'gs://my-bucket/runs/mnist', or None"),
    (lambda: {"job_dir": Path("gs://my-bucket/runs/1")},
     "job_dir: PosixPath('gs:/my-bucket/runs/1') is a URL whose '//' the Path made '/'; give the URL as a "
     "string, e.g. 'gs://my-bucket/runs/1'"),
    (lambda: {"gang": "false"}, "gang: 'false' is a str; use True or False"),
    (lambda: {"istio_sidecar": "no"}, "istio_sidecar: 'no' is a str; use True or False"),
    (lambda: {"network_policy": 0}, "network_policy: 0 is an int; use True or False"),
    (lambda: {"gang": True, "gang_timeout_seconds": True},
     "gang_timeout_seconds: True is a bool; use an int, e.g. 300, or None"),
    (lambda: {"gang": True, "gang_min_available": "2"},
     "gang_min_available: '2' is a str; use an int, e.g. 2, or None"),
    (lambda: {"env": "A=1,B=2"}, "env: 'A=1,B=2' is a str, not a mapping; use a dict of strings, "
                                 "e.g. {'A': '1', 'B': '2'}"),
    (lambda: {"env": [("A", "1")]}, "env: [('A', '1')] is a list, not a mapping; use a dict of strings, "
                                    "e.g. {'A': '1'}"),
    (lambda: {"env": {"STEPS": 300}},
     "env: the value of 'STEPS', 300, is an int; use a string, e.g. {'STEPS': '300'}"),
    (lambda: {"labels": ("team", "ml")}, "labels: ('team', 'ml') is a tuple, not a mapping; use a dict of strings, "
                                         "e.g. {'team': 'ml'}"),
    (lambda: {"node_selector": {1: "a"}}, "node_selector: key 1 is an int; use a dict of strings, "
                                          "e.g. {'cloud.google.com/gke-nodepool': 'training'}"),
    (lambda: {"role_node_selectors": ["Worker"]},
     "role_node_selectors: ['Worker'] is a list, not a mapping; use a dict of replica type to node selector, "
     "e.g. {'Worker': {'cloud.google.com/gke-accelerator': 'nvidia-l4'}}"),
    (lambda: {"role_node_selectors": {"Worker": "pool=gpu"}},
     "role_node_selectors['Worker']: 'pool=gpu' is a str, not a mapping; use a dict of strings, "
     "e.g. {'pool': 'gpu'}"),
    (lambda: {"role_node_selectors": {"worker": {"pool": "gpu"}}},  # was: "use chief, ps, worker or evaluator"
     "role_node_selectors: unknown replica type 'worker'; did you mean 'Worker'? use Chief, PS, Worker or "
     "Evaluator (TFJob's names, case-sensitive)"),
    (lambda: {"run_policy": {"backoff_limit": 3}},
     "run_policy: {'backoff_limit': 3} is a dict; use a RunPolicy, e.g. RunPolicy(backoff_limit=3)"),
    (lambda: {"volumes": (("data", "/mnt/data"),)},
     "volumes[0]: ('data', '/mnt/data') is a tuple; use a Volume, e.g. Volume('data', '/mnt/data')"),
    (lambda: {"volumes": Volume("data", "/mnt/data")},
     "volumes: Volume(claim='data', mount_path='/mnt/data', read_only=False) is one Volume, not a list; use a "
     "list, e.g. [Volume(claim='data', mount_path='/mnt/data', read_only=False)]"),
    (lambda: {"secret_env": {"HF_TOKEN": "hf-token:token"}},
     "secret_env: {'HF_TOKEN': 'hf-token:token'} is a dict, not a list; use a list of SecretEnv, "
     "e.g. [SecretEnv('HF_TOKEN', 'hf-token', 'token')]"),
    (lambda: {"trainer_args": None}, "trainer_args: None, not a list; use a list of strings, "
                                     "e.g. ['--train-steps', '300']"),
    (lambda: {"volumes": [Volume("data", "/mnt/data", read_only="false")]},
     "Volume.read_only: 'false' is a str; use True or False"),
    (lambda: {"volumes": [Volume(5, "/mnt/data")]}, "Volume.claim: 5 is an int; use a string, e.g. 'training-data'"),
    (lambda: {"volumes": [Volume("data", None)]}, "Volume.mount_path: None; use a string, e.g. '/mnt/data'"),
    (lambda: {"secret_env": [SecretEnv("HF_TOKEN", "hf-token", 0)]},
     "SecretEnv.key: 0 is an int; use a string, e.g. 'token'"),
    (lambda: {"run_policy": RunPolicy(clean_pod_policy=None)},
     "RunPolicy.clean_pod_policy: None; use a string, e.g. 'Running'"),
    (lambda: {"run_policy": RunPolicy(backoff_limit=True)},
     "RunPolicy.backoff_limit: True is a bool; use an int, e.g. 3, or None"),
    (lambda: {"run_policy": RunPolicy(ttl_seconds_after_finished="3600")},
     "RunPolicy.ttl_seconds_after_finished: '3600' is a str; use an int, e.g. 3600, or None"),
    (lambda: {"run_policy": RunPolicy(active_deadline_seconds=60.0)},
     "RunPolicy.active_deadline_seconds: 60.0 is a float; use an int, e.g. 7200, or None"),
    (lambda: {"replicas": {"Worker": ReplicaSpec(1, cpu=2)}},
     "ReplicaSpec.cpu: 2 is an int; use a string, e.g. '2', or None"),
])
def test_a_value_of_another_type_is_refused_naming_the_field(fields, message):
    with pytest.raises(SpecError) as err:
        ps_job(**fields())
    assert str(err.value) == message


def test_a_path_is_taken_as_its_string_where_a_path_goes():
    """job_dir, package_path, a Volume's mount_path and the argument lists take a pathlib.Path
    (as subprocess does): the spec is the one given with strings."""
    as_paths = ps_job(job_dir=Path("runs/mnist"), module_name="trainer.task",
                      package_path=PurePosixPath("/mnt/trainer"), volumes=[Volume("data", PurePosixPath("/mnt/data"))],
                      trainer_args=["--data-dir", Path("/mnt/data/mnist")])
    assert as_paths == ps_job(job_dir="runs/mnist", module_name="trainer.task", package_path="/mnt/trainer",
                              volumes=(Volume("data", "/mnt/data"),), trainer_args=("--data-dir", "/mnt/data/mnist"))
    assert type(as_paths.job_dir) is str and type(as_paths.volumes[0].mount_path) is str
    assert ps_job(command=[Path("/usr/bin/python3"), "train.py"]).command == ("/usr/bin/python3", "train.py")


def test_a_package_path_is_kept_without_repeated_or_trailing_slashes():
    """The chart derives PYTHONPATH from the path it is given: /mnt/code/trainer// gave it
    /mnt/code/trainer, where the launcher's was /mnt/code (the package not importable)."""
    spec = ps_job(module_name="trainer.task", package_path="/mnt//code/trainer//",
                  volumes=[Volume("code", "/mnt/code")])
    assert (spec.package_path, spec.package_parent()) == ("/mnt/code/trainer", "/mnt/code")


def test_a_package_at_the_root_gets_the_root_as_its_parent():
    """--package-path /trainer: PYTHONPATH and the working directory are /, not empty (an empty
    PYTHONPATH and no workingDir would run the image's own trainer from its /app)."""
    spec = ps_job(module_name="trainer.task", package_path="/trainer", volumes=[Volume("code", "/trainer")])
    assert spec.package_parent() == "/"
    assert {"name": "PYTHONPATH", "value": "/"} in spec.container_env()


@pytest.mark.parametrize("workers", [2, 10])
def test_a_name_is_as_long_as_its_longest_replica_name_allows(workers):
    """The operator names each replica's pod and service NAME-ROLE-INDEX, a DNS-1035 label (at
    most 63 characters): NAME-worker-9 of 63 is taken, of 64 refused (the index is count - 1)."""
    replicas = {"Chief": ReplicaSpec(1), "PS": ReplicaSpec(1), "Worker": ReplicaSpec(workers)}
    longest = 63 - len(f"-worker-{workers - 1}")
    ps_job(name="a" * longest, replicas=replicas)
    with pytest.raises(SpecError) as err:
        ps_job(name="a" * (longest + 1), replicas=replicas)
    assert str(err.value) == (f"--name: {'a' * (longest + 1)!r} is too long: replica service names would reach 64 "
                              "characters (max 63); use a shorter name")


DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize("kwargs", [
    {"image": "tfjob-trainer:0.1.0"},
    {"image": "trainer"},
    {"image": "gcr.io/my-project/trainer:0.1.0"},
    {"image": "us-docker.pkg.dev/my-project/repo/trainer:1.2-gpu"},
    {"image": f"localhost:5000/team/trainer:v1@{DIGEST}"},
    {"image": f"trainer@{DIGEST}"},
    {"image": "trainer@sha512:" + "0" * 128},
    {"image": "localhost/tfjob-trainer:0123456789ab"},
    {"image": "registry.local:5000/trainer:dev"},
    {"image": "[::1]:5000/trainer:Dev_1.0"},
    {"image": "Registry.Example.com/team/trainer"},
    {"image": "a__b-c---d/e_f.g:" + "x" * 128},  # "a__b.c/..." would be a (bad) registry host
    {"job_dir": "gs://my-bucket/run1"},
    {"job_dir": "gs://abc"},
    {"job_dir": "gs://my_bucket_1/"},
    {"job_dir": "gs://" + ".".join(["a" * 63] * 3) + "/x"},
    {"job_dir": "gs://bucket-1/runs/a b/{{x}}"},
    {"trainer_args": ["--train-steps", "300"], "command": ("python", "-m", "trainer.task")},
    {"trainer_args": iter(["--x"])},
    {"labels": {("a" * 63 + ".") * 3 + "a" * 61 + "/team": "ml"}},  # a prefix of 253 characters
    {"replicas": {"Chief": ReplicaSpec(1), "PS": ReplicaSpec(1), "Worker": ReplicaSpec(2**31 - 1)}},
    {"run_policy": RunPolicy(ttl_seconds_after_finished=2**31 - 1, active_deadline_seconds=2**53 - 1,
                             backoff_limit=2**31 - 1)},
    *({"replicas": {"Worker": ReplicaSpec(1, cpu=q, memory=q)}}
      for q in ("500m", "2", "1.5", ".5", "1.", "+1", "4Gi", "1e3", "1E3", "1E", "2e-3", "100n", "10u", "0")),
])
def test_valid_values_are_accepted(kwargs):
    ps_job(**kwargs)


def test_local_capacity_counts_every_replica_against_the_memory_there_is():
    """Six replicas of at least LOCAL_REPLICA_BYTES each: they fit in six times that, not in a byte less."""
    job = ps_job(replicas={"Chief": ReplicaSpec(1), "PS": ReplicaSpec(1), "Worker": ReplicaSpec(4)})
    check_local_capacity(job, "local", available=6 * LOCAL_REPLICA_BYTES)
    with pytest.raises(SpecError) as refused:
        check_local_capacity(job, "local", available=6 * LOCAL_REPLICA_BYTES - 1)
    assert str(refused.value) == (
        "--workers: the local backend runs each of the job's 6 replicas as a process on this machine, and they need "
        "at least 1.2 GB of memory (200 MB each); 1.2 GB is available; use at most 5 replicas here, or a cluster "
        "(--backend k8s)")
    many_ps = ps_job(replicas={"Chief": ReplicaSpec(1), "PS": ReplicaSpec(8), "Worker": ReplicaSpec(2)})
    with pytest.raises(SpecError, match=r"^--ps: .* 11 replicas .* use at most 0 replicas here"):
        check_local_capacity(many_ps, "local", available=LOCAL_REPLICA_BYTES - 1)
    check_local_capacity(job, "k8s", available=0)  # a cluster's scheduler places them
    check_local_capacity(ps_job(command=("python", "serve.py")), "local", available=0)  # another program's needs


def test_available_memory_is_this_machines_at_most():
    with open("/proc/meminfo") as meminfo:
        total = next(int(line.split()[1]) * 1024 for line in meminfo if line.startswith("MemTotal:"))
    assert 0 < available_memory() <= total
