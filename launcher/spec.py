"""JobSpec: the single source of truth for a training job.

Plain, frozen data validated at construction (no I/O). The Jinja template, the Helm
values and the local backend all derive from it; see `render.py` and `helm_values.py`.
"""
from __future__ import annotations

import difflib
import os
import re
import shlex
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Iterable, Mapping

from trainer import paths

# TFJob replica types, in the order training-operator v1.9 documents them.
ROLES = ("Chief", "PS", "Worker", "Evaluator")
GPU_ROLES = ("Chief", "Worker", "Evaluator")
RESTART_POLICIES = ("OnFailure", "ExitCode", "Never", "Always")
SUCCESS_POLICIES = ("", "AllWorkers")  # "": the chief (or worker 0) decides, the operator's default
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
ISTIO_INJECT = "sidecar.istio.io/inject"
CLEAN_POD_POLICIES = ("Running", "All", "None")
DEFAULT_IMAGE = "tfjob-trainer:0.1.0"
TRAINER_MODULE = "trainer.task"  # what the default image (and the local backend) runs
DEFAULT_NAMESPACE = "default"


def namespace_flag(namespace: str) -> str:
    """` -n NAMESPACE` for a command line a message suggests; nothing for the default one."""
    return "" if namespace == DEFAULT_NAMESPACE else f" -n {namespace}"
TF_PORT = 2222
JOB_NAME_LABEL = "training.kubeflow.org/job-name"  # training-operator labels every pod of a job with it
ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
# GKE's `cloud.google.com/gke-accelerator` values for NVIDIA GPUs (gcloud --accelerator type=...).
GKE_ACCELERATORS = ("nvidia-tesla-t4", "nvidia-l4", "nvidia-tesla-a100", "nvidia-a100-80gb", "nvidia-h100-80gb",
                    "nvidia-h100-mega-80gb", "nvidia-h200-141gb", "nvidia-b200", "nvidia-tesla-v100",
                    "nvidia-tesla-p100", "nvidia-tesla-p4", "nvidia-tesla-k80")
END_OF_LIFE_ACCELERATORS = ("nvidia-tesla-k80",)
GPU_RESOURCE = "nvidia.com/gpu"
RUN_AS_USER = 1000
# The training-operator's label keys: it sets job-name, operator-name, replica-type and -index on
# every pod, over the template's, and job-role on the master's only (so one on every pod misleads)
OPERATOR_LABEL_PREFIX = "training.kubeflow.org/"
HELM_CHART_LABEL = "helm.sh/chart"  # the chart's own label (helm create's), on the TFJob and pods
STANDARD_LABEL_KEYS = ("app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/component",
                       "app.kubernetes.io/managed-by")

_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
# resource.Quantity (k8s.io/apimachinery): <signedNumber><suffix>, a number of digits with at most one '.'
# (at least one digit), suffix binarySI, decimalSI ("" included) or an integer decimal exponent. No '-': these
# are resource requests, which the API server refuses below 0.
_QUANTITY = re.compile(r"[+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[KMGTPE]i|[numkMGTPE]|[eE][-+]?[0-9]+)?")
QUANTITY_RULE = ("digits with at most one '.' and an optional suffix n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, "
                 "Pi, Ei or e<N> (e.g. 500m, 1.5, 4Gi)")
# Image references, github.com/distribution/reference (regexp.go): [HOST[:PORT]/]PATH[:TAG][@DIGEST]. As
# there (normalize.go), the first component is a registry host when it has a '.' or ':' or is localhost;
# every path component is lowercase.
_IMAGE_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE_PATH = re.compile(rf"{_IMAGE_PATH_COMPONENT}(?:/{_IMAGE_PATH_COMPONENT})*")
_IMAGE_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_IMAGE_HOST = re.compile(rf"(?:{_IMAGE_DOMAIN_COMPONENT}(?:\.{_IMAGE_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])"
                         r"(?::[0-9]+)?")
_IMAGE_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
IMAGE_DIGESTS = {"sha256": 64, "sha384": 96, "sha512": 128}  # go-digest's algorithms: lowercase hex of this length
IMAGE_NAME_MAX = 255  # distribution's NameTotalLengthMax: host and path, without tag and digest
IMAGE_EXAMPLE = "gcr.io/my-project/trainer:0.1.0"
# Mount paths a claim would hide the image's (or the kernel's) files at; under the kernel's
# filesystems (/dev/shm, /proc/...) too.
KERNEL_MOUNT_PATHS = ("/dev", "/proc", "/sys")
IMAGE_WORKDIR = "/app"  # the trainer image's working directory (Dockerfile: WORKDIR)
HIDDEN_MOUNT_PATHS = (*KERNEL_MOUNT_PATHS, "/etc", IMAGE_WORKDIR, "/usr", "/bin", "/sbin", "/lib", "/lib64")
INT32_MAX = 2**31 - 1  # replicas, backoffLimit, ttlSecondsAfterFinished, minAvailable are int32 in the TFJob
JSON_INT_MAX = 2**53 - 1  # the largest integer a JSON number keeps (Helm reads the chart's values as float64)
MAX_NAME = 63
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


class SpecError(ValueError):
    """A JobSpec rule was broken. `field` names the flag/field, the message says the fix."""

    def __init__(self, field_name: str, message: str):
        self.field = field_name
        super().__init__(f"{field_name}: {message}")


def _frozen(mapping: Mapping[str, str] | None) -> Mapping[str, str]:
    return MappingProxyType(dict(mapping or {}))


def plain_path(path: str) -> str:
    """An absolute path as the kernel resolves it, without repeated or trailing slashes
    (/mnt//code/ -> /mnt/code; / stays /): how mount and package paths are compared and kept."""
    return "/" + "/".join(part for part in path.split("/") if part)


def on_volume(path: str, volumes: Iterable["Volume"]) -> bool:
    """Whether the absolute `path` (kept plain, see plain_path) lies on one of the volumes'
    mounts (a mount is never /: Volume.check refuses it)."""
    return any(path == mount or path.startswith(mount + "/") for mount in (plain_path(v.mount_path) for v in volumes))


def check_label_key(key: str, field_name: str) -> None:
    prefix, slash, name = key.rpartition("/")
    if slash and (len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):  # "/x": an empty prefix
        raise SpecError(field_name, f"key {key!r} has an invalid prefix; use a DNS subdomain like example.com/name")
    if not name or len(name) > 63 or not _LABEL_NAME.fullmatch(name):
        raise SpecError(field_name, f"key {key!r} is not a valid label key; use letters, digits, '-', '_', '.' (max 63)")


def check_label_value(key: str, value: str, field_name: str) -> None:
    if len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
        raise SpecError(field_name, f"value {value!r} of {key!r} is not a valid label value; "
                        "use at most 63 letters, digits, '-', '_', '.', starting and ending alphanumeric")


def check_free_text(value: str, field_name: str, what: str | None = None) -> None:
    """A free-form string that reaches a process (an argument, an env value, a path) through
    Kubernetes: without NUL, which no argument or environment of a process can hold (the
    container would never start), and UTF-8, as Kubernetes keeps strings; a lone surrogate (a
    byte of another encoding on the command line, as Python decodes it) is not: the API
    server would store U+FFFD for it, and kubectl refuses the rendered YAML. `what` names
    the value in the message (default: its repr; an env value, perhaps a token, by its name)."""
    what = what or repr(value)
    if "\x00" in value:
        raise SpecError(field_name, f"{what} holds a NUL byte, which no process can take in its arguments or "
                        "environment; drop it")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise SpecError(field_name, f"{what} is not UTF-8 text (a byte of another encoding?), which Kubernetes "
                        "would change; give it in UTF-8") from None


def check_quantity(value: str | None, field_name: str) -> None:
    if value is not None and not _QUANTITY.fullmatch(value):
        raise SpecError(field_name, f"{value!r} is not a Kubernetes quantity; use {QUANTITY_RULE}")


def _type_name(value: Any) -> str:
    name = type(value).__name__
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def _given(value: Any) -> str:
    """A refused value and its type, as a message starts: `5 is an int`, `None`."""
    return "None" if value is None else f"{value!r} is {_type_name(value)}"


def _or_none(optional: bool) -> str:
    return ", or None" if optional else ""


def _number_as_text(value: Any) -> str | None:
    """A number given where a string is wanted, as that string ('300' for 300)."""
    return repr(str(value)) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


# A URL given as a pathlib.Path, which turned its '//' into '/' (gs://b/x -> gs:/b/x)
_COLLAPSED_URL = re.compile(r"[A-Za-z][-+.A-Za-z0-9]*:/(?!/)")


def check_text(value: Any, field_name: str, example: str, optional: bool = False) -> None:
    """A str field (or None, when `optional`); `example`: a value to suggest."""
    if not (isinstance(value, str) or (optional and value is None)):
        raise SpecError(field_name, f"{_given(value)}; use a string, e.g. {example!r}{_or_none(optional)}")


def _fspath(value: Any, field_name: str) -> Any:
    """An os.PathLike (pathlib.Path) as its str (os.fspath), anything else as given. A URL in a
    Path is refused: the Path has already made gs://bucket of it gs:/bucket."""
    if not isinstance(value, os.PathLike):
        return value
    path = os.fspath(value)
    if isinstance(path, str) and _COLLAPSED_URL.match(path):
        raise SpecError(field_name, f"{value!r} is a URL whose '//' the Path made '/'; give the URL as a string, "
                        f"e.g. {_COLLAPSED_URL.sub(lambda m: m[0] + '/', path, 1)!r}")
    return path


def path_text(value: Any, field_name: str, example: str, optional: bool = False) -> Any:
    """A path field as a str: a str, or a pathlib.Path (see _fspath)."""
    value = _fspath(value, field_name)
    check_text(value, field_name, example, optional)
    return value


def check_bool(value: Any, field_name: str) -> None:
    """A bool field: True or False, not a value Python would take as true or false ('false' is true)."""
    if not isinstance(value, bool):
        raise SpecError(field_name, f"{_given(value)}; use True or False")


def check_int(value: Any, field_name: str, example: str, optional: bool = False) -> None:
    """An int field (bool refused; or None, when `optional`); the rules of its range follow."""
    if not ((isinstance(value, int) and not isinstance(value, bool)) or (optional and value is None)):
        raise SpecError(field_name, f"{_given(value)}; use an int, e.g. {example}{_or_none(optional)}")


def _constructed(cls: type, value: Any) -> str | None:
    """`value`, a tuple or dict given for a `cls`, as the `cls(...)` call to give instead."""
    if isinstance(value, (tuple, list)):
        return f"{cls.__name__}({', '.join(map(repr, value))})"
    if isinstance(value, Mapping) and all(isinstance(key, str) and key.isidentifier() for key in value):
        return f"{cls.__name__}({', '.join(f'{key}={item!r}' for key, item in value.items())})"
    return None


def check_instance(value: Any, field_name: str, cls: type, example: str) -> None:
    """A field of one of the spec's own classes (RunPolicy, an item of volumes)."""
    if not isinstance(value, cls):
        raise SpecError(field_name, f"{_given(value)}; use a {cls.__name__}, "
                        f"e.g. {_constructed(cls, value) or example}")


def instances(value: Any, field_name: str, cls: type, example: str) -> tuple:
    """A list of `cls` (Volume, SecretEnv) as a tuple; one `cls` alone, a str or a mapping is refused."""
    if isinstance(value, cls):
        raise SpecError(field_name, f"{value!r} is one {cls.__name__}, not a list; use a list, e.g. [{value!r}]")
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise SpecError(field_name, f"{_given(value)}, not a list; use a list of {cls.__name__}, e.g. [{example}]")
    items = tuple(value)
    for index, item in enumerate(items):
        check_instance(item, f"{field_name}[{index}]", cls, example)
    return items


def _dict_example(value: Any) -> str | None:
    """A str `K=V,...`, a list of such strings or of pairs given for a mapping, as the dict to give instead."""
    items = value.split(",") if isinstance(value, str) else value if isinstance(value, (tuple, list)) else None
    try:
        return repr(dict(item.split("=", 1) if isinstance(item, str) else item for item in items))
    except (TypeError, ValueError):
        return None


def string_map(value: Any, field_name: str, example: str) -> Mapping[str, str]:
    """A mapping of str to str (env, labels, a node selector), frozen; None: empty. A str or a
    list of pairs, keys and values of another type are refused."""
    if value is None:
        return _frozen(value)
    if not isinstance(value, Mapping):
        raise SpecError(field_name, f"{_given(value)}, not a mapping; use a dict of strings, e.g. "
                        f"{_dict_example(value) or example}")
    for key, item in value.items():
        if not isinstance(key, str):
            raise SpecError(field_name, f"key {key!r} is {_type_name(key)}; use a dict of strings, e.g. {example}")
        if not isinstance(item, str):
            raise SpecError(field_name, f"the value of {key!r}, {item!r}, is {_type_name(item)}; use a string, "
                            f"e.g. {{{key!r}: {_number_as_text(item) or repr('...')}}}")
    return _frozen(value)


def string_list(value: Any, field_name: str) -> tuple[str, ...]:
    """A JobSpec argument list (trainer_args, command) as a tuple of str, a path (os.PathLike)
    as its str; a bare str, which tuple() would split into characters, and items of another
    type are refused."""
    if isinstance(value, (str, bytes)):
        text = value.decode(errors="replace") if isinstance(value, bytes) else value
        try:
            example = repr(shlex.split(text)) if text.strip() else "['--train-steps', '300']"
        except ValueError:
            example = repr([text])
        raise SpecError(field_name, f"{value!r} is {_type_name(value)}, which would be split into characters; "
                        f"use a list of strings, e.g. {example}")
    try:
        items = tuple(_fspath(item, field_name) for item in value)
    except TypeError:
        raise SpecError(field_name, f"{_given(value)}, not a list; use a list of strings, "
                        "e.g. ['--train-steps', '300']") from None
    for index, item in enumerate(items):
        if not isinstance(item, str):
            example = f", e.g. {_number_as_text(item)}" if _number_as_text(item) else ""
            raise SpecError(field_name, f"item {index}, {item!r}, is {_type_name(item)}; "
                            f"use a list of strings{example}")
    return items


def shown(text: str, fallback: str | None = None) -> str:
    """A value in a message as itself when it prints so, else as its repr (or `fallback`,
    e.g. for an example derived from a refused value): the message stays one line, without
    the value's line breaks or terminal escapes (a path with an ESC)."""
    return text if text.isprintable() else repr(text) if fallback is None else fallback


def check_image(image: Any) -> None:
    """A container image reference by the distribution/reference grammar (what kubelet parses)."""
    if not isinstance(image, str):
        raise SpecError("image", f"{_given(image)}; use a string, e.g. {IMAGE_EXAMPLE!r}")
    generic = SpecError("--image", f"{image!r} is not an image reference; use [HOST[:PORT]/]PATH[:TAG][@sha256:HEX] "
                        f"with a lowercase PATH, e.g. {IMAGE_EXAMPLE}")
    rest, at, digest = image.partition("@")
    if at:
        algorithm, _, encoded = digest.partition(":")
        length = IMAGE_DIGESTS.get(algorithm, 64)
        if algorithm not in IMAGE_DIGESTS or not re.fullmatch(f"[0-9a-f]{{{length}}}", encoded):
            known = algorithm if algorithm in IMAGE_DIGESTS else "sha256"
            raise SpecError("--image", f"digest {digest!r} of {image!r} is invalid; use {known}: and "
                            f"{IMAGE_DIGESTS[known]} lowercase hex digits, or drop the @ part to pull by tag")
    name, tag = rest, None
    if rest.rfind(":") > rest.rfind("/"):
        name, _, tag = rest.rpartition(":")
    first, slash, remainder = name.partition("/")
    host, path = (first, remainder) if slash and (first == "localhost" or any(c in first for c in ".:")) else ("", name)
    if not name or (host and not _IMAGE_HOST.fullmatch(host)):
        raise generic
    if ":" in path:
        repository, _, after = path.partition(":")
        example = f"{host}/" * bool(host) + f"{repository}:{after.partition('/')[0] or 'TAG'}"
        raise SpecError("--image", f"{image!r} has a ':' inside its repository path; use one tag after the last '/', "
                        f"e.g. {shown(example, IMAGE_EXAMPLE)}")
    if not _IMAGE_PATH.fullmatch(path):
        if _IMAGE_PATH.fullmatch(path.lower()):
            fixed = f"{host}/" * bool(host) + path.lower() + (f":{tag}" if tag is not None else "") + at + digest
            raise SpecError("--image", f"repository path {path!r} of {image!r} must be lowercase; use e.g. "
                            f"{shown(fixed, IMAGE_EXAMPLE)} (uppercase only in a registry host with a '.' or "
                            "':PORT')")
        raise generic
    if len(name) > IMAGE_NAME_MAX:
        raise SpecError("--image", f"the repository name of {image!r} has {len(name)} characters; "
                        f"use at most {IMAGE_NAME_MAX}")
    if tag is not None and not _IMAGE_TAG.fullmatch(tag):
        raise SpecError("--image", f"tag {tag!r} of {image!r} is invalid; use 1-128 letters, digits, '_', '.' and '-', "
                        "not starting with '.' or '-'")


def check_accelerator(value: str, field_name: str = "--accelerator") -> None:
    """A GKE accelerator name; a near miss (NVIDIA_TESLA_T4, nvidia-tesla-t1000) gets a suggestion."""
    if value in GKE_ACCELERATORS:
        return
    spelled = value.strip().lower().replace("_", "-").replace(" ", "-")
    near = [spelled] if spelled in GKE_ACCELERATORS else difflib.get_close_matches(spelled, GKE_ACCELERATORS, 3, 0.75)
    best = difflib.SequenceMatcher(None, spelled, near[0]).ratio() if near else 0
    near = [n for n in near if difflib.SequenceMatcher(None, spelled, n).ratio() > best - 0.02]
    hint = (f"did you mean {near[0]}? " if len(near) == 1 else
            f"did you mean one of {', '.join(near)}? " if near else "")
    raise SpecError(field_name, f"{value!r} is not a GKE accelerator; {hint}use one of {', '.join(GKE_ACCELERATORS)} "
                    f"(a newer GPU: --node-selector worker:{ACCELERATOR_LABEL}=VALUE)")


def check_listen_port(port: int, field_name: str = "--port") -> None:
    """A port for a server the launcher starts on this machine (tensorboard, serve): 0 lets
    the system pick a free one."""
    if not 0 <= port <= 65535:
        raise SpecError(field_name, f"{port} is not a TCP port; use 1-65535, or 0 for any free port")


def check_job_dir(job_dir: str | None) -> None:
    if job_dir is None:
        return
    # a bucket name Cloud Storage refuses, gs://b//x, and gs:/b/x or GS://b/x (a local path in
    # the pod, lost with it): the trainer's own rules
    if problem := paths.url_problem(job_dir):
        raise SpecError("--job-dir", problem)
    if job_dir.startswith("gs://"):
        return
    if "://" in job_dir:
        raise SpecError("--job-dir", f"{job_dir!r} is not supported; use a local path or gs://BUCKET/path")
    if not job_dir.strip():
        raise SpecError("--job-dir", "is empty; use a local path or gs://BUCKET/path")
    if "\n" in job_dir or "\r" in job_dir or "\x00" in job_dir:
        raise SpecError("--job-dir", f"{job_dir!r} contains a line break or a NUL byte; use a plain local path")


def replica_count_flag(role: str) -> str:
    """The flag that sets a role's replica count: --workers, --ps, --chief, --evaluator."""
    return "--workers" if role == "Worker" else f"--{role.lower()}"


def absent_role(field_name: str, role: str) -> SpecError:
    """`field_name` gives a value to replica type `role`, which the job does not have."""
    add = {"Worker": "--workers N", "Chief": "--chief 1", "Evaluator": "--evaluator 1", "PS": "--ps N"}[role]
    return SpecError(field_name, f"the job has no {role.lower()}; add {add} or drop the flag")


def unknown_role(field_name: str, role: Any) -> SpecError:
    """`role` is not one of TFJob's replica types (as TFJob spells them); a near miss gets a suggestion."""
    spelled = role.strip().lower() if isinstance(role, str) else ""
    near = ["Chief"] if spelled == "master" else \
        [r for r in ROLES if r.lower() in (spelled, spelled[:-1] if spelled.endswith("s") else "")] \
        or difflib.get_close_matches(str(role), ROLES, 1, 0.6)
    hint = f"did you mean {near[0]!r}? " if near else ""
    return SpecError(field_name, f"unknown replica type {role!r}; {hint}use {', '.join(ROLES[:-1])} or {ROLES[-1]} "
                     "(TFJob's names, case-sensitive)")


def check_namespace(namespace: Any, field_name: str = "--namespace") -> None:
    """A Kubernetes namespace name (a DNS-1123 label), as `field_name` gives it."""
    check_text(namespace, field_name, DEFAULT_NAMESPACE)
    if not _DNS1123_LABEL.fullmatch(namespace) or len(namespace) > 63:
        raise SpecError(field_name, f"{namespace!r} is not a valid namespace; use lowercase letters, digits, '-'")


@dataclass(frozen=True)
class ReplicaSpec:
    """One TFJob replica type: how many, and what each pod gets."""

    count: int
    gpus: int = 0
    cpu: str | None = None
    memory: str | None = None

    def __post_init__(self) -> None:
        """Types, at construction (the Python API's fields); values are checked by JobSpec, per role."""
        check_int(self.count, "ReplicaSpec.count", "ReplicaSpec(2)")
        check_int(self.gpus, "ReplicaSpec.gpus", "ReplicaSpec(2, gpus=1)")
        for attr, example in (("cpu", "500m"), ("memory", "4Gi")):  # Kubernetes quantities: 2 as '2'
            value = getattr(self, attr)
            check_text(value, f"ReplicaSpec.{attr}", str(value) if _number_as_text(value) else example, optional=True)

    def check(self, role: str) -> None:
        flag = role.lower()
        count_flag = replica_count_flag(role)
        if self.count < 0:
            raise SpecError(count_flag, f"replica count {self.count!r} is invalid; use an integer >= 0")
        if self.count > INT32_MAX:
            raise SpecError(count_flag, f"replica count {self.count} is too large; use at most {INT32_MAX}")
        if self.gpus < 0:
            raise SpecError(f"--gpus-per-{flag}", f"{self.gpus!r} is invalid; use an integer >= 0")
        if self.gpus and role not in GPU_ROLES:
            raise SpecError(f"--gpus-per-{flag}", "GPUs are only for chief, worker and evaluator; ps run on CPU nodes")
        if self.gpus and not self.count:
            raise absent_role(f"--gpus-per-{flag}", role)
        check_quantity(self.cpu, f"--cpu {flag}=")
        check_quantity(self.memory, f"--memory {flag}=")


@dataclass(frozen=True)
class SecretEnv:
    """An env var of the tensorflow container read from key `key` of Secret `secret`
    (valueFrom.secretKeyRef): the value never sits in the TFJob."""

    name: str
    secret: str
    key: str

    def __post_init__(self) -> None:
        """Types, at construction (the Python API's fields); values are checked by JobSpec."""
        for attr, example in (("name", "HF_TOKEN"), ("secret", "hf-token"), ("key", "token")):
            check_text(getattr(self, attr), f"SecretEnv.{attr}", example)

    def check(self) -> None:
        flag = "--secret-env"
        if not _ENV_NAME.fullmatch(self.name) or self.name == "TF_CONFIG":
            raise SpecError(flag, f"{self.name!r} is not allowed as a variable name "
                            "(letters, digits, '_', '-', '.'; TF_CONFIG is set by the operator)")
        if len(self.secret) > 253 or not _DNS_SUBDOMAIN.fullmatch(self.secret):
            raise SpecError(flag, f"{self.secret!r} is not a Secret name; use lowercase letters, digits, '-' "
                            f"and '.' (e.g. --secret-env {self.name}=hf-token:token)")
        if len(self.key) > 253 or not _SECRET_KEY.fullmatch(self.key):
            raise SpecError(flag, f"{self.key!r} is not a Secret key; use letters, digits, '-', '_' and '.' "
                            f"(e.g. --secret-env {self.name}={self.secret}:token)")

    def env_entry(self) -> dict:
        return {"name": self.name, "valueFrom": {"secretKeyRef": {"name": self.secret, "key": self.key}}}


@dataclass(frozen=True)
class Volume:
    """A PersistentVolumeClaim mounted into the tensorflow container of every replica."""

    claim: str
    mount_path: str
    read_only: bool = False

    def __post_init__(self) -> None:
        """Types, at construction (the Python API's fields; a pathlib.Path as mount_path is
        taken as its str); values are checked by JobSpec."""
        check_text(self.claim, "Volume.claim", "training-data")
        object.__setattr__(self, "mount_path", path_text(self.mount_path, "Volume.mount_path", "/mnt/data"))
        check_bool(self.read_only, "Volume.read_only")

    def check(self) -> None:
        if len(self.claim) > 253 or not _DNS_SUBDOMAIN.fullmatch(self.claim):
            raise SpecError("--volume", f"claim {self.claim!r} is not a PersistentVolumeClaim name; use lowercase "
                            "letters, digits, '-' and '.' (e.g. --volume training-data:/data)")
        path = self.mount_path
        if not path.startswith("/") or any(c in path for c in "\n\x00:") or len(path) > 1024:
            raise SpecError("--volume", f"mount path {path!r} of claim {self.claim!r} is not an absolute path; "
                            "use e.g. --volume CLAIM:/mnt/data")
        if "/../" in path + "/":
            raise SpecError("--volume", f"mount path {path!r} of claim {self.claim!r} has a '..' segment; "
                            "give a plain absolute path, e.g. /mnt/data")
        plain = plain_path(path)
        hidden = next((top for top in HIDDEN_MOUNT_PATHS
                       if plain == top or (top in KERNEL_MOUNT_PATHS and plain.startswith(top + "/"))), None)
        if hidden in KERNEL_MOUNT_PATHS:
            raise SpecError("--volume", f"mount path {path!r} is {'under ' * (plain != hidden)}{hidden}, which the "
                            "container runtime provides; mount the claim elsewhere, e.g. /mnt/data")
        if plain == "/" or hidden:
            why = {"/usr": " (Python lives there)", IMAGE_WORKDIR: " (the trainer's working directory)"}.get(hidden, "")
            raise SpecError("--volume", f"mount path {path!r} would hide the image's {hidden or '/'}{why}; "
                            "mount the claim elsewhere, e.g. /mnt/data")


@dataclass(frozen=True)
class RunPolicy:
    clean_pod_policy: str = "Running"
    ttl_seconds_after_finished: int | None = None
    active_deadline_seconds: int | None = None
    backoff_limit: int | None = None

    def __post_init__(self) -> None:
        """Types, at construction (the Python API's fields); values are checked by JobSpec."""
        check_text(self.clean_pod_policy, "RunPolicy.clean_pod_policy", "Running")
        for attr, example in (("ttl_seconds_after_finished", "3600"), ("active_deadline_seconds", "7200"),
                              ("backoff_limit", "3")):
            check_int(getattr(self, attr), f"RunPolicy.{attr}", example, optional=True)

    def check(self) -> None:
        if self.clean_pod_policy not in CLEAN_POD_POLICIES:
            raise SpecError("--clean-pod-policy", f"{self.clean_pod_policy!r}; use one of {', '.join(CLEAN_POD_POLICIES)}")
        for flag, value, low, high in (("--ttl-seconds", self.ttl_seconds_after_finished, 0, INT32_MAX),
                                       ("--active-deadline-seconds", self.active_deadline_seconds, 1, JSON_INT_MAX),
                                       ("--backoff-limit", self.backoff_limit, 0, INT32_MAX)):
            if value is not None and value < low:
                hint = " (the CRD wants a positive number; leave it out for no deadline)" if low else ""
                raise SpecError(flag, f"{value!r} is invalid; use an integer >= {low}{hint}")
            if value is not None and value > high:
                raise SpecError(flag, f"{value} is too large; use at most {high}")


@dataclass(frozen=True)
class JobSpec:
    """Everything that defines a TFJob. Construction validates; an instance is always valid."""

    name: str
    replicas: Mapping[str, ReplicaSpec]
    namespace: str = DEFAULT_NAMESPACE
    image: str = DEFAULT_IMAGE
    restart_policy: str = "OnFailure"
    run_policy: RunPolicy = field(default_factory=RunPolicy)
    accelerator: str | None = None
    node_selector: Mapping[str, str] = field(default_factory=dict)
    role_node_selectors: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # per role, over node_selector
    env: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    trainer_args: tuple[str, ...] = ()
    job_dir: str | None = None
    service_account: str | None = None
    command: tuple[str, ...] = ()
    volumes: tuple[Volume, ...] = ()
    success_policy: str = ""
    queue_name: str | None = None        # Kueue LocalQueue: the job is created suspended for Kueue to admit
    priority_class: str | None = None    # the pods' priorityClassName
    istio_sidecar: bool = False          # False: pods opt out of Istio sidecar injection
    gang: bool = False                   # gang scheduling: every replica or none (Volcano / scheduler-plugins)
    gang_timeout_seconds: int | None = None
    gang_queue: str | None = None        # the gang scheduler's queue (Volcano Queue); None: its default
    gang_min_available: int | None = None  # replicas that must start together; None: every replica
    network_policy: bool = True  # a NetworkPolicy: the TF port admits the job's own pods only
    secret_env: tuple[SecretEnv, ...] = ()  # env vars from Secrets (after `env`)
    module_name: str | None = None   # gcloud's --module-name: the container runs `python -m MODULE`
    package_path: str | None = None  # gcloud's --package-path: the package's directory where the replicas
    #                                  run (its parent goes on PYTHONPATH); the launcher ships no files

    def __post_init__(self) -> None:
        self._check_replica_keys()
        object.__setattr__(self, "replicas", MappingProxyType(
            {role: self.replicas[role] for role in ROLES if role in self.replicas}))
        self._check_types()
        self._check()

    # ---- validation -------------------------------------------------------------
    def _check_types(self) -> None:
        """Every field's type, named by its field, before a rule reads it (the CLI's parser
        types its values; the Python API's come as given); the mappings and lists frozen,
        a pathlib.Path as its str. The image: check_image."""
        for attr, example in (("name", "mnist-ps"), ("namespace", DEFAULT_NAMESPACE), ("restart_policy", "OnFailure"),
                              ("success_policy", "AllWorkers")):
            check_text(getattr(self, attr), attr, example)
        for attr, example in (("accelerator", "nvidia-l4"), ("service_account", "trainer"),
                              ("queue_name", "team-queue"), ("priority_class", "high-priority"),
                              ("gang_queue", "training"), ("module_name", TRAINER_MODULE)):
            check_text(getattr(self, attr), attr, example, optional=True)
        for attr in ("istio_sidecar", "gang", "network_policy"):
            check_bool(getattr(self, attr), attr)
        for attr, example in (("gang_timeout_seconds", "300"), ("gang_min_available", "2")):
            check_int(getattr(self, attr), attr, example, optional=True)
        check_instance(self.run_policy, "run_policy", RunPolicy, "RunPolicy(backoff_limit=3)")
        for attr, example in (("job_dir", "gs://my-bucket/runs/mnist"), ("package_path", "/mnt/code/trainer")):
            object.__setattr__(self, attr, path_text(getattr(self, attr), attr, example, optional=True))
        if self.package_path:  # /mnt//code/trainer/ as /mnt/code/trainer: the chart derives the same parent
            object.__setattr__(self, "package_path", plain_path(self.package_path)
                               if self.package_path.startswith("/") else self.package_path)
        for attr, example in (("node_selector", {"cloud.google.com/gke-nodepool": "training"}),
                              ("env", {"TF_CPP_MIN_LOG_LEVEL": "1"}), ("labels", {"team": "ml"})):
            object.__setattr__(self, attr, string_map(getattr(self, attr), attr, repr(example)))
        object.__setattr__(self, "role_node_selectors", self._role_node_selectors())
        for attr in ("trainer_args", "command"):
            object.__setattr__(self, attr, string_list(getattr(self, attr), attr))
        object.__setattr__(self, "volumes", instances(self.volumes, "volumes", Volume, "Volume('data', '/mnt/data')"))
        object.__setattr__(self, "secret_env", instances(self.secret_env, "secret_env", SecretEnv,
                                                         "SecretEnv('HF_TOKEN', 'hf-token', 'token')"))

    def _role_node_selectors(self) -> Mapping[str, Mapping[str, str]]:
        """role_node_selectors, frozen: TFJob's replica types to selectors (an empty one dropped)."""
        selectors, example = self.role_node_selectors, {"Worker": {ACCELERATOR_LABEL: "nvidia-l4"}}
        if selectors is None:
            return _frozen(selectors)
        if not isinstance(selectors, Mapping):
            raise SpecError("role_node_selectors", f"{_given(selectors)}, not a mapping; use a dict of replica type "
                            f"to node selector, e.g. {example!r}")
        for role in selectors:
            if role not in ROLES:
                raise unknown_role("role_node_selectors", role)
        frozen = {role: string_map(selector, f"role_node_selectors[{role!r}]", repr(example["Worker"]))
                  for role, selector in selectors.items()}
        return MappingProxyType({role: selector for role, selector in frozen.items() if selector})

    def _check_replica_keys(self) -> None:
        """`replicas` maps TFJob's replica types, spelled as TFJob spells them, to ReplicaSpecs:
        an unknown key (Workers, worker) is refused, not dropped."""
        if not isinstance(self.replicas, Mapping):
            raise SpecError("replicas", f"{self.replicas!r} is {_type_name(self.replicas)}, not a mapping; "
                            "use e.g. {'Chief': ReplicaSpec(1), 'Worker': ReplicaSpec(2)}")
        for role, spec in self.replicas.items():
            if role not in ROLES:
                raise unknown_role("replicas", role)
            if not isinstance(spec, ReplicaSpec):
                example = f"ReplicaSpec({spec})" if isinstance(spec, int) and not isinstance(spec, bool) \
                    else "ReplicaSpec(1)"
                raise SpecError("replicas", f"{role!r} maps to {spec!r} ({type(spec).__name__}), not a ReplicaSpec; "
                                f"use e.g. {{{role!r}: {example}}}")

    def _check(self) -> None:
        self._check_replicas()  # first: the counts' own errors before any the counts would cause (name length)
        self._check_names()
        if self.restart_policy not in RESTART_POLICIES:
            raise SpecError("--restart-policy", f"{self.restart_policy!r}; use one of {', '.join(RESTART_POLICIES)}")
        self.run_policy.check()
        check_image(self.image)
        if self.accelerator is not None:
            check_accelerator(self.accelerator)
        self._check_node_selectors()
        for key, value in self.labels.items():
            check_label_key(key, "--label")
            check_label_value(key, value, "--label")
            if key in STANDARD_LABEL_KEYS:
                raise SpecError("--label", f"{key} is set by the launcher (to {self.standard_labels()[key]!r}) "
                                "and would be overwritten; drop it or use another key")
            if key == HELM_CHART_LABEL:
                raise SpecError("--label", f"{key} is set by the Helm chart (charts/tfjob) and would be overwritten "
                                "there; use another key")
            if key.startswith(OPERATOR_LABEL_PREFIX):  # training-operator v1.9.4 pkg/controller.v1/common/pod.go
                raise SpecError("--label", f"{key} is the training-operator's: it sets its own on each pod (job name, "
                                "replica type and index, the master's role); use another key")
        for key in self.env:
            if not _ENV_NAME.fullmatch(key) or key == "TF_CONFIG":
                raise SpecError("--env", f"{key!r} is not allowed as a variable name "
                                "(letters, digits, '_', '-', '.'; TF_CONFIG is set by the operator)")
        if "JOB_DIR" in self.env and not self.command and self.module_name in (None, TRAINER_MODULE):
            raise SpecError("--env", "JOB_DIR is the trainer's job dir, which tensorboard, serve --from-job and a "
                            "resubmit read from its arguments; give it as --job-dir")
        check_job_dir(self.job_dir)
        self._check_volumes()
        self._check_secret_env()
        self._check_module()
        self._check_free_text()
        if self.success_policy not in SUCCESS_POLICIES:
            raise SpecError("--success-policy", f"{self.success_policy!r}; use AllWorkers or leave it out (the chief decides)")
        if self.queue_name is not None:
            if not self.queue_name or not _DNS1123_LABEL.fullmatch(self.queue_name) or len(self.queue_name) > 63:
                raise SpecError("--queue-name", f"{self.queue_name!r} is not a Kueue LocalQueue name; use lowercase "
                                "letters, digits and '-' (kubectl get localqueues)")
            if QUEUE_LABEL in self.labels:
                raise SpecError("--label", f"{QUEUE_LABEL} is set by --queue-name; drop the label")
        self._check_gang()
        if self.priority_class is not None and (len(self.priority_class) > 253
                                                or not _DNS_SUBDOMAIN.fullmatch(self.priority_class)):
            raise SpecError("--priority-class", f"{self.priority_class!r} is not a PriorityClass name; use a lowercase "
                            "DNS name (kubectl get priorityclasses)")
        if self.service_account is not None and (len(self.service_account) > 253
                                                 or not _DNS_SUBDOMAIN.fullmatch(self.service_account)):
            raise SpecError("--service-account", f"{self.service_account!r} is not a valid name; use a lowercase DNS "
                            "name of at most 253 characters")

    def _check_gang(self) -> None:
        for flag, value in (("--gang-timeout-seconds", self.gang_timeout_seconds), ("--gang-queue", self.gang_queue),
                            ("--gang-min-available", self.gang_min_available)):
            if value is not None and not self.gang:
                raise SpecError(flag, "only with --gang; add --gang or drop it")
        if self.gang_timeout_seconds is not None:
            if not 1 <= self.gang_timeout_seconds < 2**31:
                raise SpecError("--gang-timeout-seconds", f"{self.gang_timeout_seconds!r} is invalid; use seconds >= 1")
        if self.gang_queue is not None and (len(self.gang_queue) > 253 or not _DNS_SUBDOMAIN.fullmatch(self.gang_queue)):
            raise SpecError("--gang-queue", f"{self.gang_queue!r} is not a queue name; use a lowercase DNS name "
                            "(kubectl get queues.scheduling.volcano.sh)")
        total = self.total_replicas()
        if self.gang_min_available is not None:
            if not 1 <= self.gang_min_available <= min(total, INT32_MAX):
                raise SpecError("--gang-min-available", f"{self.gang_min_available!r} is invalid; use 1 to "
                                f"{min(total, INT32_MAX)} (the job's replicas), or leave it out for all {total}")
        elif self.gang and total > INT32_MAX:
            raise SpecError("--gang", f"the job has {total} replicas, more than a gang's minAvailable can hold; "
                            f"give --gang-min-available N (at most {INT32_MAX}) or fewer replicas")

    def _check_names(self) -> None:
        if not _DNS1035.fullmatch(self.name):
            raise SpecError("--name", f"{self.name!r} is not a DNS-1035 label; use lowercase letters, digits "
                            "and '-', starting with a letter (e.g. mnist-ps)")
        check_namespace(self.namespace)
        longest = max((len(replica_name(self.name, role, spec.count - 1))
                       for role, spec in self.replicas.items() if spec.count), default=len(self.name))
        if longest > MAX_NAME:
            raise SpecError("--name", f"{self.name!r} is too long: replica service names would reach {longest} "
                            f"characters (max {MAX_NAME}); use a shorter name")

    def _check_node_selectors(self) -> None:
        for selector in (self.node_selector, *self.role_node_selectors.values()):  # the roles: _check_types
            for key, value in selector.items():
                check_label_key(key, "--node-selector")
                check_label_value(key, value, "--node-selector")
        for role, spec in self.replicas.items():
            own = {**self.node_selector, **self.role_node_selectors.get(role, {})}.get(ACCELERATOR_LABEL)
            if self.accelerator and spec.gpus and own not in (None, self.accelerator):
                raise SpecError("--node-selector", f"{role.lower()}'s {ACCELERATOR_LABEL}={own} conflicts with "
                                f"--accelerator {self.accelerator}; give the GPU type once")
            if spec.count and not spec.gpus and ACCELERATOR_LABEL in self.replica_node_selector(role):
                flag = role.lower()
                raise SpecError("--node-selector", f"{ACCELERATOR_LABEL} would put the {flag} replicas, which have no "
                                "GPUs, on GPU nodes (tainted: they would never schedule); select the GPU pool per "
                                f"role, e.g. --node-selector worker:{ACCELERATOR_LABEL}=..., or use --accelerator")

    def _check_free_text(self) -> None:
        """The free-form strings (the others have patterns of their own): check_free_text."""
        for key, value in self.env.items():  # named, not shown: a plain --env may hold a token
            check_free_text(value, "--env", f"the value of {key}")
        for field_name, values in (("trainer arguments (after --)", self.trainer_args), ("command", self.command),
                                   ("--job-dir", [self.job_dir or ""]),
                                   ("--volume", [v.mount_path for v in self.volumes]),
                                   ("--package-path", [self.package_path or ""])):
            for value in values:
                check_free_text(value, field_name)

    def _check_volumes(self) -> None:
        claims: set[str] = set()
        paths: set[str] = set()
        for volume in self.volumes:
            volume.check()
            path = plain_path(volume.mount_path)  # /mnt/data and /mnt//data/ are one mount
            if volume.claim in claims:
                raise SpecError("--volume", f"claim {volume.claim!r} is given twice; mount each claim once")
            if path in paths:
                raise SpecError("--volume", f"mount path {volume.mount_path!r} is used twice; "
                                "give each claim its own directory")
            claims.add(volume.claim)
            paths.add(path)

    def _check_secret_env(self) -> None:
        names: set[str] = set()
        for entry in self.secret_env:
            entry.check()
            if entry.name in names or entry.name in self.env:
                raise SpecError("--secret-env", f"{entry.name!r} is set twice (by --env or --secret-env); "
                                "give each variable once")
            names.add(entry.name)

    def _check_module(self) -> None:
        if self.module_name is not None:
            if not _MODULE.fullmatch(self.module_name):
                raise SpecError("--module-name", f"{self.module_name!r} is not a Python module name; use dotted "
                                "identifiers, e.g. trainer.task")
            if self.command:
                raise SpecError("--module-name", "conflicts with the container command (containerCommand of "
                                "--config); use one of them")
        if self.package_path is None:
            return
        path = self.package_path.rstrip("/")
        if self.module_name is None:
            raise SpecError("--package-path", "needs the module to run from the package; add --module-name, "
                            "e.g. --module-name trainer.task")
        if not path.startswith("/") or any(part == ".." for part in path.split("/")) \
                or any(c in path for c in ":\n\x00"):
            raise SpecError("--package-path", f"{self.package_path!r} is not an absolute directory path without "
                            "'..' or ':'; use e.g. /mnt/code/trainer")
        package = path.rsplit("/", 1)[-1]
        if package != self.module_name.split(".")[0]:
            raise SpecError("--package-path", f"the module {self.module_name} is not in package {package!r} "
                            f"({shown(self.package_path)}); give the package's own directory, e.g. .../"
                            f"{self.module_name.split('.')[0]}")
        if "PYTHONPATH" in self.env or any(s.name == "PYTHONPATH" for s in self.secret_env):
            raise SpecError("--env" if "PYTHONPATH" in self.env else "--secret-env", "PYTHONPATH is set by "
                            "--package-path (to the package's parent directory); drop one of them")

    def container_command(self) -> tuple[str, ...]:
        """The tensorflow container's command: `python -m MODULE` with --module-name, else
        the given command (empty: the image's ENTRYPOINT, python -m trainer.task)."""
        return ("python", "-m", self.module_name) if self.module_name else self.command

    def package_parent(self) -> str | None:
        """The directory --package-path puts on PYTHONPATH (the package's parent)."""
        if self.package_path is None:
            return None
        return self.package_path.rstrip("/").rsplit("/", 1)[0] or "/"

    def container_env(self) -> list[dict]:
        """The tensorflow container's env: --env values, PYTHONPATH for --package-path, then
        --secret-env references."""
        package = [{"name": "PYTHONPATH", "value": self.package_parent()}] if self.package_path else []
        return ([{"name": k, "value": v} for k, v in self.env.items()] + package
                + [entry.env_entry() for entry in self.secret_env])

    def _check_replicas(self) -> None:
        for role, spec in self.replicas.items():  # the keys: _check_replica_keys
            spec.check(role)
        if self.count("Chief") > 1:
            raise SpecError("--chief", "at most 1 chief; use --chief 0 or 1")
        if self.count("Evaluator") > 1:
            raise SpecError("--evaluator", "at most 1 evaluator; use --evaluator 0 or 1")
        if self.count("Chief") == 0 and self.count("Worker") == 0:
            raise SpecError("--workers", "a job needs a chief or at least one worker; use --workers N or --chief 1")
        if self.count("PS") and not self.count("Chief"):
            raise SpecError("--chief", "parameter-server training needs a chief as coordinator; use --chief 1")
        if self.count("PS") and not self.count("Worker"):
            raise SpecError("--workers", "parameter-server training needs at least one worker to run the steps; "
                            "use --workers N (N >= 1), or --ps 0 for a single chief")
        if self.accelerator and not any(s.gpus for s in self.replicas.values()):
            raise SpecError("--accelerator", "no replica has GPUs; set GPUs too, e.g. --gpus-per-worker 1")
        for role, spec in self.replicas.items():  # a value for a replica type the job does not have: dropped
            for flag, value in (("--cpu", spec.cpu), ("--memory", spec.memory)):
                if value and not spec.count:
                    raise absent_role(f"{flag} {role.lower()}=", role)
        for role in self.role_node_selectors:
            if not self.count(role):
                raise absent_role(f"--node-selector {role.lower()}:", role)

    # ---- derived views (used by render, helm values and the local backend) -------
    def count(self, role: str) -> int:
        spec = self.replicas.get(role)
        return spec.count if spec else 0

    def active_roles(self) -> list[str]:
        return [role for role, spec in self.replicas.items() if spec.count > 0]

    def replica_node_selector(self, role: str) -> dict[str, str]:
        """Every replica's selector, then this role's own, then the accelerator for GPU roles."""
        selector = {**self.node_selector, **self.role_node_selectors.get(role, {})}
        if self.accelerator and self.replicas[role].gpus:
            selector[ACCELERATOR_LABEL] = self.accelerator
        return selector

    def replica_tolerations(self, role: str) -> list[dict[str, str]]:
        if not self.replicas[role].gpus:
            return []
        return [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}]

    def replica_resources(self, role: str) -> dict[str, dict[str, str]]:
        spec = self.replicas[role]
        requests = {k: v for k, v in (("cpu", spec.cpu), ("memory", spec.memory)) if v is not None}
        resources: dict[str, dict[str, str]] = {}
        if requests:
            resources["requests"] = requests
        if spec.gpus:
            resources["limits"] = {GPU_RESOURCE: str(spec.gpus)}
        return resources

    def pod_volumes(self) -> list[dict]:
        """The pod's `volumes`: one persistentVolumeClaim volume per --volume, named pvc-N."""
        return [{"name": f"pvc-{i}", "persistentVolumeClaim": {"claimName": v.claim}}
                for i, v in enumerate(self.volumes)]

    def volume_mounts(self) -> list[dict]:
        """The tensorflow container's `volumeMounts` for `pod_volumes()`."""
        return [{"name": f"pvc-{i}", "mountPath": v.mount_path, "readOnly": v.read_only}
                for i, v in enumerate(self.volumes)]

    def container_args(self) -> list[str]:
        args = ["--job-dir", self.job_dir] if self.job_dir else []
        return args + list(self.trainer_args)

    def standard_labels(self) -> dict[str, str]:
        return {
            "app.kubernetes.io/name": "tfjob",
            "app.kubernetes.io/instance": self.name,
            "app.kubernetes.io/component": "training",
            "app.kubernetes.io/managed-by": "tfjob-launcher",
        }

    def all_labels(self) -> dict[str, str]:
        return {**self.labels, **self.standard_labels()}

    def job_labels(self) -> dict[str, str]:
        """The TFJob's own labels: the pods' plus Kueue's queue label (Kueue reads it on the job)."""
        queue = {QUEUE_LABEL: self.queue_name} if self.queue_name else {}
        return {**self.all_labels(), **queue}

    def scheduling_policy(self) -> dict | None:
        """runPolicy.schedulingPolicy for gang scheduling: all replicas (or --gang-min-available of them)
        start together or none."""
        if not self.gang:
            return None
        policy: dict = {"minAvailable": self.gang_min_available or self.total_replicas()}
        if self.gang_queue:
            policy["queue"] = self.gang_queue
        if self.priority_class:
            policy["priorityClass"] = self.priority_class
        if self.gang_timeout_seconds:
            policy["scheduleTimeoutSeconds"] = self.gang_timeout_seconds
        return policy

    def total_replicas(self) -> int:
        return sum(spec.count for spec in self.replicas.values())

    def pod_annotations(self) -> dict[str, str]:
        """Istio's sidecar would outlive the trainer and keep a finished TFJob Running: opt out."""
        return {} if self.istio_sidecar else {ISTIO_INJECT: "false"}


def replica_name(job_name: str, role: str, index: int) -> str:
    """Pod and headless-service name the operator gives a replica (GenGeneralName)."""
    return f"{job_name}-{role.lower()}-{index}".replace("/", "-")


TRAINER_HELP = "see `python -m trainer.task --help`"


def runs_this_trainer(spec: JobSpec, kind: str) -> bool:
    """The replicas run this package's `python -m trainer.task`: the local backend does
    whatever the image; on a cluster, the default image's ENTRYPOINT is it. Another image
    may run a program of its own, whose flags the launcher cannot know."""
    if spec.command or spec.package_path or spec.module_name not in (None, TRAINER_MODULE):
        return False
    return kind == "local" or spec.image == DEFAULT_IMAGE


def check_trainer_args(spec: JobSpec, kind: str, field_name: str = "trainer arguments (after --)",
                       prefix: str = "") -> None:
    """The trainer arguments that the trainer would refuse at its start (exit 2) stop the
    launcher before anything is applied: every replica would fail on them, and under the
    OnFailure policy restart on them without end. `field_name` and `prefix`: where they
    came from (a config file's `args`)."""
    if not runs_this_trainer(spec, kind):
        return
    from trainer.flags import FlagError, check

    try:
        check(spec.container_args())
    except FlagError as err:  # on one line: the arguments it quotes may hold newlines
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(err))
        raise SpecError(field_name, f"{prefix}{text}; {TRAINER_HELP}") from None


# The least memory one trainer replica takes (TensorFlow's runtime; a ps of the MNIST model
# measured 0.22 GB proportional set size, its workers 0.35 GB and its chief 0.5 GB).
LOCAL_REPLICA_BYTES = 200 * 2**20


def available_memory() -> int | None:
    """Bytes this machine can give new processes: /proc/meminfo's MemAvailable, within
    what the cgroup (v2) of this process may still use; None where neither is readable."""
    try:
        with open("/proc/meminfo") as meminfo:
            fields = dict(line.split(":", 1) for line in meminfo if ":" in line)
        available = int(fields["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return None
    try:
        with open("/proc/self/cgroup") as cgroup:
            path = next(line[3:].strip() for line in cgroup if line.startswith("0::"))
        with open(f"/sys/fs/cgroup{path}/memory.max") as limit, open(f"/sys/fs/cgroup{path}/memory.current") as used:
            ceiling = limit.read().strip()
            if ceiling != "max":
                available = min(available, max(0, int(ceiling) - int(used.read())))
    except (OSError, StopIteration, ValueError):
        pass
    return available


def _gigabytes(count: int) -> str:
    return f"{count / 2**30:,.1f} GB"


def check_local_capacity(spec: JobSpec, kind: str, available: int | None = None) -> None:
    """On the local backend every replica is a process on this machine: a job whose
    replicas need more memory than the machine has would stall it swapping (or start
    thousands of TensorFlow processes) instead of training, so it stops here, naming the
    flag of the largest replica count. `available`: bytes (default: available_memory())."""
    if kind != "local" or not runs_this_trainer(spec, kind):
        return
    available = available_memory() if available is None else available
    total = spec.total_replicas()
    if available is None or total * LOCAL_REPLICA_BYTES <= available:
        return
    role = max(spec.replicas, key=lambda r: spec.replicas[r].count)
    raise SpecError(replica_count_flag(role), f"the local backend runs each of the job's {total:,} replicas as a "
                    f"process on this machine, and they need at least {_gigabytes(total * LOCAL_REPLICA_BYTES)} of "
                    f"memory ({LOCAL_REPLICA_BYTES // 2**20} MB each); {_gigabytes(available)} is available; use at "
                    f"most {available // LOCAL_REPLICA_BYTES:,} replicas here, or a cluster (--backend k8s)")


def check_local_inputs(spec: JobSpec, kind: str, environ: Mapping[str, str]) -> None:
    """On the local backend, what every replica would fail on at its start and, under
    OnFailure, restart on without end, checked on this machine first (without TensorFlow):
    more replicas than this machine's memory holds (check_local_capacity), a --job-dir the
    trainer cannot write, a --module-name that this Python cannot find (no --package-path),
    and a local data dir without the model's train-* records (unless --prepare-data writes
    them)."""
    import importlib.util
    import os

    if kind != "local":
        return
    check_local_capacity(spec, kind)
    if spec.job_dir and "://" not in spec.job_dir and runs_this_trainer(spec, kind):
        from trainer.outputs import unwritable_dir

        if problem := unwritable_dir(spec.job_dir):  # the chief would fail on it, and restart, without end
            raise SpecError("--job-dir", f"the chief could not write {spec.job_dir!r} and would restart on it: {problem}")
    if spec.module_name and not spec.package_path and not spec.command:
        top = spec.module_name.split(".")[0]
        if importlib.util.find_spec(top) is None:
            raise SpecError("--module-name", f"no module {top!r} on this machine: every replica would fail "
                            f"`python -m {spec.module_name}` and restart; give its package with --package-path DIR, "
                            "or install it")
    found = data_dir_read(spec, kind, {**environ, **spec.env})
    if found is None:
        return
    where, data_dir, dataset = found
    if not os.path.isdir(data_dir) or not any(name.startswith("train-") for name in os.listdir(data_dir)):
        state = "does not exist" if not os.path.isdir(data_dir) else "has no train-* records"
        raise SpecError("trainer arguments (after --)", f"{where} {data_dir!r} {state} on this machine: every replica "
                        f"would exit 2 on it and restart; write the data with `python -m trainer.data --dataset "
                        f"{dataset} --out {data_dir}`, or add --prepare-data")


def data_dir_read(spec: JobSpec, kind: str, env: Mapping[str, str]) -> tuple[str, str, str] | None:
    """(how it was given, the dir, its `trainer.data --dataset`) of the data dir whose records
    the image's trainer reads, `env` giving its variable's value; None when the job writes
    them (--prepare-data), reads file patterns, runs a program of its own, or reads a URL."""
    if not runs_this_trainer(spec, kind):
        return None
    from trainer.flags import parser
    from trainer.models import DATA_DIRS, DATASETS

    args = parser().parse_args(list(spec.container_args()))  # check_trainer_args has passed them
    if args.prepare_data or args.train_data_paths:
        return None
    variable, default = DATA_DIRS[DATASETS[args.model]]
    given = any(arg.split("=", 1)[0] in ("--data-dir", "--data_dir") for arg in spec.trainer_args)
    data_dir = args.data_dir if given else env.get(variable, default)
    if "://" in data_dir:
        return None
    return ("--data-dir" if given else f"the default data dir (${variable} or {default})"), data_dir, \
        DATASETS[args.model]


def cluster_data_note(spec: JobSpec, kind: str, flag: str = "--volume") -> str | None:
    """On a cluster, the note on a data dir that the pods of the default image cannot have:
    in the image's own filesystem (the image holds no records) rather than on a volume
    (`flag`: the caller's name of volumes). Every replica would exit 2 on it. A note, not a
    refusal: an image built from this one may hold the records at that path."""
    import posixpath

    if kind != "k8s" or (found := data_dir_read(spec, kind, spec.env)) is None:
        return None
    where, data_dir, dataset = found
    if on_volume(plain_path(posixpath.join(IMAGE_WORKDIR, data_dir)), spec.volumes):
        return None
    return (f"note: {where} {data_dir!r} is inside each pod, and the image {spec.image} holds no records there: "
            f"its replicas would exit 2 on it; give the trainer's arguments --prepare-data (each replica writes "
            f"{dataset}'s records at its start) or --data-dir gs://BUCKET/PATH of records `python -m trainer.data` "
            f"wrote, or give a {flag} that holds them")

