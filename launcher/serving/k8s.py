"""Serving on Kubernetes: a KServe v1beta1 InferenceService.

    render(...)          the InferenceService through launcher/templates/inferenceservice.yaml.j2
    validate(isvc)       against KServe v0.20's CRD (package data, or $KSERVE_CRD), made
                         as strict as `kubectl apply`: unknown fields are errors
    KServeApi            create (also as a server-side dry run), get, list, delete (its
                         Deployment and pods with it, `wait_gone`), and wait until Ready
                         (status.url), on the raw JSON objects
    ServiceProxy         the predictor's REST API from this machine, through the API
                         server's service proxy (as `kubectl proxy` reaches a Service)

The default predictor is KServe's TensorFlow Serving runtime (`modelFormat: tensorflow`)
at `runtimeVersion`; `--runtime-image` runs the project's own model server instead.

In KServe's Standard (raw Deployment) mode the predictor is a Deployment and a Service
NAME-predictor (port 80 to the container's 8080); status.address.url names that Service
(http://NAME-predictor.NAMESPACE.svc.cluster.local), reachable inside the cluster only,
and status.url the host an ingress would route (none when the cluster's KServe creates no
ingress). `predict` therefore goes through the API server:
/api/v1/namespaces/NAMESPACE/services/NAME-predictor:80/proxy/v1/models/NAME:predict, with
the kubeconfig's credentials (RBAC: `get` and `create` on services/proxy).
"""
from __future__ import annotations

import re
import time
from functools import lru_cache

from ..backends.base import BackendError, NotFound
from ..spec import RUN_AS_USER, SpecError

GROUP, VERSION, PLURAL = "serving.kserve.io", "v1beta1", "inferenceservices"
SCHEMA = "inferenceservice"
# Newest TensorFlow Serving release as of this writing; KServe v0.20's own default (2.6.2)
# predates TF 2.21 SavedModels. Override with --runtime-version.
DEFAULT_RUNTIME_VERSION = "2.19.1"
SERVER_PORT = 8080
STORAGE_SCHEMES = ("gs://", "s3://", "pvc://", "https://")
MOUNT = "/mnt/models"  # where KServe's pod mutator mounts a pvc:// STORAGE_URI (DefaultModelLocalMountPath)
POLL_SECONDS = 2.0
_CLAIM = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")


def check_storage_uri(uri: str, runtime_image: str | None = None) -> None:
    if not uri.startswith(STORAGE_SCHEMES) or "\n" in uri or len(uri) <= len("gs://"):
        raise SpecError("--model-dir", f"{uri!r} cannot be read by KServe; on Kubernetes pass the export "
                        "base as gs://BUCKET/JOB_DIR/export (or s3://, pvc://CLAIM/PATH)")
    if uri.startswith("pvc://") and not _CLAIM.fullmatch(uri[len("pvc://"):].split("/", 1)[0]):
        raise SpecError("--model-dir", f"{uri!r} names no PersistentVolumeClaim; pass pvc://CLAIM/PATH "
                        "(CLAIM a claim in the namespace, PATH the export base on its volume)")
    if runtime_image and not uri.startswith(("gs://", "pvc://")):
        raise SpecError("--model-dir", f"{uri!r} cannot be read by the project's model server (--runtime-image); "
                        "pass gs://BUCKET/JOB_DIR/export (read by TensorFlow) or pvc://CLAIM/PATH (mounted)")


def render(name: str, namespace: str, storage_uri: str, runtime_version: str = DEFAULT_RUNTIME_VERSION,
           runtime_image: str | None = None, service_account: str | None = None) -> dict:
    """The InferenceService. With `runtime_image` the server reads the export itself: a
    gs:// one through TensorFlow (--model-dir gs://...), a pvc:// one at MOUNT, where KServe
    mounts the claim read-only for STORAGE_URI; KServe's storage initializer is never used."""
    import yaml

    check_storage_uri(storage_uri, runtime_image)
    mounted = storage_uri if storage_uri.startswith("pvc://") else None
    from ..render import template  # the TFJob's: its tojson writes YAML-safe JSON

    text = template("inferenceservice.yaml.j2").render(
        name=name, namespace=namespace, storage_uri=storage_uri, runtime_version=runtime_version,
        runtime_image=runtime_image, service_account=service_account, port=SERVER_PORT,
        labels={"app.kubernetes.io/name": "inferenceservice", "app.kubernetes.io/instance": name,
                "app.kubernetes.io/component": "serving", "app.kubernetes.io/managed-by": "tfjob-launcher"},
        command=["python", "-m", "trainer.serve"],
        args=["--model-dir", MOUNT if mounted else storage_uri, "--name", name, "--host", "0.0.0.0",
              "--port", str(SERVER_PORT)],
        mounted_storage_uri=mounted,
        # Ready once the SavedModel is loaded (the server answers only then), not when the process starts
        readiness_probe={"httpGet": {"path": f"/v1/models/{name}", "port": SERVER_PORT},
                         "periodSeconds": 2, "failureThreshold": 3},
        pod_security_context={"runAsNonRoot": True, "runAsUser": RUN_AS_USER, "runAsGroup": RUN_AS_USER,
                              "fsGroup": RUN_AS_USER, "seccompProfile": {"type": "RuntimeDefault"}},
        # the server writes nothing of its own: a read-only root, and /tmp for what a library may want
        container_security_context={"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                                    "readOnlyRootFilesystem": True})
    return yaml.safe_load(text)


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


ISVC_LABEL = "serving.kserve.io/inferenceservice"  # on the predictor's pods
CONTAINER = "kserve-container"
# a container that waits for one of these will not start without a change
STUCK = ("ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName", "CreateContainerConfigError",
         "CreateContainerError")


def _error_line(message: str) -> str:
    """The server's own `error: ...` line of a termination message (its last log lines), else its last line."""
    lines = [line.strip() for line in str(message or "").splitlines() if line.strip()]
    return next((line for line in reversed(lines) if line.startswith("error: ")), lines[-1] if lines else "")


def pod_failure(pods: list[dict]) -> str | None:
    """Why the predictor cannot start, from its pods: the server container exited with an
    error (its termination message: `terminationMessagePolicy: FallbackToLogsOnError`), or
    it waits for something that will not come (an image that cannot be pulled)."""
    for pod in pods:
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            if status.get("name") != CONTAINER:
                continue
            state, last = status.get("state") or {}, status.get("lastState") or {}
            ended = state.get("terminated") or last.get("terminated") or {}
            if ended.get("exitCode"):
                said = _error_line(ended.get("message"))
                return f"{ended.get('reason') or 'Error'} (exit code {ended['exitCode']})" + (f": {said}" if said else "")
            waiting = state.get("waiting") or {}
            if waiting.get("reason") in STUCK:
                return f"{waiting['reason']}: {waiting.get('message') or status.get('image', '')}"
    return None


def load_failure(isvc: dict) -> str | None:
    """Why the predictor failed to load its model, once KServe says so
    (status.modelStatus.transitionStatus BlockedByFailedLoad or InvalidSpec)."""
    model = (isvc.get("status") or {}).get("modelStatus") or {}
    if model.get("transitionStatus") not in ("BlockedByFailedLoad", "InvalidSpec"):
        return None
    info = model.get("lastFailureInfo") or {}
    said = _error_line(info.get("message"))
    code = f" (exit code {info['exitCode']})" if info.get("exitCode") else ""
    return f"{info.get('reason') or model['transitionStatus']}{code}" + (f": {said}" if said else "")


def cluster_address(isvc: dict) -> tuple[str, str, int]:
    """(namespace, service, port) of status.address.url, the Service in front of the
    predictor (http://SERVICE.NAMESPACE.svc[.DOMAIN][:PORT])."""
    from urllib.parse import urlsplit

    name = isvc.get("metadata", {}).get("name", "")
    url = (((isvc.get("status") or {}).get("address") or {}).get("url")) or ""
    parts = urlsplit(url)
    labels = (parts.hostname or "").split(".")
    if len(labels) < 3 or labels[2] != "svc":
        raise BackendError(f"inferenceservice {name} has no cluster address (status.address.url {url!r}); "
                           "pass the model server's URL with --url")
    return labels[1], labels[0], parts.port or (443 if parts.scheme == "https" else 80)


class KServeApi:
    def __init__(self, kubeconfig: str | None = None, context: str | None = None,
                 request_timeout: float | None = None):
        from kubernetes import client

        from ..backends.k8s.client import CALL_TIMEOUT, CountingApiClient, RequestCounter, load_configuration

        self.client = CountingApiClient(load_configuration(kubeconfig, context), RequestCounter())
        self.custom = client.CustomObjectsApi(self.client)
        self.core = client.CoreV1Api(self.client)
        self.host = self.client.configuration.host
        read = request_timeout or CALL_TIMEOUT
        self.timeout = (min(10, read), read)  # (connect, read) seconds of every call

    def _call(self, action: str, call, not_found: str | None = None, exists: str | None = None):
        from ..backends.k8s.client import api_errors

        with api_errors(self.host, action, f"the server has no {PLURAL}.{GROUP}/{VERSION} API; install KServe (it "
                        "brings the InferenceService CRD), or use --backend local", not_found, exists,
                        webhook_owner="KServe's: kubectl get pods -n kserve"):
            return call()

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
        """Foreground: the InferenceService goes once the garbage collector has deleted what
        KServe made for it (the predictor's Deployment, its ReplicaSet and pods, the Service)."""
        self._call(f"deleting inferenceservice {name}", lambda: self.custom.delete_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name, propagation_policy="Foreground", _request_timeout=self.timeout),
            not_found=f"no inferenceservice {name} in namespace {namespace}")

    def wait_gone(self, name: str, namespace: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.get(name, namespace)
            except NotFound:
                return
            if time.monotonic() > deadline:
                raise BackendError(f"inferenceservice {name} in {namespace} still exists after {timeout:g} s "
                                   f"(its pods may be stuck terminating); check `kubectl get pods -n {namespace} "
                                   f"-l {ISVC_LABEL}={name}`")
            time.sleep(POLL_SECONDS)

    def predictor_pods(self, name: str, namespace: str) -> list[dict]:
        """The predictor's pods (KServe labels them with the InferenceService's name)."""
        import json

        answer = self._call(f"listing the pods of inferenceservice {name}", lambda: self.core.list_namespaced_pod(
            namespace, label_selector=f"{ISVC_LABEL}={name}", _preload_content=False, _request_timeout=self.timeout))
        return json.loads(answer.data).get("items") or []

    def wait_ready(self, name: str, namespace: str, timeout: float) -> str:
        """status.url once Ready (BackendError with the last condition after `timeout`)."""
        deadline = time.monotonic() + timeout
        while True:
            isvc = self.get(name, namespace)
            url = ready_url(isvc)
            if url:
                return url
            failed = load_failure(isvc) or pod_failure(self.predictor_pods(name, namespace))
            if failed:
                raise BackendError(f"inferenceservice {name}: its predictor does not start: {failed}; "
                                   f"see `kubectl logs -n {namespace} -l {ISVC_LABEL}={name}`")
            if time.monotonic() > deadline:
                conditions = (isvc.get("status") or {}).get("conditions") or []
                last = "; ".join(f"{c.get('type')}={c.get('status')} {c.get('reason', '')} {c.get('message', '')}".strip()
                                 for c in conditions) or "no status yet (is the KServe controller running?)"
                raise BackendError(f"inferenceservice {name} not Ready after {timeout:g} s: {last}")
            time.sleep(POLL_SECONDS)

    def close(self) -> None:
        self.client.close()


class ServiceProxy:
    """A Service's HTTP API through the API server's service proxy (client.Server)."""

    def __init__(self, api: KServeApi, namespace: str, service: str, port: int, timeout: float | None = None):
        self.api, self.timeout = api, timeout
        self.path = f"/api/v1/namespaces/{namespace}/services/{service}:{port}/proxy"

    def url(self, path: str) -> str:
        return f"{self.api.host}{self.path}{path}"

    def send(self, method: str, path: str, body: dict | None, timeout: float) -> tuple[int, bytes]:
        from ..backends.k8s.client import CONNECT_TIMEOUT, TRANSPORT_ERRORS, unreachable
        from .client import ServingError

        read = self.timeout or timeout
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        request = self.api.client.param_serialize(method, self.path + path, header_params=headers, body=body,
                                                  auth_settings=["BearerToken"])
        try:
            response = self.api.client.call_api(*request, _request_timeout=(min(CONNECT_TIMEOUT, read), read))
            return response.status, response.read()
        except TRANSPORT_ERRORS as exc:
            raise ServingError(str(unreachable(self.api.host, exc))) from None
