"""Validate a rendered TFJob before any API call, as the apiserver and the operator would.

1. The TFJob CRD's `openAPIV3Schema` (training-operator v1.9) with jsonschema, made as
   strict as `kubectl apply` (field validation Strict): unknown fields are errors, and
   int32/int64 formats are range-checked. The apiserver's ObjectMeta rules (name,
   namespace, labels) are added, since the CRD leaves `metadata` open.
2. The operator's admission webhook rules (pkg/webhooks/tensorflow): a DNS-1035 name,
   every replica has containers with an image, one of them named `tensorflow`, at most
   one Chief or Master, non-negative runPolicy numbers.

Errors are `SchemaError` (a `SpecError`): the field is the manifest path, e.g.
`spec.tfReplicaSpecs.Worker.template.spec.containers[0].resources.requests.cpu`, and the
message says the fix.

The CRD comes from `launcher.schemas` (see there): $TFJOB_CRD when set, else the copy
packaged with the launcher (training-operator's own file, taken by scripts/crds/update.py
from the pinned Go module). `validate(tfjob, crd=...)` also takes a CRD object as read
from a cluster, which is how the k8s backend validates against the CRD it has installed.
"""
from __future__ import annotations

import copy
import hashlib
import json
import os
import re
from functools import lru_cache
from pathlib import Path

from . import schemas
from .spec import _DNS1035, _DNS_SUBDOMAIN, _DNS1123_LABEL, _LABEL_VALUE, SpecError

SCHEMA = "tfjob"
CRD_ENV = schemas.get(SCHEMA).env
CONTAINER = "tensorflow"
REPLICA_TYPES = ("Chief", "Master", "PS", "Worker", "Evaluator")
CACHE_VERSION = 1  # bump when strict() changes
INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
_QUANTITY_HINT = "use a Kubernetes quantity such as 500m, 2, 4Gi"
# The apiserver's ObjectMeta checks for the fields the launcher sets.
OBJECT_META = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "maxLength": 253, "pattern": _DNS_SUBDOMAIN.pattern},
        "namespace": {"type": "string", "maxLength": 63, "pattern": _DNS1123_LABEL.pattern},
        "labels": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 63,
                                                             "pattern": _LABEL_VALUE.pattern}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}


class SchemaError(SpecError):
    """The rendered TFJob breaks the CRD schema or an operator rule; `field` is its path."""


class CRDNotFound(SpecError):
    pass


def crd_path(name: str = SCHEMA) -> Path:
    """The CRD file to validate with: $TFJOB_CRD (must exist when set) or the packaged copy."""
    configured = schemas.configured_path(name)
    if configured:
        path = Path(configured).expanduser()
        if not path.is_file():
            env, file = schemas.get(name).env, schemas.get(name).file
            raise CRDNotFound(env, f"{configured!r} is not a file; point it at {file} or unset it")
        return path
    return schemas.packaged_path(name)


def _load_yaml(path: Path):
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with path.open("rb") as handle:
        return yaml.load(handle, Loader=loader)


def crd_schema(path: Path, name: str = SCHEMA) -> dict:
    """The openAPIV3Schema of the CRD file at `path`."""
    return version_schema(_load_yaml(path), str(path), name)


def version_schema(crd: dict, where: str, name: str = SCHEMA) -> dict:
    """The served version's openAPIV3Schema of a CRD object (from a file or a cluster)."""
    info = schemas.get(name)
    try:
        version = next(v for v in crd["spec"]["versions"] if v["name"] == info.version)
        return version["schema"]["openAPIV3Schema"]
    except (KeyError, TypeError, StopIteration) as exc:
        raise CRDNotFound(info.env, f"{where!r} is not the {info.kind} CRD (no {info.version} openAPIV3Schema); "
                          f"use {info.file} from {schemas.describe(name)}") from exc


def _subschemas(node: dict):
    """The schemas nested in one schema node (not its property-name mappings)."""
    yield from node.get("properties", {}).values()
    for key in ("additionalProperties", "items", "not"):
        if isinstance(node.get(key), dict):
            yield node[key]
    for key in ("anyOf", "allOf", "oneOf"):
        yield from node.get(key, [])


def strict(schema: dict) -> dict:
    """Close every object that lists its properties (no x-kubernetes-preserve-unknown-fields)."""
    schema = copy.deepcopy(schema)
    pending = [schema]
    while pending:
        node = pending.pop()
        if ("properties" in node and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")):
            node["additionalProperties"] = False
        pending.extend(_subschemas(node))
    schema["properties"]["metadata"] = OBJECT_META
    return schema


@lru_cache(maxsize=None)
def _go_regex(pattern: str) -> re.Pattern:
    """Kubernetes evaluates patterns with Go's RE2, where a final `$` is the end of the
    text; in Python it also matches before a trailing newline, so use `\\Z` instead."""
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + "\\Z"
    return re.compile(pattern)


def _pattern(validator, pattern, instance, schema):
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "string") and not _go_regex(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _cache_file(path: Path) -> Path:
    stat = path.stat()
    key = hashlib.sha256(f"{path.resolve()}|{stat.st_mtime_ns}|{stat.st_size}|{CACHE_VERSION}".encode())
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "tfjob-launcher" / f"tfjob-schema-{key.hexdigest()[:20]}.json"


def strict_schema(path: Path) -> dict:
    """strict(crd_schema(path)), cached as JSON per CRD file version (JSON loads ~30x
    faster than the 600 kB YAML, which keeps `render` quick). The cache is optional."""
    cache = _cache_file(path)
    try:
        return json.loads(cache.read_text())
    except (OSError, ValueError):
        pass
    schema = strict(crd_schema(path))
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(schema))
        os.replace(tmp, cache)
    except OSError:
        pass
    return schema


@lru_cache(maxsize=4)
def _validator(path_key: str, mtime: float):
    return _make_validator(strict_schema(Path(path_key)))


@lru_cache(maxsize=2)
def _cluster_validator(text: str):
    """A validator for a CRD object read from a cluster (JSON text, cached per content)."""
    return _make_validator(strict(version_schema(json.loads(text), "the cluster's CRD")))


def _make_validator(schema: dict):
    import jsonschema

    checker = jsonschema.FormatChecker(formats=())
    for name, (low, high) in INT_RANGES.items():
        checker.checks(name)(lambda value, low=low, high=high:
                             not isinstance(value, int) or low <= value <= high)
    kube = jsonschema.validators.extend(jsonschema.Draft7Validator, {"pattern": _pattern})
    return kube(schema, format_checker=checker)


def field_path(parts) -> str:
    """["spec", "tfReplicaSpecs", "Worker", ..., 0, "image"] -> spec.tfReplicaSpecs.Worker...[0].image"""
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(part)):
            text += f".{part}" if text else str(part)
        else:
            text += f"[{json.dumps(str(part))}]"
    return text or "(root)"


def _fix(error) -> str:
    """One line: the problem and the fix, for the most common schema violations."""
    kind, value = error.validator, error.instance
    if kind == "additionalProperties":
        extra = sorted(set(value) - set(error.schema.get("properties", {})))
        return f"unknown field(s) {', '.join(map(repr, extra))}; remove them or fix the spelling"
    if kind == "required":
        return f"{error.message}; add it"
    if kind == "type":
        wanted = error.validator_value
        return f"{value!r} is not of type {wanted}; use {'an' if str(wanted)[0] in 'aeiou' else 'a'} {wanted}"
    if kind == "pattern":
        hint = _QUANTITY_HINT if "KMGTPE" in error.validator_value else f"match {error.validator_value}"
        return f"{value!r} is not valid; {hint}"
    if kind == "format":
        return f"{value} is out of the {error.validator_value} range; use a smaller number"
    if kind == "anyOf":
        return f"{value!r} is neither an integer nor a string; {_QUANTITY_HINT}"
    if kind == "maxLength":
        return f"is longer than {error.validator_value} characters; shorten it"
    if kind == "enum":
        return f"{value!r}; use one of {', '.join(map(str, error.validator_value))}"
    return f"{error.message}; fix this field"


def _schema_errors(tfjob: dict, crd: Path | dict) -> None:
    import jsonschema

    if isinstance(crd, dict):
        validator = _cluster_validator(json.dumps(crd, sort_keys=True))
    else:
        validator = _validator(str(crd), crd.stat().st_mtime)
    error = jsonschema.exceptions.best_match(validator.iter_errors(tfjob))
    if error is not None:
        raise SchemaError(field_path(error.absolute_path), _fix(error))


def _webhook_rules(tfjob: dict) -> None:
    """training-operator v1.9's TFJob admission webhook (pkg/webhooks/tensorflow/tfjob_webhook.go,
    validateTFJob), same wording where possible, checked against the real webhook by
    tests/e2e/test_webhook.py. Two checks are the launcher's own, not the webhook's: a known
    replica type (the operator would ignore another) and runPolicy numbers >= 0. The webhook's
    runPolicy.managedBy check is left out: the launcher never writes managedBy."""
    name = tfjob.get("metadata", {}).get("name", "")
    if not _DNS1035.fullmatch(name) or len(name) > 63:
        raise SchemaError("metadata.name", f"{name!r} is not a DNS-1035 label; use lowercase letters, digits, '-'")
    specs = tfjob.get("spec", {}).get("tfReplicaSpecs") or {}
    if not specs:
        raise SchemaError("spec.tfReplicaSpecs", "must be required; add at least a Chief or Worker")
    for rtype, replica in specs.items():
        where = f"spec.tfReplicaSpecs.{rtype}"
        if rtype not in REPLICA_TYPES:
            raise SchemaError(where, f"unknown replica type; use one of {', '.join(REPLICA_TYPES)}")
        containers = replica.get("template", {}).get("spec", {}).get("containers") or []
        if not containers:
            raise SchemaError(f"{where}.template.spec.containers", "must be specified; add the tensorflow container")
        for index, container in enumerate(containers):
            if not container.get("image"):
                raise SchemaError(f"{where}.template.spec.containers[{index}].image", "must be required; set --image")
        if not any(c.get("name") == CONTAINER for c in containers):
            raise SchemaError(f"{where}.template.spec.containers",
                              f"must have at least one container with name {CONTAINER}; rename the container")
    if sum(rtype in ("Chief", "Master") for rtype in specs) > 1:
        raise SchemaError("spec.tfReplicaSpecs", "must not have more than 1 Chief or Master role; keep one")
    policy = tfjob.get("spec", {}).get("runPolicy") or {}
    for key in ("ttlSecondsAfterFinished", "activeDeadlineSeconds", "backoffLimit"):
        if isinstance(policy.get(key), int) and policy[key] < 0:
            raise SchemaError(f"spec.runPolicy.{key}", "must be greater than or equal to 0")


def validate(tfjob: dict, crd: Path | dict | None = None) -> bool:
    """Raise SchemaError for the first problem; True when valid. `crd`: a CRD file, a CRD
    object read from a cluster, or None for `crd_path()` ($TFJOB_CRD or the packaged copy).
    The operator's webhook rules are checked either way."""
    _schema_errors(tfjob, crd_path() if crd is None else crd)
    _webhook_rules(tfjob)
    return True
