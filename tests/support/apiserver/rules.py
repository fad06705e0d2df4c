"""What the FAKE API server (tests/support/apiserver/) answers, as the real one does:
Status errors, label/field selectors, the TFJob checks and defaults a CRD object gets on
create, and the kubelet's choice of which container instance a log request reads."""
from __future__ import annotations

import copy
import json
import re
import time
from datetime import datetime, timezone
from functools import lru_cache

import jsonschema
import yaml

from tests.support.tools import TFJOB_CRD_FILE

TFJOB_API = "kubeflow.org/v1"
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def now() -> str:
    """RFC 3339 UTC, seconds precision: how metav1.Time is written."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_nano(ns: int) -> str:
    """A log line's time as the kubelet writes it with timestamps=true: Go's RFC3339Nano
    in UTC, whose fraction drops its trailing zeros (and its dot when it is zero)."""
    seconds, fraction = divmod(ns, 1_000_000_000)
    digits = f"{fraction:09d}".rstrip("0")
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + \
        (f".{digits}" if digits else "") + "Z"


def log_since(query: dict) -> int:
    """The time (ns since the epoch) from which the kubelet serves a log's lines, those at or
    after it (k8s.io/cri-client pkg/logs NewLogOptions and the `msg.timestamp.Before(since)`
    skip): sinceSeconds before now, or sinceTime (metav1.Time: RFC 3339, whole seconds)
    when later; 0 without either."""
    since = 0
    if "sinceSeconds" in query:
        since = time.time_ns() - int(query["sinceSeconds"]) * 1_000_000_000
    if "sinceTime" in query:
        at = int(datetime.strptime(query["sinceTime"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp())
        since = max(since, at * 1_000_000_000)
    return since


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: dict | None = None):
        super().__init__(message)
        self.status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                       "message": message, "reason": reason, "code": code}
        if details:
            self.status["details"] = details


def verb_of(method: str, kind: str, query: dict) -> str:
    if kind == "log":
        return "log"
    if kind == "collection":
        if method == "POST":
            return "create"
        return "watch" if query.get("watch") in ("true", "1") else "list"
    return {"GET": "get", "DELETE": "delete"}.get(method, method.lower())


def group_resource(resource: str) -> str:
    return "tfjobs.kubeflow.org" if resource == "tfjobs" else resource


def details(resource: str, name: str) -> dict:
    details = {"name": name, "kind": resource}
    if resource == "tfjobs":
        details["group"] = "kubeflow.org"
    return details


def not_found(resource: str, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{group_resource(resource)} "{name}" not found', details(resource, name))


_FIELDS = {"metadata.name", "metadata.namespace"}
_EVENT_FIELDS = {"involvedObject.kind", "involvedObject.name", "involvedObject.uid", "reason", "type"}


def selector(namespace: str | None, query: dict, resource: str = ""):
    """Predicate for namespace + labelSelector (k=v, k==v, k!=v) + fieldSelector (metadata
    name/namespace; for events also involvedObject.kind/name/uid, reason, type)."""
    labels = _terms(query.get("labelSelector", ""), "labelSelector")
    fields = _terms(query.get("fieldSelector", ""), "fieldSelector")
    known = _FIELDS | (_EVENT_FIELDS if resource == "events" else set())
    for key, _, _ in fields:
        if key not in known:
            raise ApiError(400, "BadRequest", f'"{key}" is not a known field selector: only '
                                              + ", ".join(f'"{k}"' for k in sorted(known)))

    def field(obj: dict, key: str) -> str:
        value = obj
        for part in key.split("."):
            value = (value or {}).get(part) if isinstance(value, dict) else None
        return "" if value is None else str(value)

    def match(obj: dict) -> bool:
        meta = obj["metadata"]
        if namespace is not None and meta["namespace"] != namespace:
            return False
        have = meta.get("labels") or {}
        return (all((have.get(k) == v) == (op == "=") for k, op, v in labels)
                and all((field(obj, k) == v) == (op == "=") for k, op, v in fields))

    return match


def _terms(selector: str, what: str) -> list[tuple[str, str, str]]:
    terms = []
    for term in filter(None, (t.strip() for t in selector.split(","))):
        m = re.match(r"^([^!=\s]+)\s*(==|=|!=)\s*([^!=\s]*)$", term)
        if not m:
            raise ApiError(400, "BadRequest", f"unable to parse requirement in {what} (this fake supports "
                                              f"only =, ==, !=): {term}")
        terms.append((m[1], "!=" if m[2] == "!=" else "=", m[3]))
    return terms


# ---- TFJob validation (what the apiserver checks for a CRD object) -----------------------------
@lru_cache(maxsize=1)
def _tfjob_schema() -> jsonschema.protocols.Validator:
    """The CRD's schema as the apiserver applies it: unknown fields are pruned, not refused."""
    crd = yaml.safe_load(TFJOB_CRD_FILE.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == TFJOB_API.split("/")[1]]
    return jsonschema.Draft7Validator(version["schema"]["openAPIV3Schema"])


def apply_defaults(obj, schema: dict | None = None) -> None:
    """Fill in the `default` of each absent property, as the apiserver does for a CRD with a
    structural schema (apiextensions-apiserver pkg/apiserver/schema/defaulting)."""
    schema = _tfjob_schema().schema if schema is None else schema
    if isinstance(obj, dict):
        for key, sub in (schema.get("properties") or {}).items():
            if key not in obj and "default" in sub:
                obj[key] = copy.deepcopy(sub["default"])
            if key in obj:
                apply_defaults(obj[key], sub)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key in set(obj) - set(schema.get("properties") or {}):
                apply_defaults(obj[key], extra)
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for item in obj:
            apply_defaults(item, schema["items"])


def check_tfjob(obj: dict) -> None:
    name = obj["metadata"].get("name", "")
    if obj.get("apiVersion") != TFJOB_API or obj.get("kind") != "TFJob":
        raise ApiError(400, "BadRequest", f"the object is a {obj.get('apiVersion')}/{obj.get('kind')}, "
                                          f"not a {TFJOB_API}/TFJob")
    causes = []
    if not name or len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        causes.append({"reason": "FieldValueInvalid", "field": "metadata.name",
                       "message": f"Invalid value: {json.dumps(name)}: a lowercase RFC 1123 subdomain must consist "
                                  "of lower case alphanumeric characters, '-' or '.', and must start and end with an "
                                  "alphanumeric character"})
    for error in sorted(_tfjob_schema().iter_errors(obj), key=lambda e: list(map(str, e.absolute_path))):
        causes.append(_cause(error))
    if causes:
        listed = ", ".join(f"{c['field']}: {c['message']}" for c in causes)
        raise ApiError(422, "Invalid", f'TFJob.kubeflow.org "{name}" is invalid: '
                                       + (f"[{listed}]" if len(causes) > 1 else listed),
                       {"name": name, "group": "kubeflow.org", "kind": "TFJob", "causes": causes})


def _cause(error: jsonschema.ValidationError) -> dict:
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path).lstrip(".")
    value = json.dumps(error.instance)
    if error.validator == "required":
        missing = error.message.split("'")[1]
        return {"reason": "FieldValueRequired", "field": f"{path}.{missing}".lstrip("."), "message": "Required value"}
    if error.validator == "enum":
        allowed = ", ".join(json.dumps(v) for v in error.validator_value)
        return {"reason": "FieldValueNotSupported", "field": path,
                "message": f"Unsupported value: {value}: supported values: {allowed}"}
    if error.validator == "type":
        return {"reason": "FieldValueTypeInvalid", "field": path,
                "message": f"Invalid value: {value}: {path} in body must be of type {error.validator_value}: "
                           f"\"{type(error.instance).__name__}\""}
    return {"reason": "FieldValueInvalid", "field": path, "message": f"Invalid value: {value}: {error.message}"}


# ---- the kubelet's log rules ----------------------------------------------------------------
def log_container(pod: dict, container: str | None) -> str:
    names = [c["name"] for c in pod["spec"]["containers"]]
    if container is None and len(names) == 1:
        return names[0]
    if container not in names:
        raise ApiError(400, "BadRequest", f"a container name must be specified for pod {pod['metadata']['name']}, "
                                          f"choose one of: [{' '.join(names)}]" if container is None else
                       f"container {container} is not valid for pod {pod['metadata']['name']}")
    return container


def kubelet_log_source(pod: dict, container: str, previous: bool = False) -> str:
    """The container ID `GET .../log` reads (kubelet validateContainerLogStatus), the last
    state's when `previous`."""
    pod_name = pod["metadata"]["name"]
    status = next((s for s in (pod.get("status") or {}).get("containerStatuses") or []
                   if s["name"] == container), None)
    if status is None:
        raise ApiError(400, "BadRequest", f'container "{container}" in pod "{pod_name}" is waiting to start: '
                                          "ContainerCreating")
    state, last = status.get("state") or {}, (status.get("lastState") or {}).get("terminated") or {}
    if previous:
        if not last.get("containerID"):
            raise ApiError(400, "BadRequest", f'previous terminated container "{container}" in pod "{pod_name}" '
                                              "not found")
        return last["containerID"]
    if state.get("running"):
        return status["containerID"]
    if state.get("terminated"):
        return state["terminated"].get("containerID") or last.get("containerID") or status["containerID"]
    if last.get("containerID"):
        return last["containerID"]
    reason = (state.get("waiting") or {}).get("reason", "ContainerCreating")
    raise ApiError(400, "BadRequest", f'container "{container}" in pod "{pod_name}" is waiting to start: {reason}')
