"""Choosing a backend: `get_backend("auto" | "local" | "k8s")`.

`auto` picks the cluster when one is configured (a kubeconfig with a current context,
from $KUBECONFIG or ~/.kube/config, or the in-cluster service-account environment) and
the local backend otherwise, saying so in one line. A kubeconfig that kubectl could not
use (not YAML, contexts but no current one) is an error, not a silent choice of this
machine. Backend modules are imported only
when chosen, so `--help` and `render` never load the Kubernetes client.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Mapping

from ..spec import SpecError
from . import kubeconfig
from .base import Backend, BackendError, stderr_note

KINDS = ("auto", "local", "k8s")
LOCAL_NOTE = ("No Kubernetes cluster configured; using this machine (local backend). "
              "Use {force} to force the cluster.")  # force: --backend k8s, or the API's backend="k8s"
SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")


def in_cluster(env: Mapping[str, str], token: Path = SERVICE_ACCOUNT_TOKEN) -> bool:
    return bool(env.get("KUBERNETES_SERVICE_HOST")) and token.is_file()


def cluster_configured(env: Mapping[str, str] | None = None, home: Path | None = None,
                       token: Path = SERVICE_ACCOUNT_TOKEN) -> bool:
    """True when the standard client loading would find a cluster to talk to."""
    env = os.environ if env is None else env
    home = Path.home() if home is None else home
    if in_cluster(env, token):
        return True
    return kubeconfig.configured(env, home)


def resolve_kind(kind: str, note: Callable[[str], None] = stderr_note, force: str = "--backend k8s",
                 **probe) -> str:
    """"auto" -> "k8s" or "local" (announcing the local choice, `force` naming how to choose
    the cluster instead); others pass through."""
    if kind not in KINDS:
        raise SpecError("--backend", f"{kind!r} is not a backend; use one of {', '.join(KINDS)}")
    if kind != "auto":
        return kind
    if cluster_configured(**probe):
        return "k8s"
    note(LOCAL_NOTE.format(force=force))
    return "local"


API_NAMES = {"kubeconfig": "kubeconfig", "context": "context", "request_timeout": "request_timeout"}


def check_cluster_args(kind: str, kubeconfig: str | None = None, context: str | None = None,
                       request_timeout: float | None = None, names: Mapping[str, str] = API_NAMES) -> str:
    """The one rule for the cluster's settings, shared by the CLI and `get_backend` (`names`:
    how the caller spells them): a kubeconfig or context selects the cluster, so `auto` becomes
    k8s and `local` is refused; a request timeout bounds the API server's calls, so it is
    positive seconds and refused with `local`. Returns the kind to use."""
    if kubeconfig or context:
        if kind == "local":
            raise SpecError(names["kubeconfig" if kubeconfig else "context"],
                            "selects a cluster, which the local backend does not use; drop one of them")
        kind = "k8s"
    if request_timeout is not None:
        if kind == "local":
            raise SpecError(names["request_timeout"], "bounds the calls to a cluster's API server, which the "
                            "local backend does not make; drop one of them")
        if isinstance(request_timeout, bool) or not isinstance(request_timeout, (int, float)) \
                or not request_timeout > 0:
            raise SpecError(names["request_timeout"], f"{request_timeout!r} is not a timeout; give positive seconds")
    return kind


def get_backend(kind: str = "auto", note: Callable[[str], None] = stderr_note,
                kubeconfig: str | None = None, context: str | None = None,
                request_timeout: float | None = None, foreground: bool = False) -> Backend:
    """An instance of the chosen backend (imported lazily); `kubeconfig` / `context`
    select the cluster for the k8s backend (so `auto` with either is k8s, as the CLI's
    --kubeconfig makes it), `request_timeout` bounds each API call; with `local` they are
    refused, as the CLI refuses them (one rule: `check_cluster_args`). `foreground` (the
    CLI's): a local job this process submits and then follows stops when it exits."""
    asked = check_cluster_args(kind, kubeconfig, context, request_timeout)
    kind = resolve_kind(asked, note, force='backend="k8s"')  # the CLI resolves `auto` itself
    if asked == "auto" and kind == "local" and request_timeout is not None:  # auto found no cluster
        note("request_timeout is not used: no cluster is configured, so the local backend runs the jobs")
    try:
        if kind == "k8s":
            from .k8s import KubernetesBackend

            timeout = {} if request_timeout is None else {"request_timeout": request_timeout}
            return KubernetesBackend(kubeconfig=kubeconfig, context=context, note=note, **timeout)
        from .local import LocalBackend

        return LocalBackend(note=note, foreground=foreground)
    except ImportError as exc:
        raise BackendError(f"the {kind} backend cannot be loaded ({exc}); "
                           "reinstall the launcher with its dependencies") from exc
