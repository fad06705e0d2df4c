"""Cloud ML `trainingInput` -> replica counts, GPUs and job fields."""
from __future__ import annotations

import pytest

from launcher import cloudml
from launcher.spec import SpecError


@pytest.mark.parametrize("tier, replicas", [
    ("BASIC", {"Chief": 1}),
    ("BASIC_GPU", {"Chief": 1}),
    ("STANDARD_1", {"Chief": 1, "Worker": 4, "PS": 3}),
    ("PREMIUM_1", {"Chief": 1, "Worker": 19, "PS": 11}),
])
def test_scale_tiers_map_to_the_documented_counts(tier, replicas):
    assert cloudml.from_training_input({"scaleTier": tier}).replicas == replicas


def test_scale_tier_defaults_to_basic():
    assert cloudml.from_training_input({}).replicas == {"Chief": 1}


def test_basic_gpu_puts_one_k80_on_the_chief():
    config = cloudml.from_training_input({"scaleTier": "BASIC_GPU"})
    assert config.gpus == {"Chief": 1}
    assert config.accelerator == "nvidia-tesla-k80"


def test_custom_counts_accelerators_and_job_fields():
    config = cloudml.from_training_input({
        "scaleTier": "CUSTOM", "masterType": "n1-standard-8", "workerCount": "5",
        "parameterServerCount": 2, "evaluatorCount": 1,
        "workerConfig": {"acceleratorConfig": {"count": 2, "type": "NVIDIA_TESLA_V100"}},
        "masterConfig": {"imageUri": "gcr.io/p/t:1", "containerCommand": ["python", "-m", "trainer.task"]},
        "args": ["--train-steps", 100], "jobDir": "gs://b/j", "scheduling": {"maxRunningTime": "3600s"},
    }, labels={"team": "ml"})
    assert config.replicas == {"Chief": 1, "Worker": 5, "PS": 2, "Evaluator": 1}
    assert config.gpus == {"Worker": 2}
    assert config.accelerator == "nvidia-tesla-v100"
    assert config.image == "gcr.io/p/t:1"
    assert config.command == ("python", "-m", "trainer.task")
    assert config.trainer_args == ("--train-steps", "100")
    assert config.job_dir == "gs://b/j"
    assert config.active_deadline_seconds == 3600
    assert config.labels == {"team": "ml"}


def test_the_same_container_fields_in_every_replica_config_are_taken():
    same = {"containerCommand": ["python", "-m", "trainer.task"], "containerArgs": ["--train-steps", "5"]}
    config = cloudml.from_training_input({"scaleTier": "CUSTOM", "masterType": "n1-standard-4", "workerCount": 2,
                                          "masterConfig": dict(same), "workerConfig": dict(same)})
    assert config.command == ("python", "-m", "trainer.task") and config.trainer_args == ("--train-steps", "5")


def test_legacy_gpu_machine_types():
    config = cloudml.from_training_input({"scaleTier": "CUSTOM", "masterType": "complex_model_m_gpu",
                                          "workerType": "complex_model_m_gpu", "workerCount": 1})
    assert config.gpus == {"Chief": 4, "Worker": 4}
    assert config.accelerator == "nvidia-tesla-k80"


def test_use_chief_false_and_cloud_only_fields_are_reported():
    config = cloudml.from_training_input({"scaleTier": "BASIC", "useChiefInTfConfig": False,
                                          "region": "us-central1", "runtimeVersion": "2.11",
                                          "scheduling": {"maxWaitTime": "3600s"}})
    assert any("useChiefInTfConfig" in note for note in config.notes)
    assert "note: trainingInput.scheduling.maxWaitTime has no TFJob equivalent; ignored" in config.notes
    assert any("region" in note for note in config.notes)
    assert any("runtimeVersion" in note for note in config.notes)


@pytest.mark.parametrize("training, field", [
    ({"scaleTier": "BASIC_TPU"}, "scaleTier"),
    ({"scaleTier": "LARGE"}, "scaleTier"),
    ({"scaleTier": "CUSTOM", "workerCount": 2}, "masterType"),
    ({"scaleTier": "CUSTOM", "masterType": "n1-standard-4", "workerCount": -1}, "workerCount"),
    ({"scaleTier": "CUSTOM", "masterType": "n1-standard-4", "workerCount": "two"}, "workerCount"),
    ({"scaleTier": "CUSTOM", "masterType": "n1-standard-4",
      "parameterServerConfig": {"acceleratorConfig": {"count": 1, "type": "NVIDIA_TESLA_T4"}}},
     "parameterServerConfig.acceleratorConfig"),
    ({"scaleTier": "CUSTOM", "masterType": "n1-standard-4", "parameterServerType": "standard_gpu"},
     "parameterServerType"),
    ({"scaleTier": "CUSTOM", "masterType": "n1-standard-4", "workerCount": 1,
      "masterConfig": {"acceleratorConfig": {"count": 1, "type": "NVIDIA_TESLA_T4"}},
      "workerConfig": {"acceleratorConfig": {"count": 1, "type": "NVIDIA_TESLA_V100"}}},
     "workerConfig.acceleratorConfig"),
    ({"scaleTier": "STANDARD_1", "workerCount": 10}, "workerCount"),
    ({"scaleTier": "BASIC", "workerCnt": 1}, "workerCnt"),
    # a key from the file that is no name: its repr (one line, no terminal escape), not a TypeError
    ({"scaleTier": "BASIC", 123: "x"}, "123"),
    ({"scaleTier": "BASIC", "a\nb\x1b[2J": "x"}, "'a\\nb\\x1b[2J'"),
    ({"scaleTier": "CUSTOM", "masterType": "n1-standard-4", "masterConfig": {1: 2}}, "masterConfig.1"),
    ({"scaleTier": "BASIC", "hyperparameters": {"goal": "MAXIMIZE"}}, "hyperparameters"),
    ({"scaleTier": "BASIC", "scheduling": {"maxRunningTime": "2h"}}, "scheduling.maxRunningTime"),
    ({"scaleTier": "BASIC", "scheduling": {"maxRunningTime": 7200}}, "scheduling.maxRunningTime"),  # no 's'
    # a count of GPUs without their type; one image per job (a TFJob here runs one for every replica)
    ({"scaleTier": "CUSTOM", "masterType": "n1-standard-4", "masterConfig": {"acceleratorConfig": {"count": 1}}},
     "masterConfig.acceleratorConfig.type"),
    ({"scaleTier": "CUSTOM", "masterType": "n1-standard-4", "workerCount": 1,
      "masterConfig": {"imageUri": "gcr.io/p/a:1"}, "workerConfig": {"imageUri": "gcr.io/p/b:1"}},
     "workerConfig.imageUri"),
    ({"scaleTier": "BASIC", "args": "--train-steps 10"}, "args"),
    ({"scaleTier": "CUSTOM", "masterType": "n1-standard-4", "workerCount": "²"}, "workerCount"),
    ({"scaleTier": "BASIC", "scheduling": {"maxRunningTime": "٣٠٠s"}}, "scheduling.maxRunningTime"),
    # `jobDir:` (null) was the job dir "None", `jobDir: yes` "True"
    ({"scaleTier": "BASIC", "jobDir": None}, "jobDir"),
    ({"scaleTier": "BASIC", "jobDir": True}, "jobDir"),
    ({"scaleTier": "BASIC", "jobDir": ["gs://b/x"]}, "jobDir"),
    # what YAML made of unquoted yes / 0.10 / an empty item is not the text written: refused, not converted
    ({"scaleTier": "BASIC", "args": ["--flag", True]}, "args"),
    ({"scaleTier": "BASIC", "args": ["--learning-rate", 0.1]}, "args"),
    ({"scaleTier": "BASIC", "args": ["--x", None]}, "args"),
    ({"scaleTier": "CUSTOM", "masterType": "n1-standard-4", "masterConfig": {"containerArgs": ["--a", False]}},
     "masterConfig.containerArgs"),
    ({"scaleTier": "CUSTOM", "masterType": "n1-standard-4", "masterConfig": {"diskSize": 1}}, "masterConfig.diskSize"),
    # Cloud ML's own rule: containerArgs and args are mutually exclusive
    ({"scaleTier": "CUSTOM", "masterType": "n1-standard-4", "masterConfig": {"containerArgs": ["--a"]},
      "args": ["--b"]}, "args"),
    # a TFJob here runs one command and one argument list for every replica
    ({"scaleTier": "CUSTOM", "masterType": "n1-standard-4", "workerCount": 1,
      "masterConfig": {"containerArgs": ["--a"]}, "workerConfig": {"containerArgs": ["--b"]}},
     "workerConfig.containerArgs"),
    ({"scaleTier": "CUSTOM", "masterType": "n1-standard-4", "workerCount": 1,
      "masterConfig": {"containerCommand": ["python", "a.py"]}, "workerConfig": {"containerCommand": ["b"]}},
     "workerConfig.containerCommand"),
])
def test_bad_training_input_names_the_key(training, field):
    with pytest.raises(SpecError) as caught:
        cloudml.from_training_input(training)
    assert caught.value.field == f"--config trainingInput.{field}"
    assert ";" in str(caught.value)  # problem; fix


def test_whole_numbers_keep_their_digits_and_yaml_lookalikes_are_named(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("trainingInput: {args: [--train-steps, 1000, --name, '0.10']}\nlabels: {cost: 12}\n")
    config = cloudml.load(path)
    assert config.trainer_args == ("--train-steps", "1000", "--name", "0.10") and config.labels == {"cost": "12"}
    # YAML 1.1 reads these as 16, 10, 1000, 90 and 12: the text written is kept, not those digits
    path.write_text("trainingInput: {args: [0x10, 012, 1_000, '--x', 1:30, +12], jobDir: 0755}\n"
                    "labels: {mode: 0755, 010: v}\n")
    config = cloudml.load(path)
    assert config.trainer_args == ("0x10", "012", "1_000", "--x", "1:30", "+12") and config.job_dir == "0755"
    assert config.labels == {"mode": "0755", "010": "v"}
    path.write_text("trainingInput: {args: [--learning-rate, 0.10]}\n")
    with pytest.raises(SpecError) as caught:
        cloudml.load(path)
    assert str(caught.value) == ("--config trainingInput.args: item 1 (0.1) is a YAML float (its digits may change), "
                                 "not the text written; quote it in the file so it stays text, e.g. \"0.10\" or \"yes\"")
    path.write_text("trainingInput: {scaleTier: BASIC}\nlabels: {team: on}\n")
    with pytest.raises(SpecError, match=r"^--config labels: the value True of 'team' is a YAML boolean"):
        cloudml.load(path)


@pytest.mark.parametrize("text, problem", [
    ("name: job\nimage: x\n", "no trainingInput fields"),
    ("- scaleTier: BASIC\n", "no trainingInput fields"),
    ("trainingInput: {scaleTier: BASIC}\nregion: x\n", "unknown top-level"),
    ("trainingInput: [\n", "not valid YAML"),
    ("trainingInput: {scaleTier: BASIC}\n1: x\nz: y\n", r"unknown top-level field\(s\) \[1, 'z'\]"),
])
def test_bad_files(tmp_path, text, problem):
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(SpecError, match=problem) as caught:
        cloudml.load(path)
    assert caught.value.field == "--config"


@pytest.mark.parametrize("job_id", ["123", "true", "''", "[a]"])
def test_a_job_id_that_is_no_name_is_refused_on_one_line(tmp_path, job_id):
    """A Job resource's jobId becomes the TFJob's name: one that YAML reads as no string (or
    an empty one) is refused naming jobId, not a traceback."""
    path = tmp_path / "config.yaml"
    path.write_text(f"jobId: {job_id}\ntrainingInput: {{scaleTier: BASIC}}\n")
    with pytest.raises(SpecError) as caught:
        cloudml.load(path)
    assert caught.value.field == "--config jobId" and "is not a job id; use letters, digits and '_'" in str(caught.value)


def test_labels_that_are_no_mapping_are_refused_on_one_line(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("trainingInput: {scaleTier: BASIC}\nlabels: [team, ml]\n")
    with pytest.raises(SpecError) as caught:
        cloudml.load(path)
    assert str(caught.value) == "--config labels: must be a mapping; use key: value pairs"


def test_a_file_not_in_utf8(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_bytes(b"trainingInput: {scaleTier: BASIC, args: [caf\xe9]}\n")
    with pytest.raises(SpecError) as caught:
        cloudml.load(path)
    assert str(caught.value) == f"--config: {str(path)!r} is not UTF-8 text (byte 45 is not); save it as UTF-8"


def test_the_fields_without_the_training_input_key(tmp_path):
    bare, keyed = tmp_path / "bare.yaml", tmp_path / "keyed.yaml"
    bare.write_text("scaleTier: CUSTOM\nmasterType: n1-standard-4\nworkerCount: 3\nparameterServerCount: 2\n"
                    "jobDir: gs://b/run\nlabels: {team: ml}\n")
    keyed.write_text("trainingInput:\n  scaleTier: CUSTOM\n  masterType: n1-standard-4\n  workerCount: 3\n"
                     "  parameterServerCount: 2\n  jobDir: gs://b/run\nlabels: {team: ml}\n")
    assert cloudml.load(bare) == cloudml.load(keyed)
    assert cloudml.load(bare).replicas == {"Chief": 1, "Worker": 3, "PS": 2}
    bad = tmp_path / "bad.yaml"
    bad.write_text("scaleTier: BASIC\nworkerCnt: 2\n")
    with pytest.raises(SpecError) as caught:
        cloudml.load(bad)
    assert caught.value.field == "--config trainingInput.workerCnt"


def test_missing_file(tmp_path):
    with pytest.raises(SpecError, match="cannot read"):
        cloudml.load(tmp_path / "absent.yaml")


def test_accelerator_label():
    assert cloudml.accelerator_label("NVIDIA_TESLA_T4") == "nvidia-tesla-t4"
    assert cloudml.accelerator_label("NVIDIA_A100_80GB") == "nvidia-a100-80gb"
