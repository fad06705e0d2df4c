"""Reading kubeconfig files as kubectl does, without the Kubernetes client: which files
($KUBECONFIG, a path list, or ~/.kube/config), their contexts, the current one and its
namespace, and the mistakes users make, said in their terms (check_kubeconfig)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from ..spec import SpecError
from .base import BackendError

LOCAL_HINT = "or use --backend local to run on this machine"


def kubeconfig_paths(env: Mapping[str, str], home: Path) -> list[Path]:
    """The kubeconfig files kubectl would read: $KUBECONFIG (a path list) or ~/.kube/config."""
    listed = env.get("KUBECONFIG", "")
    if listed:
        return [Path(p).expanduser() for p in listed.split(os.pathsep) if p]
    return [home / ".kube" / "config"]


@dataclass
class Kubeconfig:
    """The merged files: contexts by name (the first file naming one wins, as in kubectl),
    and the current context (the first file that sets it)."""
    contexts: dict[str, dict] = field(default_factory=dict)
    current: str | None = None

    def namespace(self, context: str | None = None) -> str | None:
        """The namespace the context (default: the current one) sets, if any."""
        chosen = self.contexts.get(context or self.current or "", {})
        namespace = chosen.get("namespace") if isinstance(chosen, dict) else None
        return namespace if isinstance(namespace, str) and namespace else None


def load(files: list[Path]) -> Kubeconfig:
    """The files that exist, merged; a file that is not a kubeconfig's YAML is a BackendError
    naming it (and the line)."""
    import yaml

    merged = Kubeconfig()
    for file in (f for f in files if f.is_file()):
        try:
            doc = yaml.safe_load(file.read_text()) or {}
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            mark = getattr(exc, "problem_mark", None)
            at = f" at line {mark.line + 1}" if mark is not None else ""
            raise BackendError(f"kubeconfig {file} cannot be read as YAML{at}; fix it or point --kubeconfig "
                               f"elsewhere, {LOCAL_HINT}") from None
        if not isinstance(doc, dict):
            raise BackendError(f"kubeconfig {file} is not a kubeconfig (no mapping); fix it or point --kubeconfig "
                               f"elsewhere, {LOCAL_HINT}")
        for entry in doc.get("contexts") or []:
            if isinstance(entry, dict) and isinstance(entry.get("name"), str) and entry["name"]:
                merged.contexts.setdefault(entry["name"], entry.get("context") or {})
        merged.current = merged.current or doc.get("current-context") or None
    return merged


def check_kubeconfig(path: str, flag: str | None, context: str | None) -> Kubeconfig:
    """The mistakes users make, said in their terms before the client says them in its own:
    a --kubeconfig or $KUBECONFIG that names no file, a file that is not YAML, an unknown
    --context, no current context. `path`: the os.pathsep list the client will read."""
    files = [Path(p).expanduser() for p in path.split(os.pathsep) if p]
    present = [f for f in files if f.is_file()]
    if flag is not None and not present:
        raise SpecError("--kubeconfig", f"{flag!r} is not a file; give the path of a kubeconfig "
                        "(e.g. ~/.kube/config, or what `kubectl config view --flatten` prints, saved)")
    if not present:
        where = f"KUBECONFIG={path}" if os.environ.get("KUBECONFIG") else path
        raise BackendError(f"no kubeconfig file at {where}; fix KUBECONFIG or pass --kubeconfig, {LOCAL_HINT}")
    config = load(present)
    listed = ", ".join(config.contexts) or "none"
    if context is not None and context not in config.contexts:
        raise SpecError("--context", f"no context {context!r} in {path}; use one of: {listed} "
                        "(kubectl config get-contexts)")
    if context is None and not config.current:
        raise BackendError(f"kubeconfig {path} has no current context; pick one with --context NAME "
                           f"(contexts: {listed}), {LOCAL_HINT}")
    return config


SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def context_namespace(flag: str | None, context: str | None, env: Mapping[str, str] | None = None,
                      home: Path | None = None, in_cluster: bool = False,
                      service_account: Path = SERVICE_ACCOUNT_NAMESPACE) -> str | None:
    """The namespace kubectl would use when none is given: the context's (--context, else
    the current one) in --kubeconfig or the files kubeconfig_paths() names; in a pod
    without a kubeconfig context, its service account's. None when none is set, or the
    files cannot be read (the backend says why when it needs them)."""
    env = os.environ if env is None else env
    files = [Path(p).expanduser() for p in flag.split(os.pathsep) if p] if flag else \
        kubeconfig_paths(env, Path.home() if home is None else home)
    try:
        config = load(files)
    except BackendError:
        return None
    if not config.contexts and in_cluster:
        try:
            return service_account.read_text().strip() or None
        except OSError:
            return None
    return config.namespace(context)


def configured(env: Mapping[str, str], home: Path) -> bool:
    """Whether the kubeconfig files name a cluster to use. No file, or files without any
    context (an empty kubeconfig): no. A file that is not YAML, or contexts but no current
    one: a BackendError, as kubectl would fail on them, rather than a silent choice of this
    machine."""
    files = kubeconfig_paths(env, home)
    config = load(files)
    if not config.contexts and not config.current:
        return False
    check_kubeconfig(os.pathsep.join(map(str, files)), None, None)
    return True
