"""What `submit` checks once the JobSpec is valid, before anything is applied or started:
shared by the CLI (launcher/cli/submit.py) and the Python API (launcher/api.py), so a job
created from Python is refused for what the CLI refuses."""
from __future__ import annotations

import os
from pathlib import Path

from .spec import JobSpec, SpecError, check_local_capacity, check_local_inputs


def check_submission(spec: JobSpec, kind: str, dry_run: str | None = None) -> None:
    """The package where the replicas run; on the local backend no claims and, for a job
    that starts, TensorFlow, every secret's value and the inputs each replica reads (a
    server dry run: the ports its plan reserves)."""
    check_package(spec, kind)
    if kind != "local":
        return
    refuse_local_volumes(spec)
    if not dry_run:  # what would start: render and dry runs show a job whose inputs may come later
        require_tensorflow(spec)
        require_local_secrets(spec)
        check_local_inputs(spec, kind, os.environ)
    elif dry_run == "server":
        check_local_capacity(spec, kind)


TENSORFLOW_MISSING = ("the local backend runs the trainer on this machine and needs TensorFlow, which is not "
                      "installed; pip install 'tfjob-launcher[local]', or submit to a cluster with --backend k8s")


def require_tensorflow(spec: JobSpec) -> None:
    """The local backend's replicas run `python -m trainer.task` with this interpreter: without
    TensorFlow they would all crash, so stop before anything starts (checked without importing it).
    A job with its own container command runs that instead and is not checked."""
    import importlib.util

    if not spec.command and importlib.util.find_spec("tensorflow") is None:
        raise SpecError("--backend local", TENSORFLOW_MISSING)


def require_local_secrets(spec: JobSpec) -> None:
    """Every --secret-env has a value on this machine (see backends/local/secrets.py)."""
    from .backends.local.secrets import unresolved

    refs = [{"name": s.name, "secret": s.secret, "key": s.key} for s in spec.secret_env]
    problem = unresolved(refs, dict(os.environ))
    if problem:
        flag, _, message = problem.partition(": ")
        raise SpecError(flag, message)


def refuse_local_volumes(spec: JobSpec) -> None:
    """A PersistentVolumeClaim exists only on a cluster: the local backend refuses --volume."""
    if spec.volumes:
        raise SpecError("--volume", "PersistentVolumeClaims exist only on a cluster and the local backend cannot "
                        "mount them; drop --volume (local replicas already share this machine's files: "
                        "use --job-dir PATH) or use --backend k8s")


def check_package(spec: JobSpec, kind: str) -> None:
    """--package-path where the replicas run. Local: a directory on this machine holding
    --module-name. k8s: a path the pods have, i.e. under a --volume mount; the launcher
    cannot ship files to a cluster (gcloud uploads the package to GCS; we do not)."""
    if spec.package_path is None:
        return
    if kind != "local":
        if not any(spec.package_path == v.mount_path.rstrip("/") or
                   spec.package_path.startswith(v.mount_path.rstrip("/") + "/") for v in spec.volumes):
            raise SpecError("--package-path", f"{spec.package_path} is not in the pods: the launcher cannot upload a "
                            "package to a cluster; bake it into --image and give --module-name alone, or put it on a "
                            "claim and give its path under a --volume mount (e.g. --volume code:/mnt/code "
                            "--package-path /mnt/code/trainer), or run it on this machine with --backend local")
        return
    package = Path(spec.package_path)
    if not package.is_dir():
        raise SpecError("--package-path", f"{spec.package_path} is not a directory on this machine; give your "
                        "package's directory, e.g. --package-path ./trainer")
    inner = spec.module_name.split(".")[1:]
    target = package.joinpath(*inner)
    if not ((inner and target.with_suffix(".py").is_file()) or (target / "__main__.py").is_file()):
        expected = target.with_suffix(".py") if inner else target / "__main__.py"
        raise SpecError("--module-name", f"{spec.module_name} is not in {spec.package_path} (no {expected}); "
                        "give the module's dotted name inside the package, e.g. trainer.task for trainer/task.py")
