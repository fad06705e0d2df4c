"""The job flags shared by `submit` and `render`, and flags (+ config.yaml) -> JobSpec.

Defaults (plain `submit` runs a small parameter-server job):
  --workers 2, --ps 1, --chief 1 when ps > 0 else 0, --evaluator 0,
  --restart-policy OnFailure, --clean-pod-policy Running, -n default,
  --name <model or "tfjob">-YYYYMMDD-HHMMSS-xxxx (a random suffix).
`--config config.yaml` (Cloud ML trainingInput) replaces those defaults; any flag given
explicitly overrides both. `--cpu` / `--memory` take `ROLE=QUANTITY` (repeatable) or a
bare quantity for every replica type.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import os
import re
import textwrap
from dataclasses import dataclass

from . import namespace_of
from .. import cloudml
from ..cloudml import IGNORED_NOTE, PACKAGES_INSTEAD, USE_CHIEF_NOTE, accelerator_label, job_name
from ..spec import (CLEAN_POD_POLICIES, DEFAULT_IMAGE, END_OF_LIFE_ACCELERATORS, RESTART_POLICIES, ROLES,
                   JobSpec, ReplicaSpec, RunPolicy, SecretEnv, SpecError, Volume, check_accelerator, check_job_dir,
                   absent_role, check_quantity)

ROLE_FLAGS = {"chief": "Chief", "ps": "PS", "worker": "Worker", "evaluator": "Evaluator"}
COUNT_FLAGS = {"Chief": "chief", "PS": "ps", "Worker": "workers", "Evaluator": "evaluator"}
DEFAULT_COUNTS = {"Worker": 2, "PS": 1, "Evaluator": 0}
DEFAULT_PREFIX = "tfjob"
SCALE_TIERS = ("BASIC", "BASIC_GPU", "STANDARD_1", "PREMIUM_1")
MACHINE_TYPE_FLAGS = {"master-machine-type": "Chief", "worker-machine-type": "Worker",
                      "parameter-server-machine-type": "PS"}
GCLOUD_IMAGE_FLAGS = ("worker-image-uri", "parameter-server-image-uri")
# gcloud ai-platform jobs submit training flags for settings of Cloud ML's own machines: accepted,
# reported in a note, not used (as the same fields of a config file); flag -> what to do instead
GCLOUD_IGNORED = {
    "region": "the cluster is the kubeconfig context's (choose it with --context)",
    "runtime-version": "the replicas run the TensorFlow of --image",
    "python-version": "the replicas run the Python of --image",
    "staging-bucket": "the launcher uploads nothing",
    "packages": PACKAGES_INSTEAD,
    "network": "the pods use the cluster's network",
    "enable-web-access": "",
    "kms-key": "", "kms-keyring": "", "kms-location": "", "kms-project": "",
}


def non_negative_int(text: str) -> int:
    """argparse type: an integer (the JobSpec checks the sign and names the flag)."""
    try:
        return int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer; use a whole number such as 2") from None


def add_job_flags(parser: argparse.ArgumentParser) -> None:
    """Every flag that shapes the TFJob. Unset flags stay None so config.yaml can fill them."""
    parser.add_argument("job", nargs="?", metavar="JOB", help="gcloud's JOB (a Cloud ML job id): the job's name, as "
                        "--name; its '_' become '-' and its capitals lower case (census_wide_1: census-wide-1)")
    job = parser.add_argument_group("job")
    job.add_argument("--name", help="TFJob name (DNS-1035); default <model>-YYYYMMDD-HHMMSS-xxxx, the model of "
                     "a --model trainer argument, else tfjob, and a random suffix (e.g. tfjob-20261125-170556-k7qz)")
    job.add_argument("--image", "--master-image-uri", help=f"trainer image (default {DEFAULT_IMAGE}; "
                     "--master-image-uri: gcloud's name)")
    job.add_argument("--config", metavar="CONFIG_YAML", help="Cloud ML config.yaml (trainingInput); flags override it")
    job.add_argument("--scale-tier", type=str.upper, choices=SCALE_TIERS, metavar="TIER",
                     help=f"Cloud ML scale tier ({', '.join(SCALE_TIERS)}; CUSTOM through --config); "
                          "replica flags override it")
    job.add_argument("--job-dir", help="output directory: local path or gs://BUCKET/path (default: local "
                     "backend: the job's own, NAMESPACE/NAME/output in $TFJOB_RUNS_DIR or ~/.local/share/tfjob-launcher/runs; "
                     "k8s: none, "
                     "so the trainer writes inside each pod, lost with it, and tensorboard and --max-resubmits "
                     "cannot use the job)")
    job.add_argument("--service-account", help="Kubernetes service account of the pods (for gcloud's Google "
                     "service account: the one Workload Identity binds to it)")
    job.add_argument("--env", action="append", default=[], metavar="K=V", help="container env var (repeatable)")
    job.add_argument("--secret-env", action="append", default=[], metavar="NAME=SECRET:KEY",
                     help="container env var NAME from key KEY of the Kubernetes Secret SECRET (repeatable): the value "
                          "never sits in the TFJob. Local backend: NAME from your environment, else the file "
                          "$TFJOB_LOCAL_SECRETS_DIR/SECRET/KEY (default ~/.config/tfjob-launcher/secrets)")
    job.add_argument("--label", action="append", default=[], metavar="K=V", help="label on the TFJob and pods (repeatable)")
    job.add_argument("--volume", action="append", default=[], metavar="CLAIM:PATH[:ro]",
                     help="mount the PersistentVolumeClaim CLAIM at PATH in every replica, read-only with :ro "
                          "(repeatable; k8s backend only), e.g. --volume training-data:/mnt/data")
    job.add_argument("--module-name", metavar="MODULE",
                     help="gcloud's flag: run your own trainer, `python -m MODULE` (e.g. trainer.task), instead of "
                          "the image's trainer; the module must be importable where the replicas run (in --image, "
                          "or from --package-path)")
    job.add_argument("--package-path", metavar="DIR",
                     help="gcloud's flag: the directory of MODULE's package (e.g. ./trainer for trainer.task); its "
                          "parent goes on PYTHONPATH and is the replicas' working directory. The launcher uploads "
                          "nothing (gcloud copies the package to GCS): local backend: a directory on this machine; "
                          "k8s: a path inside the pods, on a --volume claim (e.g. --volume code:/mnt/code "
                          "--package-path /mnt/code/trainer), or bake the package into --image and give "
                          "--module-name alone")
    job.add_argument("--no-network-policy", action="store_true",
                     help="k8s: no NetworkPolicy for the job (by default one admits traffic to the job's pods on the "
                          "TensorFlow port only from the job's own pods, where the cluster's network plugin enforces it)")
    reps = parser.add_argument_group("replicas")
    reps.add_argument("--workers", "--worker-count", type=non_negative_int, metavar="N",
                      help="worker replicas (default 2; --worker-count: gcloud's name)")
    reps.add_argument("--ps", "--parameter-server-count", type=non_negative_int, metavar="N",
                      help="parameter servers (default 1; --parameter-server-count: gcloud's name)")
    reps.add_argument("--chief", type=non_negative_int, metavar="0|1", help="chief replicas (default 1 when ps > 0, else 0)")
    reps.add_argument("--evaluator", type=non_negative_int, metavar="0|1", help="evaluator replicas (default 0)")
    reps.add_argument("--cpu", action="append", default=[], metavar="[ROLE=]Q", help="CPU request: Q for every replica type, ROLE=Q for one (it wins over Q and over a machine type's "
                      "request, which wins over Q), e.g. worker=2; repeatable")
    reps.add_argument("--memory", action="append", default=[], metavar="[ROLE=]Q", help="memory request, as --cpu, e.g. ps=4Gi; repeatable")
    for flag in MACHINE_TYPE_FLAGS:
        reps.add_argument(f"--{flag}", metavar="TYPE",
                          help="gcloud's Compute Engine machine type (e.g. n1-standard-8): CPU and memory requests "
                               "that fill such a GKE node, and its node.kubernetes.io/instance-type node selector")
    gpus = parser.add_argument_group("GPUs")
    for role in ("worker", "chief", "evaluator", "ps"):
        gpus.add_argument(f"--gpus-per-{role}", type=non_negative_int, metavar="N",
                          help=argparse.SUPPRESS if role == "ps" else f"nvidia.com/gpu per {role}")
    gpus.add_argument("--accelerator", metavar="TYPE", help="GKE accelerator, e.g. nvidia-tesla-t4 (GPU replicas only)")
    for role in ("master", "worker"):
        gpus.add_argument(f"--{role}-accelerator", metavar="type=TYPE,count=N",
                          help=f"gcloud's form of --accelerator TYPE --gpus-per-{'chief' if role == 'master' else role} N")
    gpus.add_argument("--node-selector", action="append", default=[], metavar="[ROLE:]K=V",
                      help="node selector of every replica, or of one replica type with ROLE: "
                           "(e.g. worker:cloud.google.com/gke-nodepool=gpu); repeatable")
    policy = parser.add_argument_group("policies")
    policy.add_argument("--restart-policy", choices=RESTART_POLICIES, help="replica restart policy (default OnFailure)")
    policy.add_argument("--clean-pod-policy", choices=CLEAN_POD_POLICIES, help="pods to delete at the end (default Running)")
    policy.add_argument("--ttl-seconds", type=non_negative_int, metavar="S",
                        help="delete the TFJob S seconds after it ends (default: kept until `delete`)")
    policy.add_argument("--active-deadline-seconds", type=non_negative_int, metavar="S",
                        help="fail the job after S seconds (default: no deadline)")
    policy.add_argument("--backoff-limit", type=non_negative_int, metavar="N",
                        help="restarts of its replicas, summed, before the job fails (default: no limit; under "
                             "OnFailure a replica that keeps failing restarts with a growing delay: the kubelet's "
                             "CrashLoopBackOff on a cluster, up to 30 s on this machine)")
    policy.add_argument("--success-policy", choices=("AllWorkers",),
                        help="AllWorkers: the job succeeds when every worker has (default: when the chief has)")
    gcloud = parser.add_argument_group("gcloud ai-platform jobs submit training", "\n".join(textwrap.wrap(
        "Its flags with no place above (--worker-count, --master-image-uri, --scale-tier, ... are above). Those "
        "for Cloud ML's own machines are accepted, said in a note and ignored: "
        + ", ".join(f"--{flag}" for flag in GCLOUD_IGNORED) + ".", 78, break_on_hyphens=False)))
    gcloud.add_argument("--labels", action="append", default=[], metavar="K=V[,K=V...]",
                        help="gcloud's form of --label: labels on the TFJob and pods")
    for role in GCLOUD_IMAGE_FLAGS:
        gcloud.add_argument(f"--{role}", metavar="IMAGE", help="the same image as --image/--master-image-uri, or "
                            "left out: a TFJob here runs one image for all replicas")
    gcloud.add_argument("--parameter-server-accelerator", metavar="type=TYPE,count=N",
                        help="refused: parameter servers get no GPUs here")
    gcloud.add_argument("--use-chief-in-tf-config", metavar="true|false",
                        help="true: what TFJob does anyway (TF_CONFIG names the coordinator 'chief'); false is "
                             "ignored with a note")
    for flag in GCLOUD_IGNORED:
        if flag == "enable-web-access":
            gcloud.add_argument(f"--{flag}", action="store_true", help=argparse.SUPPRESS)
        else:
            gcloud.add_argument(f"--{flag}", metavar="VALUE", help=argparse.SUPPRESS)
    sched = parser.add_argument_group("scheduling (GKE)")
    sched.add_argument("--queue-name", metavar="QUEUE", help="Kueue LocalQueue: label the job for it and create it "
                       "suspended, for Kueue to admit when the queue has quota")
    sched.add_argument("--priority-class", metavar="NAME", help="PriorityClass of the pods")
    sched.add_argument("--gang", action="store_true", help="gang scheduling: every replica starts together or none "
                       "(runPolicy.schedulingPolicy; needs the operator's gang scheduler, Volcano or scheduler-plugins)")
    sched.add_argument("--gang-timeout-seconds", type=non_negative_int, metavar="S",
                       help="with --gang: give up scheduling the gang after S seconds")
    sched.add_argument("--gang-min-available", type=non_negative_int, metavar="N",
                       help="with --gang: start when N replicas can (1 to the job's replica count; default all)")
    sched.add_argument("--gang-queue", metavar="QUEUE",
                       help="with --gang: the gang scheduler's queue (a Volcano Queue; default its 'default' queue)")
    sched.add_argument("--istio-sidecar", action="store_true", help="keep Istio's sidecar injection (by default the "
                       "pods opt out: a sidecar keeps a finished TFJob Running)")


def key_values(items: list[str], flag: str) -> dict[str, str]:
    """["a=1", "b=2"] -> {"a": "1", "b": "2"}; refuses a missing '=' and empty keys."""
    pairs: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SpecError(flag, f"{item!r} is not KEY=VALUE; use e.g. {flag} key=value")
        pairs[key] = value
    return pairs


_SECRET_LIKE = re.compile(r"(^|[-_.])(TOKEN|PASSWORD|PASSWD|SECRET|KEY|APIKEY|CREDENTIALS?)([-_.]|$)", re.I)


def secret_envs(items: list[str]) -> tuple[SecretEnv, ...]:
    """["HF_TOKEN=hf-token:token"] -> (SecretEnv("HF_TOKEN", "hf-token", "token"),); the JobSpec checks names."""
    parsed = []
    for item in items:
        name, sep, ref = item.partition("=")
        secret, colon, key = ref.partition(":")
        if not sep or not name or not colon or not secret or not key:
            raise SpecError("--secret-env", f"{item!r} is not NAME=SECRET:KEY; use e.g. --secret-env HF_TOKEN=hf-token:token")
        parsed.append(SecretEnv(name=name, secret=secret, key=key))
    return tuple(parsed)


def secret_like_env_warnings(env: dict[str, str]) -> list[str]:
    """A warning for each plain --env whose name looks like it holds a secret (never its value)."""
    return [f"warning: --env {name}: the value is stored in plain text in the TFJob (anyone who can read TFJobs "
            f"or the local run folder sees it); put it in a Secret and use --secret-env {name}=SECRET:KEY"
            for name in env if _SECRET_LIKE.search(name)]


def gcloud_accelerator(text: str, flag: str) -> tuple[str, int]:
    """"type=nvidia-tesla-t4,count=2" (gcloud's --master-accelerator) -> ("nvidia-tesla-t4", 2)."""
    fields = dict(part.partition("=")[::2] for part in text.split(",") if part)
    unknown = set(fields) - {"type", "count"}
    if unknown or not fields.get("type"):
        raise SpecError(flag, f"{text!r} is not type=TYPE[,count=N]; use e.g. {flag} type=nvidia-tesla-t4,count=1")
    count = fields.get("count", "1")
    if not count.isdigit() or int(count) < 1:
        raise SpecError(flag, f"count {count!r} is not a number of GPUs; use count=1 or more")
    kind = accelerator_label(fields["type"])
    check_accelerator(kind, flag)
    return kind, int(count)


def node_selectors(items: list[str]) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """["pool=a", "worker:gpu=yes"] -> ({"pool": "a"}, {"Worker": {"gpu": "yes"}}). Label keys
    cannot contain ':', so a ROLE: prefix is unambiguous."""
    every: list[str] = []
    per: dict[str, list[str]] = {}
    for item in items:
        role, sep, rest = item.partition(":")
        if sep and "=" not in role:
            if role.lower() not in ROLE_FLAGS:
                raise SpecError("--node-selector", f"unknown replica type {role!r} in {item!r}; use chief, ps, worker "
                                "or evaluator (e.g. --node-selector worker:pool=gpu)")
            per.setdefault(ROLE_FLAGS[role.lower()], []).append(rest)
        else:
            every.append(item)
    return (key_values(every, "--node-selector"),
            {role: key_values(values, "--node-selector") for role, values in per.items()})


def volumes(items: list[str]) -> tuple[Volume, ...]:
    """["data:/mnt/data:ro"] -> (Volume("data", "/mnt/data", True),); the JobSpec checks names and paths."""
    parsed = []
    for item in items:
        parts = item.split(":")
        mode = parts.pop() if len(parts) == 3 else "rw"
        if len(parts) != 2 or not parts[0] or mode not in ("ro", "rw"):
            raise SpecError("--volume", f"{item!r} is not CLAIM:/PATH[:ro]; use e.g. --volume training-data:/mnt/data:ro")
        parsed.append(Volume(claim=parts[0], mount_path=parts[1], read_only=mode == "ro"))
    return tuple(parsed)


def per_role(items: list[str], flag: str) -> dict[str, str]:
    """["ps=1", "2"] -> {"Chief": "2", "Worker": "2", "Evaluator": "2", "PS": "1"}: a bare value
    applies to every replica type, ROLE=VALUE to one and wins over a bare value whatever the
    order; among values of the same kind the later flag wins."""
    every: dict[str, str] = {}
    one: dict[str, str] = {}
    for item in items:
        role, sep, value = item.partition("=")
        if not sep:
            check_quantity(item, flag)
            every = {r: item for r in ROLES}
            continue
        if role.lower() not in ROLE_FLAGS:
            raise SpecError(flag, f"unknown replica type {role!r}; use chief, ps, worker or evaluator (e.g. {flag} worker=2)")
        one[ROLE_FLAGS[role.lower()]] = value
    return {**every, **one}


NAME_SUFFIX_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # Kubernetes' generateName alphabet (no vowels, no 0/1/3)


def default_name(trainer_args: tuple[str, ...] = (), now: _dt.datetime | None = None,
                 suffix: str | None = None) -> str:
    """<model>-YYYYMMDD-HHMMSS-xxxx, the model from a `--model X` trainer argument if any;
    the random suffix, as Kubernetes' generateName adds one, keeps two jobs submitted in the
    same second apart."""
    import secrets

    stamp = (now or _dt.datetime.now()).strftime("%Y%m%d-%H%M%S")
    prefix = re.sub(r"[^a-z0-9-]+", "-", _model_arg(trainer_args).lower()).strip("-")
    prefix = re.sub(r"^[^a-z]+", "", prefix)[:30].rstrip("-") or DEFAULT_PREFIX
    suffix = suffix if suffix is not None else "".join(secrets.choice(NAME_SUFFIX_CHARS) for _ in range(4))
    return f"{prefix}-{stamp}-{suffix}"


def _model_arg(args: tuple[str, ...]) -> str:
    """The trainer's --model: its last value, as the trainer's argparse takes it."""
    model = ""
    for index, arg in enumerate(args):
        if arg.startswith("--model="):
            model = arg.split("=", 1)[1]
        elif arg == "--model" and index + 1 < len(args):
            model = args[index + 1]
    return model


@dataclass
class Settings:
    """The merged answer for the replica-related settings (config.yaml under flags)."""

    counts: dict[str, int]
    gpus: dict[str, int]
    accelerator: str | None
    image: str
    command: tuple[str, ...]
    trainer_args: tuple[str, ...]
    job_dir: str | None
    active_deadline_seconds: int | None
    labels: dict[str, str]
    notes: list[str]
    module_name: str | None = None
    machine_types: dict | None = None  # role -> the config file's Compute Engine machine type
    name: str | None = None  # the config file's jobId (a Job resource)


def _pick(flag_value, config_value, default=None):
    if flag_value is not None:
        return flag_value
    return config_value if config_value is not None else default


def override_notes(args: argparse.Namespace, config: cloudml.CloudMLConfig, trainer_args: tuple[str, ...],
                   accelerators: dict[str, str], labels: dict[str, str]) -> list[str]:
    """A note for each value given both by a flag and by the config file, differently: the
    flag wins (as gcloud's flags win over its --config), and the file's value is named so
    that nothing of the file is dropped unseen (its args: a --model in them, say)."""
    source = f"--config {args.config}" if args.config else f"--scale-tier {args.scale_tier}"
    tier = f"--scale-tier {args.scale_tier}" if args.scale_tier else source  # it sets the counts
    given = [(f"--{COUNT_FLAGS[role]}", getattr(args, COUNT_FLAGS[role]), config.replicas.get(role), tier)
             for role in ("Chief", "PS", "Worker", "Evaluator")]
    given += [(flag, flag_value, file_value, source) for flag, flag_value, file_value in (
        ("--name", args.name, config.name), ("--image", args.image, config.image),
        ("--job-dir", args.job_dir, config.job_dir),
        ("--module-name", args.module_name, config.module_name),
        ("--active-deadline-seconds", args.active_deadline_seconds, config.active_deadline_seconds),
        *((flag, kind, config.accelerator) for flag, kind in list(accelerators.items())[:1]))]
    notes = [f"note: {flag} {flag_value} is used instead of {file_value} from {where} (the flag wins)"
             for flag, flag_value, file_value, where in given
             if flag_value is not None and file_value is not None and flag_value != file_value]
    notes += [f"note: --label {key}={labels[key]} is used instead of {key}={value} from {source} (the flag wins)"
              for key, value in config.labels.items() if key in labels and labels[key] != value]
    if trainer_args and config.trainer_args and trainer_args != config.trainer_args:
        notes.append(f"note: the trainer arguments after -- are used instead of those from {source} "
                     f"({' '.join(config.trainer_args)}); repeat after -- what you keep of them")
    return notes


def merge_settings(args: argparse.Namespace, trainer_args: tuple[str, ...]) -> Settings:
    config = None
    if args.config or args.scale_tier:
        config = (cloudml.load(args.config, args.scale_tier) if args.config
                  else cloudml.from_training_input({"scaleTier": args.scale_tier}))
    base_counts = config.replicas if config else DEFAULT_COUNTS
    counts = {role: _pick(getattr(args, COUNT_FLAGS[role]), base_counts.get(role), 0)
              for role in ("PS", "Worker", "Evaluator")}
    counts["Chief"] = _pick(args.chief, (config.replicas.get("Chief") if config else None),
                            1 if counts["PS"] > 0 else 0)
    gpus = dict(config.gpus) if config else {}
    accelerator = _pick(args.accelerator, config.accelerator if config else None)
    kinds = {"--accelerator": args.accelerator} if args.accelerator else {}
    if args.parameter_server_accelerator is not None:
        raise SpecError("--parameter-server-accelerator", "parameter servers get no GPUs here (they hold the "
                        "variables, on CPU nodes); drop it, or give the GPUs to --worker-accelerator")
    for flag, role in (("master", "Chief"), ("worker", "Worker")):
        given = getattr(args, f"{flag}_accelerator")
        if given:
            kind, gpus[role] = gcloud_accelerator(given, f"--{flag}-accelerator")
            if set(kinds.values()) - {kind}:
                raise SpecError(f"--{flag}-accelerator", f"{kind} differs from {', '.join(set(kinds.values()))} "
                                f"({', '.join(kinds)}); a job uses one GPU type")
            kinds[f"--{flag}-accelerator"] = accelerator = kind
    for flag, role in ROLE_FLAGS.items():
        value = getattr(args, f"gpus_per_{flag}")
        given = {"Chief": "--master-accelerator", "Worker": "--worker-accelerator"}.get(role)
        if value is not None and given in kinds and gpus.get(role) != value:
            raise SpecError(f"--gpus-per-{flag}", f"{value} differs from {given}'s count={gpus.get(role)}; "
                            "give the count once")
        if value is not None:
            gpus[role] = value
    image = _pick(args.image, config.image if config else None, DEFAULT_IMAGE)
    for flag in GCLOUD_IMAGE_FLAGS:
        given = getattr(args, flag.replace("-", "_"))
        if given is not None and given != image:
            raise SpecError(f"--{flag}", f"{given!r} differs from the job's image {image!r}; a TFJob here runs one "
                            "image for all replicas: give it once, as --image (or --master-image-uri)")
    labels = {**key_values([item for given in args.labels for item in given.split(",") if item], "--labels"),
              **key_values(args.label, "--label")}  # the flags'
    return Settings(
        counts=counts, gpus=gpus,
        accelerator=accelerator,
        image=image,
        command=config.command if config else (),
        trainer_args=trainer_args or (config.trainer_args if config else ()),
        job_dir=_pick(args.job_dir, config.job_dir if config else None),
        active_deadline_seconds=_pick(args.active_deadline_seconds,
                                      config.active_deadline_seconds if config else None),
        labels={**(config.labels if config else {}), **labels},
        notes=(config.notes + override_notes(args, config, trainer_args, kinds, labels) if config else [])
        + gcloud_notes(args),
        module_name=config.module_name if config else None,
        machine_types=config.machine_types if config else None,
        name=config.name if config else None,
    )


def gcloud_notes(args: argparse.Namespace) -> list[str]:
    """The notes for gcloud's flags that are accepted and not used (GCLOUD_IGNORED,
    --use-chief-in-tf-config false); SpecError for a --use-chief-in-tf-config that is no boolean."""
    notes = []
    chief = args.use_chief_in_tf_config
    if chief is not None:
        if chief.lower() not in ("true", "false"):
            raise SpecError("--use-chief-in-tf-config", f"{chief!r} is not true or false; use true (what TFJob does)")
        if chief.lower() == "false":
            notes.append(f"note: --use-chief-in-tf-config false {USE_CHIEF_NOTE}")
    for flag, instead in GCLOUD_IGNORED.items():
        if getattr(args, flag.replace("-", "_")) not in (None, False):
            notes.append(f"note: --{flag} {IGNORED_NOTE}" + (f": {instead}" if instead else ""))
    return notes


def check_service_account(name: str | None) -> None:
    """gcloud's --service-account is a Google service account (an e-mail address); the
    launcher's names the pods' Kubernetes ServiceAccount."""
    if name is not None and "@" in name:
        raise SpecError("--service-account", f"{name!r} is a Google service account (gcloud's flag); here it names "
                        "the pods' Kubernetes ServiceAccount: give the one Workload Identity binds to it, "
                        "e.g. --service-account trainer")


def build_spec(args: argparse.Namespace, trainer_args: tuple[str, ...] = ()) -> tuple[JobSpec, list[str]]:
    """Flags (+ config.yaml) -> a validated JobSpec and the notes to print."""
    settings = merge_settings(args, tuple(trainer_args))
    cpu, memory = per_role(args.cpu, "--cpu"), per_role(args.memory, "--memory")
    every_selector, role_selectors = node_selectors(args.node_selector)
    machine_notes = apply_machine_types(args, cpu, memory, role_selectors, settings.machine_types, settings.counts,
                                        every_selector)
    replicas = {role: ReplicaSpec(count=settings.counts[role], gpus=settings.gpus.get(role, 0),
                                  cpu=cpu.get(role), memory=memory.get(role))
                for role in ROLES if settings.counts[role] or settings.gpus.get(role)}
    check_roles_present(args, settings.counts)
    try:
        spec = _job_spec(args, settings, replicas, every_selector, role_selectors)
    except SpecError as exc:
        if exc.field == "--name" and args.job is not None and args.name is None:
            raise SpecError("JOB", f"{args.job!r} is not a job id here: as a name it must be a DNS-1035 label; use "
                            "letters, digits and '_', starting with a letter (e.g. census_1)") from None
        raise blamed_on_config(exc, args) from None
    check_job_dir_once(spec, args)
    notes = list(settings.notes) + machine_notes
    if spec.accelerator in END_OF_LIFE_ACCELERATORS:
        notes.append(f"note: {spec.accelerator} is end-of-life on GKE (no new node pools); "
                     "consider --accelerator nvidia-tesla-t4 or nvidia-l4")
    return spec, notes + secret_like_env_warnings(dict(spec.env))


def check_job_dir_once(spec: JobSpec, args: argparse.Namespace) -> None:
    """The job dir is given once: as --job-dir (or the config's jobDir), or in the trainer
    arguments (--job-dir, --model_dir, ...). Given twice, the trainer would write to the
    last while `tensorboard`, `serve --from-job` and the local backend's outputs follow
    another."""
    from trainer.flags import job_dir_given

    given = job_dir_given(spec.trainer_args)
    if spec.job_dir is not None and given:
        flag, value = given[0]
        where = "--job-dir" if args.job_dir is not None else f"--config {args.config} (jobDir)"
        raise SpecError("--job-dir", f"given twice: {spec.job_dir!r} by {where} and {value!r} by the trainer "
                        f"argument {flag}; give it once, as --job-dir (the launcher passes it to the trainer)")
    if len(given) > 1:
        raise SpecError("--job-dir", f"given {len(given)} times in the trainer arguments "
                        f"({', '.join(flag for flag, _ in given)}); give it once, as --job-dir")
    if given:
        try:
            check_job_dir(given[0][1])
        except SpecError as exc:
            raise SpecError(f"trainer arguments (after --): {given[0][0]}", str(exc)[len(exc.field) + 2:]) from None


CONFIG_MACHINE_KEYS = {"Chief": "masterType", "Worker": "workerType", "PS": "parameterServerType",
                       "Evaluator": "evaluatorType"}


def check_roles_present(args: argparse.Namespace, counts: dict[str, int]) -> None:
    """A flag's value for a replica type the job does not have (`--cpu ps=4` without ps) is
    refused, as --gpus-per-* is, instead of being dropped (a node selector's: the JobSpec)."""
    for flag, items, sep in (("--cpu", args.cpu, "="), ("--memory", args.memory, "=")):
        for item in items:
            role, found, _ = item.partition(sep)
            if found and "=" not in role and role.lower() in ROLE_FLAGS and not counts.get(ROLE_FLAGS[role.lower()]):
                raise absent_role(f"{flag} {role.lower()}{sep}", ROLE_FLAGS[role.lower()])
    for flag, role in MACHINE_TYPE_FLAGS.items():
        if getattr(args, flag.replace("-", "_")) and not counts.get(role):
            raise absent_role(f"--{flag}", role)


def apply_machine_types(args: argparse.Namespace, cpu: dict, memory: dict, role_selectors: dict,
                        from_config: dict[str, str] | None = None, counts: dict[str, int] | None = None,
                        every_selector: dict[str, str] | None = None) -> list[str]:
    """--master/worker/parameter-server-machine-type, or the config file's masterType,
    workerType, ... (a flag wins): requests that fill such a node and its instance-type
    selector, unless --cpu ROLE= or --memory ROLE= say otherwise; a --node-selector on the
    instance type that names another machine is refused (the pods would wait for a node
    their requests do not fit)."""
    from ..machine_types import INSTANCE_TYPE_LABEL, requests_for

    explicit = {flag: {item.partition("=")[0].lower() for item in items if "=" in item}
                for flag, items in (("cpu", args.cpu), ("memory", args.memory))}
    machines = {role: (machine, f"trainingInput.{CONFIG_MACHINE_KEYS[role]}", f"--config {args.config}")
                for role, machine in (from_config or {}).items()}
    for flag, role in MACHINE_TYPE_FLAGS.items():
        if getattr(args, flag.replace("-", "_")):
            machines[role] = (getattr(args, flag.replace("-", "_")), f"--{flag}", f"--{flag}")
    notes = []
    for role in CONFIG_MACHINE_KEYS:  # gcloud's order: master, worker, parameter server, evaluator
        if role not in machines or (counts is not None and not counts.get(role)):
            continue
        machine, source, field = machines[role]
        want_cpu, want_memory = requests_for(machine, field)
        name = next(k for k, v in ROLE_FLAGS.items() if v == role)
        if name not in explicit["cpu"]:
            cpu[role] = want_cpu
        if name not in explicit["memory"]:
            memory[role] = want_memory
        chosen = {**(every_selector or {}), **role_selectors.get(role, {})}.get(INSTANCE_TYPE_LABEL, machine)
        if chosen != machine:
            what = machine if source == field else f"{source} {machine}"
            raise SpecError(field, f"{what} differs from --node-selector {INSTANCE_TYPE_LABEL}={chosen} for the "
                            f"{name} pods; drop that selector (the machine type sets it)")
        role_selectors.setdefault(role, {})[INSTANCE_TYPE_LABEL] = machine
        notes.append(f"note: {source} {machine}: {name} pods request cpu {cpu[role]}, memory {memory[role]} "
                     f"(what a GKE {machine} node leaves to pods, less room for system pods) and run on "
                     f"{INSTANCE_TYPE_LABEL}={machine} nodes")
    return notes


def blamed_on_config(exc: SpecError, args: argparse.Namespace) -> SpecError:
    """A rule broken by a value that came from --config, not from the flag the rule names:
    name the file (the message still says which setting, and the flag that overrides it)."""
    flag = exc.field.split()[0]
    attr = flag.lstrip("-").replace("-", "_")
    if not args.config or not flag.startswith("--") or not hasattr(args, attr) \
            or getattr(args, attr) not in (None, []):
        return exc
    message = str(exc)[len(exc.field) + 2:]
    return SpecError(f"--config {args.config}", f"{exc.field} from the file: {message}")


def _name(args, settings: Settings) -> str:
    """--name, gcloud's JOB (as a TFJob name), the config file's jobId, or a default name."""
    if args.job is not None:
        if args.name is not None:
            raise SpecError("--name", f"given twice: {args.name!r} and gcloud's JOB {args.job!r}; give one")
        return job_name(args.job)
    return args.name if args.name is not None else settings.name or default_name(settings.trainer_args)


def _job_spec(args, settings: Settings, replicas, every_selector, role_selectors) -> JobSpec:
    check_service_account(args.service_account)
    return JobSpec(
        name=_name(args, settings),
        namespace=namespace_of(args),
        replicas=replicas,
        image=settings.image,
        restart_policy=args.restart_policy or "OnFailure",
        run_policy=RunPolicy(clean_pod_policy=args.clean_pod_policy or "Running",
                             ttl_seconds_after_finished=args.ttl_seconds,
                             active_deadline_seconds=settings.active_deadline_seconds,
                             backoff_limit=args.backoff_limit),
        accelerator=settings.accelerator,
        node_selector=every_selector,
        role_node_selectors=role_selectors,
        env=key_values(args.env, "--env"),
        labels=settings.labels,
        trainer_args=settings.trainer_args,
        job_dir=settings.job_dir,
        service_account=args.service_account,
        command=settings.command,
        volumes=volumes(args.volume),
        success_policy=args.success_policy or "",
        queue_name=args.queue_name,
        priority_class=args.priority_class,
        istio_sidecar=args.istio_sidecar,
        gang=args.gang,
        gang_timeout_seconds=args.gang_timeout_seconds,
        gang_queue=args.gang_queue,
        gang_min_available=args.gang_min_available,
        network_policy=not getattr(args, "no_network_policy", False),
        secret_env=secret_envs(args.secret_env),
        module_name=_pick(args.module_name, settings.module_name),
        package_path=os.path.abspath(args.package_path) if args.package_path else None,
    )
