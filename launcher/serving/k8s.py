"""Serving on Kubernetes: a KServe v1beta1 InferenceService.

    render(...)          the InferenceService through launcher/templates/inferenceservice.yaml.j2
    validate(isvc)       against KServe v0.20's CRD (package data, or $KSERVE_CRD), made
                         as strict as `kubectl apply`: unknown fields are errors
    KServeApi            create (also as a server-side dry run), get, list, delete, and
                         wait until Ready (status.url), on the raw JSON objects

The default predictor is KServe's TensorFlow Serving runtime (`modelFormat: tensorflow`)
at `runtimeVersion`; `--runtime-image` runs the project's own model server instead.
"""
from __future__ import annotations

import time
from functools import lru_cache

from ..backends.base import AlreadyExists, BackendError, NotFound
from ..spec import RUN_AS_USER, SpecError

GROUP, VERSION, PLURAL = "serving.kserve.io", "v1beta1", "inferenceservices"
SCHEMA = "inferenceservice"
# Newest TensorFlow Serving release as of this writing; KServe v0.20's own default (2.6.2)
# predates TF 2.21 SavedModels. Override with --runtime-version.
DEFAULT_RUNTIME_VERSION = "2.19.1"
SERVER_PORT = 8080
STORAGE_SCHEMES = ("gs://", "s3://", "pvc://", "https://")
POLL_SECONDS = 2.0


def check_storage_uri(uri: str) -> None:
    if not uri.startswith(STORAGE_SCHEMES) or "\n" in uri or len(uri) <= len("gs://"):
        raise SpecError("--model-dir", f"{uri!r} cannot be read by KServe; on Kubernetes pass the export "
                        "base as gs://BUCKET/JOB_DIR/export (or s3://, pvc://)")


def render(name: str, namespace: str, storage_uri: str, runtime_version: str = DEFAULT_RUNTIME_VERSION,
           runtime_image: str | None = None, service_account: str | None = None) -> dict:
    import yaml

    check_storage_uri(storage_uri)
    template = _template()
    text = template.render(
        name=name, namespace=namespace, storage_uri=storage_uri, runtime_version=runtime_version,
        runtime_image=runtime_image, service_account=service_account, port=SERVER_PORT,
        labels={"app.kubernetes.io/name": "inferenceservice", "app.kubernetes.io/instance": name,
                "app.kubernetes.io/component": "serving", "app.kubernetes.io/managed-by": "tfjob-launcher"},
        command=["python", "-m", "trainer.serve"],
        args=["--model-dir", "/mnt/models", "--name", name, "--host", "0.0.0.0", "--port", str(SERVER_PORT)],
        pod_security_context={"runAsNonRoot": True, "runAsUser": RUN_AS_USER, "runAsGroup": RUN_AS_USER,
                              "fsGroup": RUN_AS_USER, "seccompProfile": {"type": "RuntimeDefault"}},
        container_security_context={"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}})
    return yaml.safe_load(text)


@lru_cache(maxsize=1)
def _template():
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("launcher", "templates"),
                             undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True)
    return env.get_template("inferenceservice.yaml.j2")


@lru_cache(maxsize=2)
def _validator(path: str):
    from pathlib import Path

    from ..validate import _make_validator, crd_schema, strict

    return _make_validator(strict(crd_schema(Path(path), SCHEMA)))


def validate(isvc: dict) -> None:
    """SchemaError naming the field when `isvc` breaks the InferenceService CRD schema."""
    import jsonschema

    from ..validate import SchemaError, _fix, crd_path, field_path

    error = jsonschema.exceptions.best_match(_validator(str(crd_path(SCHEMA))).iter_errors(isvc))
    if error is not None:
        raise SchemaError(field_path(error.absolute_path), _fix(error))


def ready_url(isvc: dict) -> str | None:
    """status.url once the Ready condition is True."""
    status = isvc.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    return status.get("url") if ready else None


def summary(isvc: dict) -> tuple[str, str, str, str, str]:
    """(name, namespace, url, ready, created) of one InferenceService."""
    meta, status = isvc.get("metadata", {}), isvc.get("status") or {}
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    return (meta.get("name", ""), meta.get("namespace", ""), status.get("url", "") or "",
            {"True": "Ready", "False": "NotReady"}.get(conditions.get("Ready", ""), "Unknown"),
            meta.get("creationTimestamp", ""))


class KServeApi:
    def __init__(self, kubeconfig: str | None = None, context: str | None = None,
                 request_timeout: float | None = None):
        from kubernetes import client

        from ..backends.k8s.client import CALL_TIMEOUT, CountingApiClient, RequestCounter, load_configuration

        self.client = CountingApiClient(load_configuration(kubeconfig, context), RequestCounter())
        self.custom = client.CustomObjectsApi(self.client)
        self.host = self.client.configuration.host
        read = request_timeout or CALL_TIMEOUT
        self.timeout = (min(10, read), read)  # (connect, read) seconds of every call

    def _call(self, action: str, call, not_found: str | None = None, exists: str | None = None):
        from kubernetes.client.exceptions import ApiException

        from ..backends.k8s.client import TRANSPORT_ERRORS, is_missing_api, server_message, unreachable

        try:
            return call()
        except ApiException as exc:
            if is_missing_api(exc):
                raise BackendError(f"{action}: the server has no {PLURAL}.{GROUP}/{VERSION} API; install KServe "
                                   "(it brings the InferenceService CRD), or use --backend local") from None
            if exc.status == 404 and not_found:
                raise NotFound(not_found) from None
            if exc.status == 409 and exists:
                raise AlreadyExists(exists) from None
            raise BackendError(f"{action}: {server_message(exc)}") from None
        except TRANSPORT_ERRORS as exc:
            raise unreachable(self.host, exc) from None

    def create(self, isvc: dict, dry_run: bool = False) -> dict:
        meta = isvc["metadata"]
        return self._call(
            f"creating inferenceservice {meta['name']}",
            lambda: self.custom.create_namespaced_custom_object(
                GROUP, VERSION, meta["namespace"], PLURAL, isvc, dry_run="All" if dry_run else None,
                _request_timeout=self.timeout),
            exists=f"inferenceservice {meta['name']} already exists in namespace {meta['namespace']}; "
                   f"`python -m launcher models delete {meta['name']} --backend k8s` first")

    def get(self, name: str, namespace: str) -> dict:
        return self._call(f"reading inferenceservice {name}", lambda: self.custom.get_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name, _request_timeout=self.timeout),
            not_found=f"no inferenceservice {name} in namespace {namespace}")

    def list(self, namespace: str | None) -> list[dict]:
        if namespace is None:
            answer = self._call("listing inferenceservices", lambda: self.custom.list_custom_object_for_all_namespaces(
                GROUP, VERSION, PLURAL, _request_timeout=self.timeout))
        else:
            answer = self._call("listing inferenceservices", lambda: self.custom.list_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, _request_timeout=self.timeout))
        return list(answer.get("items", []))

    def delete(self, name: str, namespace: str) -> None:
        self._call(f"deleting inferenceservice {name}", lambda: self.custom.delete_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name, _request_timeout=self.timeout),
            not_found=f"no inferenceservice {name} in namespace {namespace}")

    def wait_ready(self, name: str, namespace: str, timeout: float) -> str:
        """status.url once Ready (BackendError with the last condition after `timeout`)."""
        deadline = time.monotonic() + timeout
        while True:
            isvc = self.get(name, namespace)
            url = ready_url(isvc)
            if url:
                return url
            if time.monotonic() > deadline:
                conditions = (isvc.get("status") or {}).get("conditions") or []
                last = "; ".join(f"{c.get('type')}={c.get('status')} {c.get('reason', '')} {c.get('message', '')}".strip()
                                 for c in conditions) or "no status yet (is the KServe controller running?)"
                raise BackendError(f"inferenceservice {name} not Ready after {timeout:g} s: {last}")
            time.sleep(POLL_SECONDS)

    def close(self) -> None:
        self.client.close()
