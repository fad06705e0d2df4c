"""Flags (+ config.yaml) -> JobSpec: defaults, overrides, per-role values, trainer args."""
from __future__ import annotations

import datetime as dt
import re

import pytest

from launcher.cli import build_parser, split_trainer_args
from launcher.cli.args import build_spec, default_name, key_values, per_role
from launcher.spec import SpecError


def spec_for(*argv: str, trainer_args: tuple[str, ...] = ()):
    args = build_parser().parse_args(["render", *argv])
    return build_spec(args, trainer_args)[0]


def counts(spec) -> dict[str, int]:
    return {role: replica.count for role, replica in spec.replicas.items() if replica.count}


def test_plain_submit_is_a_small_ps_job():
    assert counts(spec_for("--name", "a")) == {"Chief": 1, "PS": 1, "Worker": 2}


def test_workers_and_ps_from_the_readme():
    assert counts(spec_for("--name", "a", "--workers", "2", "--ps", "1")) == {"Chief": 1, "PS": 1, "Worker": 2}


def test_chief_defaults_to_zero_without_ps():
    assert counts(spec_for("--name", "a", "--ps", "0", "--workers", "3")) == {"Worker": 3}


def test_explicit_chief_without_ps():
    assert counts(spec_for("--name", "a", "--ps", "0", "--workers", "0", "--chief", "1")) == {"Chief": 1}


def test_job_flags_reach_the_spec():
    spec = spec_for("--name", "job-1", "-n", "team-a", "--image", "gcr.io/p/t:1", "--job-dir", "gs://bkt/j",
                    "--env", "A=1", "--env", "B==2", "--label", "team=ml", "--node-selector", "pool=gpu",
                    "--restart-policy", "Never", "--clean-pod-policy", "All", "--ttl-seconds", "60",
                    "--active-deadline-seconds", "600", "--backoff-limit", "2", "--service-account", "trainer",
                    trainer_args=("--train-steps", "5"))
    assert (spec.name, spec.namespace, spec.image, spec.job_dir) == ("job-1", "team-a", "gcr.io/p/t:1", "gs://bkt/j")
    assert dict(spec.env) == {"A": "1", "B": "=2"}
    assert dict(spec.labels) == {"team": "ml"}
    assert dict(spec.node_selector) == {"pool": "gpu"}
    assert spec.restart_policy == "Never"
    assert (spec.run_policy.clean_pod_policy, spec.run_policy.ttl_seconds_after_finished,
            spec.run_policy.active_deadline_seconds, spec.run_policy.backoff_limit) == ("All", 60, 600, 2)
    assert spec.service_account == "trainer"
    assert spec.trainer_args == ("--train-steps", "5")


def test_cpu_and_memory_per_role_and_bare():
    spec = spec_for("--name", "a", "--cpu", "1", "--cpu", "worker=4", "--memory", "ps=8Gi")
    assert {r: s.cpu for r, s in spec.replicas.items()} == {"Chief": "1", "PS": "1", "Worker": "4"}
    assert {r: s.memory for r, s in spec.replicas.items()} == {"Chief": None, "PS": "8Gi", "Worker": None}


@pytest.mark.parametrize("order", [("--cpu", "worker=4", "--cpu", "1"), ("--cpu", "1", "--cpu", "worker=4")])
def test_a_per_role_value_wins_over_the_bare_value_in_any_order(order):
    spec = spec_for("--name", "a", *order)
    assert {r: s.cpu for r, s in spec.replicas.items()} == {"Chief": "1", "PS": "1", "Worker": "4"}


def test_gpu_flags():
    spec = spec_for("--name", "a", "--gpus-per-worker", "2", "--gpus-per-chief", "1", "--accelerator", "nvidia-l4")
    assert (spec.replicas["Worker"].gpus, spec.replicas["Chief"].gpus, spec.replicas["PS"].gpus) == (2, 1, 0)
    assert spec.accelerator == "nvidia-l4"


def test_config_sets_defaults_and_flags_override(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("trainingInput:\n  scaleTier: STANDARD_1\n  jobDir: gs://bkt/from-config\n"
                      "  args: [--train-steps, '50']\n  masterConfig: {imageUri: 'gcr.io/p/cfg:1'}\n")
    from_file = spec_for("--name", "a", "--config", str(config))
    assert counts(from_file) == {"Chief": 1, "PS": 3, "Worker": 4}
    assert (from_file.job_dir, from_file.image, from_file.trainer_args) == ("gs://bkt/from-config", "gcr.io/p/cfg:1",
                                                                          ("--train-steps", "50"))
    overridden = spec_for("--name", "a", "--config", str(config), "--workers", "8", "--job-dir", "/tmp/out",
                          "--image", "gcr.io/p/flag:2", trainer_args=("--train-steps", "7"))
    assert counts(overridden) == {"Chief": 1, "PS": 3, "Worker": 8}
    assert (overridden.job_dir, overridden.image, overridden.trainer_args) == ("/tmp/out", "gcr.io/p/flag:2",
                                                                             ("--train-steps", "7"))


def test_each_flag_that_replaces_a_config_files_value_says_so(tmp_path):
    """Flags win over the file, as gcloud's do, in one note each: the file's trainer args
    (a --model in them) are not dropped unseen."""
    config = tmp_path / "config.yaml"
    config.write_text("trainingInput:\n  scaleTier: STANDARD_1\n  jobDir: gs://bkt/from-config\n"
                      "  args: [--train-steps, '50', --model, taxi]\n  masterConfig: {imageUri: 'gcr.io/p/cfg:1'}\n"
                      "  scheduling: {maxRunningTime: 7200s}\nlabels: {team: cfg, owner: al}\n")
    args = build_parser().parse_args(["render", "--name", "a", "--config", str(config), "--workers", "8",
                                      "--job-dir", "/tmp/out", "--image", "gcr.io/p/flag:2", "--label", "team=b",
                                      "--label", "owner=al", "--active-deadline-seconds", "60"])
    spec, notes = build_spec(args, ("--train-steps", "7"))
    assert dict(spec.labels) == {"team": "b", "owner": "al"}  # the flag's team, not the file's
    source = f"--config {config}"
    assert [note for note in notes if "instead of" in note] == [
        f"note: --workers 8 is used instead of 4 from {source} (the flag wins)",
        f"note: --image gcr.io/p/flag:2 is used instead of gcr.io/p/cfg:1 from {source} (the flag wins)",
        f"note: --job-dir /tmp/out is used instead of gs://bkt/from-config from {source} (the flag wins)",
        f"note: --active-deadline-seconds 60 is used instead of 7200 from {source} (the flag wins)",
        f"note: --label team=b is used instead of team=cfg from {source} (the flag wins)",
        f"note: the trainer arguments after -- are used instead of those from {source} (--train-steps 50 --model "
        "taxi); repeat after -- what you keep of them"]
    same = build_parser().parse_args(["render", "--name", "a", "--config", str(config), "--workers", "4",
                                      "--image", "gcr.io/p/cfg:1"])
    assert not [note for note in build_spec(same, ("--train-steps", "50", "--model", "taxi"))[1]
                if "instead of" in note]  # the same values: nothing to say
    tier = build_parser().parse_args(["render", "--name", "a", "--scale-tier", "STANDARD_1", "--ps", "1"])
    assert "note: --ps 1 is used instead of 3 from --scale-tier STANDARD_1 (the flag wins)" in build_spec(tier)[1]
    gpu = build_parser().parse_args(["render", "--name", "a", "--scale-tier", "BASIC_GPU", "--accelerator", "nvidia-l4"])
    spec, notes = build_spec(gpu)
    assert spec.accelerator == "nvidia-l4"  # one GPU type per job: the chief's GPU from the tier too
    assert "note: --accelerator nvidia-l4 is used instead of nvidia-tesla-k80 from --scale-tier BASIC_GPU (the flag " \
           "wins)" in notes


def test_split_trainer_args_at_first_double_dash():
    assert split_trainer_args(["submit", "--workers", "2", "--", "--train-steps", "1", "--", "x"]) == (
        ["submit", "--workers", "2"], ("--train-steps", "1", "--", "x"))
    assert split_trainer_args(["render"]) == (["render"], ())


def test_default_name_is_dns_and_uses_the_model():
    now = dt.datetime(2025, 1, 2, 3, 4, 5)
    assert default_name((), now, "b2x9") == "tfjob-20250102-030405-b2x9"
    assert default_name(("--model", "MNIST_cnn"), now, "b2x9") == "mnist-cnn-20250102-030405-b2x9"
    assert default_name(("--model=9lives",), now, "b2x9") == "lives-20250102-030405-b2x9"
    assert default_name(("--model", "___"), now, "b2x9") == "tfjob-20250102-030405-b2x9"
    assert default_name(("--model", "mnist", "--model=taxi"), now, "b2x9") == "taxi-20250102-030405-b2x9"  # the last


def test_two_default_names_of_the_same_second_differ():
    """Two `submit --detach` in a row used to collide: the second was refused (name taken)."""
    now = dt.datetime(2025, 1, 2, 3, 4, 5)
    names = {default_name((), now) for _ in range(20)}
    assert len(names) >= 19  # 27**4 = 531,441 suffixes: even one repeat among 20 is a 1-in-2,800 event
    assert all(re.fullmatch(r"tfjob-20250102-030405-[bcdfghjklmnpqrstvwxz2456789]{4}", name) for name in names)


def test_default_name_builds_a_valid_spec():
    assert spec_for().name.startswith("tfjob-")


def test_key_values_and_per_role_refuse_bad_items():
    assert key_values(["a=b=c"], "--env") == {"a": "b=c"}
    with pytest.raises(SpecError, match="KEY=VALUE"):
        key_values(["novalue"], "--env")
    with pytest.raises(SpecError, match="unknown replica type 'master'"):
        per_role(["master=2"], "--cpu")
    assert per_role(["PS=1"], "--cpu") == {"PS": "1"}


def test_per_role_node_selectors_reach_only_their_role():
    spec = spec_for("--name", "a", "--node-selector", "pool=cpu", "--node-selector", "worker:pool=gpu",
                    "--node-selector", "worker:cloud.google.com/gke-accelerator=nvidia-b200",
                    "--gpus-per-worker", "1")
    assert spec.replica_node_selector("Worker") == {"pool": "gpu", "cloud.google.com/gke-accelerator": "nvidia-b200"}
    assert spec.replica_node_selector("PS") == {"pool": "cpu"} == spec.replica_node_selector("Chief")


@pytest.mark.parametrize("given, suggestion", [
    ("NVIDIA_TESLA_T4", "did you mean nvidia-tesla-t4?"),
    ("nvidia-tesla-t1000", "did you mean one of nvidia-tesla-v100, nvidia-tesla-p100, nvidia-tesla-a100?"),
    ("nvidia-l4-24gb", "did you mean nvidia-l4?"),
    ("nvidia-a100-80g", "did you mean nvidia-a100-80gb?"),
])
def test_accelerator_near_misses_get_a_suggestion(given, suggestion):
    with pytest.raises(SpecError) as caught:
        spec_for("--name", "a", "--gpus-per-worker", "1", "--accelerator", given)
    assert caught.value.field == "--accelerator" and suggestion in str(caught.value)


def test_an_end_of_life_accelerator_is_noted():
    args = build_parser().parse_args(["render", "--name", "a", "--gpus-per-worker", "1",
                                      "--accelerator", "nvidia-tesla-k80"])
    spec, notes = build_spec(args)
    assert spec.accelerator == "nvidia-tesla-k80"
    assert notes == ["note: nvidia-tesla-k80 is end-of-life on GKE (no new node pools); "
                     "consider --accelerator nvidia-tesla-t4 or nvidia-l4"]


def test_a_config_accelerator_error_names_the_config_field(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("trainingInput:\n  scaleTier: CUSTOM\n  masterType: n1-standard-4\n  workerCount: 2\n"
                      "  workerConfig: {acceleratorConfig: {count: 1, type: NVIDIA_TESLA_T1000}}\n")
    with pytest.raises(SpecError) as caught:
        spec_for("--name", "a", "--config", str(config))
    assert caught.value.field == "--config trainingInput.workerConfig.acceleratorConfig.type"


def test_a_rule_broken_by_the_config_file_names_the_file(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("trainingInput:\n  scaleTier: CUSTOM\n  masterType: n1-standard-4\n  workerCount: 0\n"
                      "  parameterServerCount: 1\n")
    with pytest.raises(SpecError) as caught:
        spec_for("--name", "a", "--config", str(config))
    assert caught.value.field == f"--config {config}"
    assert str(caught.value).startswith(f"--config {config}: --workers from the file: parameter-server training")
    with pytest.raises(SpecError) as flagged:  # the same rule broken by the flag names the flag
        spec_for("--name", "a", "--config", str(config), "--workers", "0")
    assert flagged.value.field == "--workers"
    assert spec_for("--name", "a", "--config", str(config), "--workers", "2").count("Worker") == 2


def test_gcloud_scale_tier_and_accelerator_flags():
    standard = spec_for("--name", "a", "--scale-tier", "standard_1")
    assert {r: s.count for r, s in standard.replicas.items()} == {"Chief": 1, "PS": 3, "Worker": 4}
    assert spec_for("--name", "a", "--scale-tier", "STANDARD_1", "--workers", "2").count("Worker") == 2
    gpu = spec_for("--name", "a", "--workers", "2", "--master-accelerator", "type=nvidia-tesla-t4,count=1",
                   "--worker-accelerator", "type=NVIDIA_TESLA_T4,count=2")
    assert gpu.accelerator == "nvidia-tesla-t4"
    assert (gpu.replicas["Chief"].gpus, gpu.replicas["Worker"].gpus, gpu.replicas["PS"].gpus) == (1, 2, 0)


def test_a_gcloud_submit_command_line_renders_the_job_it_describes():
    """`gcloud ai-platform jobs submit training JOB ...` with `gcloud ai-platform jobs submit
    training` replaced by `launcher render`: every flag is taken; those for Cloud ML's own
    machines are noted as ignored."""
    args = build_parser().parse_args([
        "render", "census_Wide_1", "--worker-count", "3", "--parameter-server-count", "2",
        "--master-image-uri", "gcr.io/p/t:1", "--worker-image-uri", "gcr.io/p/t:1",
        "--parameter-server-image-uri", "gcr.io/p/t:1", "--labels", "team=ml,env=dev", "--labels", "owner=me",
        "--use-chief-in-tf-config", "true", "--region", "us-central1", "--runtime-version", "2.11",
        "--python-version", "3.7", "--staging-bucket", "gs://b", "--packages", "t.tar.gz,u.tar.gz",
        "--enable-web-access", "--kms-key", "k", "--kms-keyring", "r", "--kms-location", "l", "--kms-project", "p",
        "--network", "projects/1/global/networks/n"])
    spec, notes = build_spec(args)
    assert (spec.name, spec.image) == ("census-wide-1", "gcr.io/p/t:1")
    assert counts(spec) == {"Chief": 1, "PS": 2, "Worker": 3}
    assert dict(spec.labels) == {"team": "ml", "env": "dev", "owner": "me"}
    ignored = "is a Cloud ML setting with no TFJob equivalent; ignored"
    assert notes == [
        f"note: --region {ignored}: the cluster is the kubeconfig context's (choose it with --context)",
        f"note: --runtime-version {ignored}: the replicas run the TensorFlow of --image",
        f"note: --python-version {ignored}: the replicas run the Python of --image",
        f"note: --staging-bucket {ignored}: the launcher uploads nothing",
        f"note: --packages {ignored}: the launcher uploads and installs no packages; the module must be in --image, "
        "or give its directory with --package-path",
        f"note: --network {ignored}: the pods use the cluster's network",
        *(f"note: --{flag} {ignored}" for flag in ("enable-web-access", "kms-key", "kms-keyring", "kms-location",
                                                    "kms-project"))]
    false = build_parser().parse_args(["render", "a", "--use-chief-in-tf-config", "False"])
    assert build_spec(false)[1] == [
        "note: --use-chief-in-tf-config false is ignored; TFJob always names the coordinator 'chief' in TF_CONFIG"]
    assert build_spec(build_parser().parse_args(["render", "a"]))[1] == []  # nothing given, nothing noted


@pytest.mark.parametrize("argv, line", [
    (["a", "--name", "b"], "--name: given twice: 'b' and gcloud's JOB 'a'; give one"),
    (["Bad.Name"], "JOB: 'Bad.Name' is not a job id here: as a name it must be a DNS-1035 label; use letters, "
                   "digits and '_', starting with a letter (e.g. census_1)"),
    (["a", "--worker-image-uri", "gcr.io/p/w:1"],
     "--worker-image-uri: 'gcr.io/p/w:1' differs from the job's image 'tfjob-trainer:0.1.0'; a TFJob here runs one "
     "image for all replicas: give it once, as --image (or --master-image-uri)"),
    (["a", "--master-image-uri", "gcr.io/p/t:1", "--parameter-server-image-uri", "gcr.io/p/ps:1"],
     "--parameter-server-image-uri: 'gcr.io/p/ps:1' differs from the job's image 'gcr.io/p/t:1'; a TFJob here runs "
     "one image for all replicas: give it once, as --image (or --master-image-uri)"),
    (["a", "--parameter-server-accelerator", "type=nvidia-tesla-t4,count=1"],
     "--parameter-server-accelerator: parameter servers get no GPUs here (they hold the variables, on CPU nodes); "
     "drop it, or give the GPUs to --worker-accelerator"),
    (["a", "--use-chief-in-tf-config", "yes"], "--use-chief-in-tf-config: 'yes' is not true or false; use true "
                                               "(what TFJob does)"),
    (["a", "--labels", "team=ml,env"], "--labels: 'env' is not KEY=VALUE; use e.g. --labels key=value"),
    (["a", "--service-account", "trainer@p.iam.gserviceaccount.com"],
     "--service-account: 'trainer@p.iam.gserviceaccount.com' is a Google service account (gcloud's flag); here it "
     "names the pods' Kubernetes ServiceAccount: give the one Workload Identity binds to it, e.g. --service-account "
     "trainer"),
])
def test_gcloud_flags_that_cannot_be_taken_as_given_are_refused(argv, line):
    with pytest.raises(SpecError) as caught:
        build_spec(build_parser().parse_args(["render", *argv]))
    assert str(caught.value) == line


def test_scale_tier_overrides_the_config_files(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("trainingInput: {scaleTier: BASIC, jobDir: gs://bucket/run}\n")
    spec = spec_for("--name", "a", "--config", str(config), "--scale-tier", "PREMIUM_1")
    assert spec.count("Worker") == 19 and spec.job_dir == "gs://bucket/run"


def test_a_job_resources_job_id_names_the_job_and_its_output_fields_are_noted(tmp_path):
    """What `gcloud ai-platform jobs describe --format yaml` prints, given as --config."""
    config = tmp_path / "job.yaml"
    config.write_text("jobId: census_wide_1\ncreateTime: '2020-01-01T00:00:00Z'\nstate: SUCCEEDED\n"
                      "trainingInput: {scaleTier: BASIC}\n")
    args = build_parser().parse_args(["render", "--config", str(config)])
    spec, notes = build_spec(args)
    assert spec.name == "census-wide-1"
    assert "note: createTime, state are the server's output in a Job resource; ignored" in notes
    assert spec_for("--config", str(config), "--name", "mine").name == "mine"  # the flag wins


def test_scale_tier_overrides_a_custom_files_counts_and_machines_with_a_note(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("trainingInput: {scaleTier: CUSTOM, masterType: n1-standard-8, workerType: n1-standard-8, "
                      "workerCount: 2, parameterServerCount: 1}\n")
    args = build_parser().parse_args(["render", "--name", "a", "--config", str(config), "--scale-tier", "STANDARD_1"])
    spec, notes = build_spec(args)
    assert counts(spec) == {"Chief": 1, "PS": 3, "Worker": 4}  # STANDARD_1's, not the file's
    assert all(replica.cpu is None for replica in spec.replicas.values())  # no n1-standard-8 requests
    assert ("note: --scale-tier STANDARD_1 replaces the file's scaleTier CUSTOM; its masterType, workerType, "
            "workerCount, parameterServerCount are ignored (the tier fixes them)") in notes


@pytest.mark.parametrize("argv, field", [
    (["--scale-tier", "CUSTOM"], "--scale-tier"),
    (["--worker-accelerator", "nvidia-tesla-t4"], "--worker-accelerator"),
    (["--worker-accelerator", "type=nvidia-tesla-t4,count=0"], "--worker-accelerator"),
    (["--worker-accelerator", "type=nvidia-tesla-t9,count=1"], "--worker-accelerator"),
    (["--worker-accelerator", "type=nvidia-tesla-t4,cnt=2"], "--worker-accelerator"),  # not 1 GPU, silently
    (["--master-accelerator", "type=nvidia-l4", "--worker-accelerator", "type=nvidia-tesla-t4"], "--worker-accelerator"),
    (["--accelerator", "nvidia-l4", "--worker-accelerator", "type=nvidia-tesla-t4"], "--worker-accelerator"),
])
def test_bad_gcloud_flags(argv, field):
    from launcher.cli import UsageError

    with pytest.raises((SpecError, UsageError)) as caught:
        spec_for("--name", "a", *argv)
    assert caught.value.field == field


def test_machine_types_become_requests_that_fill_the_node_and_its_selector():
    args = build_parser().parse_args(["render", "--name", "a", "--worker-machine-type", "n1-standard-8",
                                      "--parameter-server-machine-type", "n1-highmem-2", "--cpu", "ps=1"])
    spec, notes = build_spec(args)
    worker, ps = spec.replicas["Worker"], spec.replicas["PS"]
    # n1-standard-8: 8 vCPU, 30 GB; GKE keeps 90m CPU and about 3.4 GiB; 200m / 512Mi left for system pods
    assert (worker.cpu, worker.memory) == ("7710m", "24576Mi")
    assert ps.cpu == "1"  # the explicit per-role flag wins
    assert spec.replica_node_selector("Worker") == {"node.kubernetes.io/instance-type": "n1-standard-8"}
    assert spec.replica_node_selector("Chief") == {}
    assert notes[0].startswith("note: --worker-machine-type n1-standard-8: worker pods request cpu 7710m")


@pytest.mark.parametrize("machine", ["n1-standard-3", "m1-ultramem-40", "N1-STANDARD-8", "standard_gpu"])
def test_unknown_machine_types_are_refused(machine):
    with pytest.raises(SpecError) as caught:
        spec_for("--name", "a", "--worker-machine-type", machine)
    assert caught.value.field == "--worker-machine-type" and "--cpu ROLE=" in str(caught.value)


def test_gke_allocatable_follows_the_documented_reservation():
    from launcher.machine_types import gke_allocatable

    assert gke_allocatable(1, 3840) == (940, 3840 - int(0.25 * 3840) - 100)
    cpu, _ = gke_allocatable(4, 16384)
    assert cpu == 4000 - 60 - 10 - 10  # 6% of core 1, 1% of core 2, 0.5% of cores 3-4
    _, memory = gke_allocatable(4, 16384)
    assert memory == int(16384 - (1024 + 819.2 + 819.2) - 100)  # 25% of 4 GiB, 20% of the next 4, 10% of the next 8


def test_config_machine_types_become_requests_as_the_flags_do(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("trainingInput:\n  scaleTier: CUSTOM\n  masterType: n1-highcpu-16\n  workerType: n1-standard-8\n"
                      "  parameterServerType: complex_model_m\n  evaluatorType: n1-highmem-8\n  workerCount: 2\n"
                      "  parameterServerCount: 1\n")
    args = build_parser().parse_args(["render", "--name", "a", "--config", str(config), "--memory", "worker=20Gi"])
    spec, notes = build_spec(args)
    chief, worker, ps = spec.replicas["Chief"], spec.replicas["Worker"], spec.replicas["PS"]
    flags, _ = build_spec(build_parser().parse_args(["render", "--name", "a", "--worker-machine-type", "n1-standard-8",
                                                     "--master-machine-type", "n1-highcpu-16"]))
    assert (worker.cpu, chief.cpu, chief.memory) == (flags.replicas["Worker"].cpu, flags.replicas["Chief"].cpu,
                                                     flags.replicas["Chief"].memory)
    assert worker.memory == "20Gi"  # --memory ROLE= wins over the file, as over the flag
    assert spec.replica_node_selector("Chief") == {"node.kubernetes.io/instance-type": "n1-highcpu-16"}
    assert (ps.cpu, ps.memory) == (None, None) and spec.replica_node_selector("PS") == {}
    assert "Evaluator" not in spec.replicas  # evaluatorCount 0: its type changes nothing
    assert any(n.startswith("note: trainingInput.parameterServerType 'complex_model_m' is not a Compute Engine "
                            "machine type the launcher knows") for n in notes)
    assert any(n.startswith("note: trainingInput.workerType n1-standard-8: worker pods request cpu 7710m") for n in notes)
    override = build_parser().parse_args(["render", "--name", "a", "--config", str(config),
                                          "--worker-machine-type", "n1-standard-4"])
    spec, _ = build_spec(override)
    assert spec.replica_node_selector("Worker") == {"node.kubernetes.io/instance-type": "n1-standard-4"}
