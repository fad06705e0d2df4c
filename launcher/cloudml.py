"""Cloud ML Engine / AI Platform Training `config.yaml` (a `trainingInput`) -> job settings.

The file is what `gcloud ai-platform jobs submit training --config config.yaml` takes:
a `trainingInput` mapping (optionally with top-level `labels`), or the same fields
without the `trainingInput:` key. Command-line flags given next to `--config` override
what the file says.

Scale tiers, as AI Platform Training documents them, and the TFJob replicas they become
(the Cloud ML "master" is the TFJob Chief):

=============  =====  ======  ==  =========  ==========================================
scaleTier      Chief  Worker  PS  Evaluator  Notes
=============  =====  ======  ==  =========  ==========================================
BASIC          1      0       0   0          a single instance
BASIC_GPU      1      0       0   0          the chief gets 1 GPU, nvidia-tesla-k80
STANDARD_1     1      4       3   0          "many workers and a few parameter servers"
PREMIUM_1      1      19      11  0          "a large number of workers, many ps"
CUSTOM         1      N       M   E          N=workerCount, M=parameterServerCount,
                                             E=evaluatorCount (0 or 1); masterType required
BASIC_TPU      refused: TPUs are not supported
=============  =====  ======  ==  =========  ==========================================

GPUs come from `<role>Config.acceleratorConfig {count, type}` (type NVIDIA_TESLA_T4 ->
accelerator `nvidia-tesla-t4`, the GKE node label value) or from the legacy GPU machine
types (standard_gpu = 1 x K80, complex_model_m_gpu = 4 x K80, ...). Compute Engine machine
types (masterType: n1-highcpu-16, ...) become CPU/memory requests and an instance-type
node selector, as gcloud's --master-machine-type flags do (`machine_types.py`); other
names (legacy ones like complex_model_m) are reported and get no requests. The scale tiers
name no machine types (AI Platform never fixed them), so they set counts only. `useChiefInTfConfig`
is accepted: TFJob always calls the coordinator `chief` in TF_CONFIG (what the flag
selects on Cloud ML and what TF 2 needs), so `false` is reported and ignored.
Also mapped: `masterConfig.imageUri` -> --image, `containerCommand` / `containerArgs` (the
same in every *Config that gives them; `containerArgs` beside `args` refused, as Cloud ML does),
`jobDir` -> --job-dir, `pythonModule` -> --module-name, `args` -> trainer arguments,
`scheduling.maxRunningTime` ->
--active-deadline-seconds, top-level `labels` -> --label.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from .spec import SpecError, check_accelerator

FLAG = "--config"

# scaleTier -> (replica counts, GPUs per role, accelerator); CUSTOM is computed.
TIERS: dict[str, tuple[dict[str, int], dict[str, int], str | None]] = {
    "BASIC": ({"Chief": 1}, {}, None),
    "BASIC_GPU": ({"Chief": 1}, {"Chief": 1}, "nvidia-tesla-k80"),
    "STANDARD_1": ({"Chief": 1, "Worker": 4, "PS": 3}, {}, None),
    "PREMIUM_1": ({"Chief": 1, "Worker": 19, "PS": 11}, {}, None),
}
CUSTOM = "CUSTOM"

# Cloud ML role prefix (xxxType / xxxConfig / xxxCount) -> TFJob replica type.
ROLE_PREFIX = {"master": "Chief", "worker": "Worker", "parameterServer": "PS", "evaluator": "Evaluator"}

# Legacy AI Platform machine types that include GPUs: type -> (count, accelerator).
GPU_MACHINE_TYPES = {
    "standard_gpu": (1, "nvidia-tesla-k80"),
    "complex_model_m_gpu": (4, "nvidia-tesla-k80"),
    "complex_model_l_gpu": (8, "nvidia-tesla-k80"),
    "standard_p100": (1, "nvidia-tesla-p100"),
    "complex_model_m_p100": (4, "nvidia-tesla-p100"),
    "standard_v100": (1, "nvidia-tesla-v100"),
    "large_model_v100": (1, "nvidia-tesla-v100"),
    "complex_model_m_v100": (4, "nvidia-tesla-v100"),
    "complex_model_l_v100": (8, "nvidia-tesla-v100"),
}

# trainingInput keys that only make sense on Cloud ML: accepted, reported, not used.
IGNORED = ("region", "runtimeVersion", "pythonVersion", "packageUris",
           "serviceAccount", "network", "encryptionConfig", "enableWebAccess")
IGNORED_NOTE = "is a Cloud ML setting with no TFJob equivalent; ignored"
PACKAGES_INSTEAD = ("the launcher uploads and installs no packages; the module must be in --image, or give its "
                    "directory with --package-path")
USE_CHIEF_NOTE = "is ignored; TFJob always names the coordinator 'chief' in TF_CONFIG"
CONFIG_KEYS = ("acceleratorConfig", "imageUri", "containerCommand", "containerArgs")
IGNORED_CONFIG_KEYS = ("diskConfig", "tpuTfVersion")
_DURATION = re.compile(r"^(\d+)(?:\.\d+)?s$", re.ASCII)


@dataclass
class CloudMLConfig:
    """What the file sets; None / empty means "not set" (flags or defaults decide)."""

    replicas: dict[str, int]
    gpus: dict[str, int] = field(default_factory=dict)
    accelerator: str | None = None
    image: str | None = None
    command: tuple[str, ...] = ()
    module_name: str | None = None
    trainer_args: tuple[str, ...] = ()
    job_dir: str | None = None
    active_deadline_seconds: int | None = None
    labels: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    machine_types: dict[str, str] = field(default_factory=dict)  # role -> Compute Engine type (masterType, ...)
    name: str | None = None  # a Job resource's jobId, as a TFJob name
    container_fields: set[str] = field(default_factory=set)  # containerCommand/containerArgs given by a *Config


def _where(*keys) -> str:
    """`--config trainingInput.KEY...`; a key from the file that is no name (a number, one
    with a line break or a terminal escape) as its repr, so the error stays one line."""
    names = (key if isinstance(key, str) and key.isidentifier() else repr(key) for key in keys)
    return f"{FLAG} {'.'.join(('trainingInput', *names))}"


def _count(value, *keys: str) -> int:
    """Cloud ML int64 fields arrive as ints or, in REST form, as digit strings."""
    if isinstance(value, bool) or not (isinstance(value, int) or (isinstance(value, str) and value.isascii()
                                                                   and value.isdigit())) \
            or int(value) < 0:
        raise SpecError(_where(*keys), f"{value!r} is not a count; use an integer >= 0")
    return int(value)


class _WrittenInt(int):
    """An integer of the file that keeps the text it was written as: YAML 1.1 reads 0x10
    as 16, 012 as 10, 1_000 as 1000 and 1:30 as 90, whose digits are not the ones written."""

    text: str


def _int_as_written(loader, node) -> _WrittenInt:
    number = _WrittenInt(loader.construct_yaml_int(node))
    number.text = node.value
    return number


@lru_cache(maxsize=1)
def _loader() -> type:
    """yaml.safe_load's loader, with integers that keep their text (_WrittenInt)."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("tag:yaml.org,2002:int", _int_as_written)
    return Loader


def _written(value) -> str:
    """A str or whole number of the file as the text written (see _WrittenInt)."""
    return getattr(value, "text", str(value))


def _yaml_kind(value) -> str | None:
    """What YAML made of an unquoted scalar that is not the text written, or None: a bool
    (yes, on, true), a float (0.10 -> 0.1), null; whole numbers keep their digits."""
    if isinstance(value, bool):
        return "a YAML boolean"
    if isinstance(value, float):
        return "a YAML float (its digits may change)"
    if value is None:
        return "empty (null)"
    return None


def _string_list(value, *keys: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) or v is None for v in value):
        raise SpecError(_where(*keys), "must be a list of strings; use e.g. [\"--train-steps\", \"1000\"]")
    for index, item in enumerate(value):
        kind = _yaml_kind(item)
        if kind:
            raise SpecError(_where(*keys), f"item {index} ({item!r}) is {kind}, not the text written; quote it "
                            "in the file so it stays text, e.g. \"0.10\" or \"yes\"")
    return tuple(_written(v) for v in value)


def accelerator_label(cloudml_type: str) -> str:
    """NVIDIA_TESLA_T4 -> nvidia-tesla-t4 (the GKE `cloud.google.com/gke-accelerator` value)."""
    return cloudml_type.strip().lower().replace("_", "-")


def _set_accelerator(config: CloudMLConfig, accelerator: str, *keys: str) -> None:
    if config.accelerator not in (None, accelerator):
        raise SpecError(_where(*keys), f"{accelerator} differs from {config.accelerator}; "
                        "use one accelerator type for all replicas")
    config.accelerator = accelerator


def _set_gpus(config: CloudMLConfig, role: str, count: int, accelerator: str, *keys: str) -> None:
    if role == "PS" and count:
        raise SpecError(_where(*keys), "GPUs on parameter servers are not supported; ps run on CPU nodes")
    if count:
        config.gpus[role] = count
        _set_accelerator(config, accelerator, *keys)


def _apply_machine_type(config: CloudMLConfig, prefix: str, machine_type) -> None:
    key = f"{prefix}Type"
    if not isinstance(machine_type, str) or not machine_type:
        raise SpecError(_where(key), f"{machine_type!r} is not a machine type; use e.g. n1-standard-8")
    if machine_type in GPU_MACHINE_TYPES:
        count, accelerator = GPU_MACHINE_TYPES[machine_type]
        _set_gpus(config, ROLE_PREFIX[prefix], count, accelerator, key)
        return
    from .machine_types import capacity

    try:
        capacity(machine_type, _where(key))
    except SpecError:  # e.g. a legacy AI Platform name (complex_model_m): no size the launcher knows
        config.notes.append(f"note: trainingInput.{key} {machine_type!r} is not a Compute Engine machine type the "
                            "launcher knows, so those replicas get no CPU/memory requests; use e.g. n1-highcpu-16, "
                            "or --cpu/--memory ROLE=...")
        return
    config.machine_types[ROLE_PREFIX[prefix]] = machine_type


def _apply_role_config(config: CloudMLConfig, prefix: str, role_config) -> None:
    key = f"{prefix}Config"
    if not isinstance(role_config, dict):
        raise SpecError(_where(key), "must be a mapping; use e.g. {acceleratorConfig: {count: 1, type: NVIDIA_TESLA_T4}}")
    for sub in role_config:
        if sub not in CONFIG_KEYS + IGNORED_CONFIG_KEYS:
            raise SpecError(_where(key, sub), f"unknown field; use one of {', '.join(CONFIG_KEYS)}")
        if sub in IGNORED_CONFIG_KEYS:
            config.notes.append(f"note: trainingInput.{key}.{sub} has no TFJob equivalent; ignored")
    accel = role_config.get("acceleratorConfig")
    if accel is not None:
        if not isinstance(accel, dict) or not isinstance(accel.get("type", ""), str):
            raise SpecError(_where(key, "acceleratorConfig"), "must be a mapping; use {count: N, type: NVIDIA_TESLA_T4}")
        count = _count(accel.get("count", 0), key, "acceleratorConfig", "count")
        if count and not accel.get("type"):
            raise SpecError(_where(key, "acceleratorConfig", "type"), "missing GPU type; set e.g. type: NVIDIA_TESLA_T4")
        if accel.get("type"):
            check_accelerator(accelerator_label(accel["type"]), _where(key, "acceleratorConfig", "type"))
        _set_gpus(config, ROLE_PREFIX[prefix], count, accelerator_label(accel.get("type", "")),
                  key, "acceleratorConfig")
    _apply_container(config, prefix, role_config)


def _apply_container(config: CloudMLConfig, prefix: str, role_config: dict) -> None:
    key = f"{prefix}Config"
    image = role_config.get("imageUri")
    if image is not None:
        if not isinstance(image, str) or (config.image not in (None, image)):
            raise SpecError(_where(key, "imageUri"), "images differ or are not strings; use one image for all replicas")
        config.image = image
    for field_name, attribute in (("containerCommand", "command"), ("containerArgs", "trainer_args")):
        if field_name in role_config:
            value = _string_list(role_config[field_name], key, field_name)
            if field_name in config.container_fields and getattr(config, attribute) != value:
                raise SpecError(_where(key, field_name), "differs from another replica's; a TFJob here runs one "
                                f"{field_name} for all replicas: give the same one, or only in masterConfig")
            setattr(config, attribute, value)
            config.container_fields.add(field_name)


def _custom_replicas(training: dict) -> dict[str, int]:
    if not training.get("masterType") and "masterConfig" not in training:
        raise SpecError(_where("masterType"), "CUSTOM needs the chief's machine type; "
                        "add e.g. masterType: n1-standard-8")
    replicas = {"Chief": 1}
    for prefix, role in ROLE_PREFIX.items():
        if prefix != "master" and f"{prefix}Count" in training:
            replicas[role] = _count(training[f"{prefix}Count"], f"{prefix}Count")
    return replicas


def _tier(training: dict) -> tuple[dict[str, int], CloudMLConfig]:
    tier = training.get("scaleTier", "BASIC")
    if tier == CUSTOM:
        return _custom_replicas(training), CloudMLConfig(replicas={})
    if tier == "BASIC_TPU":
        raise SpecError(_where("scaleTier"), "TPUs are not supported; use BASIC_GPU or CUSTOM with GPUs")
    if tier not in TIERS:
        raise SpecError(_where("scaleTier"), f"{tier!r} is not a scale tier; use one of "
                        f"{', '.join([*TIERS, CUSTOM])}")
    replicas, gpus, accelerator = TIERS[tier]
    for key in training:
        if key.endswith("Count"):
            raise SpecError(_where(key), f"counts are fixed by scaleTier {tier}; use scaleTier: CUSTOM")
    return dict(replicas), CloudMLConfig(replicas={}, gpus=dict(gpus), accelerator=accelerator)


def _scheduling(config: CloudMLConfig, scheduling) -> None:
    if not isinstance(scheduling, dict):
        raise SpecError(_where("scheduling"), "must be a mapping; use e.g. {maxRunningTime: 7200s}")
    running = scheduling.get("maxRunningTime")
    if running is not None:
        match = _DURATION.fullmatch(str(running))
        if not match:
            raise SpecError(_where("scheduling", "maxRunningTime"), f"{running!r}; use seconds like 7200s")
        config.active_deadline_seconds = int(match[1])
    if "maxWaitTime" in scheduling:
        config.notes.append("note: trainingInput.scheduling.maxWaitTime has no TFJob equivalent; ignored")


KNOWN = ("scaleTier", "args", "jobDir", "scheduling", "useChiefInTfConfig", "hyperparameters", "pythonModule",
         *(f"{p}{s}" for p in ROLE_PREFIX for s in ("Type", "Config", "Count")))


def from_training_input(training: dict, labels: dict | None = None) -> CloudMLConfig:
    """Map one `trainingInput` mapping; raises SpecError naming the key and the fix."""
    if not isinstance(training, dict):
        raise SpecError(_where(), "must be a mapping; use e.g. {scaleTier: STANDARD_1}")
    for key in training:
        if key not in KNOWN and key not in IGNORED:
            raise SpecError(_where(key), "unknown trainingInput field; check the spelling "
                            "(see the AI Platform TrainingInput reference)")
    if "hyperparameters" in training:
        raise SpecError(_where("hyperparameters"), "hyperparameter tuning is not supported; "
                        "remove it and submit one job per setting")
    replicas, config = _tier(training)
    config.replicas = replicas
    for prefix in ROLE_PREFIX:
        if f"{prefix}Type" in training:
            _apply_machine_type(config, prefix, training[f"{prefix}Type"])
        if f"{prefix}Config" in training:
            _apply_role_config(config, prefix, training[f"{prefix}Config"])
    _apply_job_fields(config, training)
    config.labels = _labels(labels)
    return config


def _apply_job_fields(config: CloudMLConfig, training: dict) -> None:
    if "args" in training:
        if "containerArgs" in config.container_fields:
            raise SpecError(_where("args"), "is set beside a replica's containerArgs, which Cloud ML refuses too; "
                            "keep one of them")
        config.trainer_args = _string_list(training["args"], "args")
    if "jobDir" in training:
        job_dir = training["jobDir"]
        if _yaml_kind(job_dir) or not isinstance(job_dir, (str, int)):
            raise SpecError(_where("jobDir"), f"{job_dir!r} is {_yaml_kind(job_dir) or 'not a path'}, not the text "
                            "written; give a path, quoted if YAML reads it otherwise, e.g. gs://my-bucket/runs/1")
        config.job_dir = _written(job_dir)
    if "pythonModule" in training:
        if not isinstance(training["pythonModule"], str):
            raise SpecError(_where("pythonModule"), "must be a module name; use e.g. trainer.task")
        config.module_name = training["pythonModule"]
    if "scheduling" in training:
        _scheduling(config, training["scheduling"])
    if training.get("useChiefInTfConfig") is False:
        config.notes.append(f"note: trainingInput.useChiefInTfConfig: false {USE_CHIEF_NOTE}")
    if "packageUris" in training:
        config.notes.append(f"note: trainingInput.packageUris is ignored: {PACKAGES_INSTEAD}")
    for key in IGNORED:
        if key in training and key != "packageUris":
            config.notes.append(f"note: trainingInput.{key} {IGNORED_NOTE}")


def _labels(labels) -> dict[str, str]:
    if labels is None:
        return {}
    if not isinstance(labels, dict):
        raise SpecError(f"{FLAG} labels", "must be a mapping; use key: value pairs")
    for key, value in labels.items():
        for what, item in (("key", key), ("value", value)):
            kind = _yaml_kind(item)
            if kind:
                raise SpecError(f"{FLAG} labels", f"the {what} {item!r}{f' of {key!r}' if what == 'value' else ''} is "
                                f"{kind}, not the text written; quote it in the file so it stays text")
    return {_written(k): _written(v) for k, v in labels.items()}


def load(path: str | Path, scale_tier: str | None = None) -> CloudMLConfig:
    """Read a config.yaml; every problem is a SpecError on `--config`. `scale_tier` (the
    --scale-tier flag) replaces the file's scaleTier."""
    training, labels = _document(path)
    job = _job_fields(path)
    dropped: list[str] = []
    if scale_tier is not None:
        if scale_tier != CUSTOM and training.get("scaleTier") == CUSTOM:  # the tier fixes counts and machines
            dropped = [key for key in training for prefix in ROLE_PREFIX if key in (f"{prefix}Count", f"{prefix}Type")]
            training = {key: value for key, value in training.items() if key not in dropped}
        training = {**training, "scaleTier": scale_tier}
    config = from_training_input(training, labels)
    config.name, notes = job
    config.notes += notes
    if dropped:
        config.notes.append(f"note: --scale-tier {scale_tier} replaces the file's scaleTier CUSTOM; its "
                            f"{', '.join(dropped)} {'is' if len(dropped) == 1 else 'are'} ignored (the tier fixes them)")
    return config


# What `gcloud ai-platform jobs describe --format yaml` prints beside trainingInput: the
# server's fields, ignored (with a note) when such a file is given as --config.
JOB_OUTPUT_FIELDS = ("createTime", "startTime", "endTime", "state", "etag", "trainingOutput", "errorMessage")


def _job_fields(path: str | Path) -> tuple[str | None, list[str]]:
    """A Job resource's jobId as the TFJob name (lowercase, '_' -> '-': Cloud ML job ids
    are letters, digits and '_'), and a note on the server's output fields."""
    import yaml

    document = yaml.load(Path(path).read_text(encoding="utf-8"), Loader=_loader())
    if not isinstance(document, dict) or "trainingInput" not in document:
        return None, []
    notes = []
    output = [key for key in JOB_OUTPUT_FIELDS if key in document]
    if output:
        notes.append(f"note: {', '.join(output)} {'is' if len(output) == 1 else 'are'} the server's output in a Job "
                     "resource; ignored")
    job_id = document.get("jobId")
    if job_id is None:
        return None, notes
    if not isinstance(job_id, str) or not job_id:
        raise SpecError(f"{FLAG} jobId", f"{job_id!r} is not a job id; use letters, digits and '_', e.g. mnist_1")
    return job_name(job_id), notes


def job_name(job_id: str) -> str:
    """A Cloud ML job id (letters, digits and '_') as a TFJob name: census_wide_1 -> census-wide-1."""
    return job_id.lower().replace("_", "-")


def _document(path: str | Path) -> tuple[dict, dict | None]:
    import yaml

    try:
        document = yaml.load(Path(path).read_text(encoding="utf-8"), Loader=_loader())
    except OSError as exc:
        raise SpecError(FLAG, f"cannot read {str(path)!r} ({exc.strerror}); check the path") from exc
    except UnicodeDecodeError as exc:
        raise SpecError(FLAG, f"{str(path)!r} is not UTF-8 text (byte {exc.start + 1} is not); save it as UTF-8") from exc
    except yaml.YAMLError as exc:
        raise SpecError(FLAG, f"{str(path)!r} is not valid YAML ({' '.join(str(exc).split())}); fix the file") from exc
    if isinstance(document, dict) and "trainingInput" not in document \
            and any(key in KNOWN or key in IGNORED for key in document):
        # the bare form: the TrainingInput fields at the top level (labels may sit beside them)
        training = {k: v for k, v in document.items() if k != "labels"}
        return training, document.get("labels")
    if not isinstance(document, dict) or "trainingInput" not in document:
        raise SpecError(FLAG, f"{str(path)!r} has no trainingInput fields; use the gcloud format "
                        "'trainingInput: {scaleTier: STANDARD_1}' or the fields alone, e.g. 'scaleTier: STANDARD_1'")
    unknown = set(document) - {"trainingInput", "labels", "jobId", *JOB_OUTPUT_FIELDS}
    if unknown:
        raise SpecError(FLAG, f"unknown top-level field(s) {sorted(unknown, key=str)}; use trainingInput, labels and jobId "
                        "(a Job resource's fields)")
    if not isinstance(document["trainingInput"], dict):
        raise SpecError(_where(), "must be a mapping; use e.g. {scaleTier: STANDARD_1}")
    return document["trainingInput"], document.get("labels")
