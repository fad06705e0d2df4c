"""What `submit` checks once the JobSpec is valid, before anything is applied or started:
shared by the CLI (launcher/cli/submit.py) and the Python API (launcher/api.py), so a job
created from Python is refused for what the CLI refuses."""
from __future__ import annotations

import os
from pathlib import Path

from .spec import JobSpec, SpecError, check_local_capacity, check_local_inputs, namespace_flag, on_volume, shown


def check_submission(spec: JobSpec, kind: str, dry_run: str | None = None) -> None:
    """The package where the replicas run; on the local backend no claims and, for a job
    that starts, TensorFlow, every secret's value and the inputs each replica reads (a
    server dry run: the ports its plan reserves)."""
    check_package(spec, kind)
    if kind != "local":
        return
    refuse_local_volumes(spec)
    if dry_run != "client":  # the plan of a server dry run reserves ports as the processes would
        require_linux()
    if not dry_run:  # what would start: render and dry runs show a job whose inputs may come later
        require_tensorflow(spec)
        require_local_secrets(spec)
        check_local_inputs(spec, kind, os.environ)
    elif dry_run == "server":
        check_local_capacity(spec, kind)


def require_linux(runs: str = "the local backend runs each replica", elsewhere: str = "submit to a cluster") -> None:
    """The local backend and the local model server supervise Linux processes (/proc, prctl):
    elsewhere (macOS, Windows) one line, before anything starts, instead of a crash midway."""
    import platform
    import sys

    if not sys.platform.startswith("linux"):
        raise SpecError("--backend local", f"{runs} as a Linux process (it reads /proc and uses Linux's process "
                        f"controls), and this machine runs {platform.system() or sys.platform}; {elsewhere} (kind, "
                        "minikube, GKE) with --backend k8s, or run the launcher in a Linux VM or container")


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
        if not on_volume(spec.package_path, spec.volumes):  # kept plain, as the mounts are compared
            raise SpecError("--package-path", f"{shown(spec.package_path)} is not in the pods: the launcher cannot "
                            "upload a package to a cluster; bake it into --image and give --module-name alone, or put "
                            "it on a claim and give its path under a --volume mount (e.g. --volume code:/mnt/code "
                            "--package-path /mnt/code/trainer), or run it on this machine with --backend local")
        return
    package = Path(spec.package_path)
    if not package.is_dir():
        raise SpecError("--package-path", f"{shown(spec.package_path)} is not a directory on this machine; give your "
                        "package's directory, e.g. --package-path ./trainer")
    inner = spec.module_name.split(".")[1:]
    target = package.joinpath(*inner)
    if not ((inner and target.with_suffix(".py").is_file()) or (target / "__main__.py").is_file()):
        expected = target.with_suffix(".py") if inner else target / "__main__.py"
        raise SpecError("--module-name", f"{spec.module_name} is not in {shown(spec.package_path)} "
                        f"(no {shown(str(expected))}); give the module's dotted name inside the package, e.g. "
                        "trainer.task for trainer/task.py")


# How the CLI names the settings local_notes speaks of (the Python API passes JobSpec's fields)
CLI_FLAGS = {"queue_name": "--queue-name", "priority_class": "--priority-class", "gang": "--gang",
             "success_policy": "--success-policy", "istio_sidecar": "--istio-sidecar",
             "service_account": "--service-account", "node_selector": "--node-selector", "image": "--image",
             "ttl_seconds_after_finished": "--ttl-seconds"}


def local_notes(spec: JobSpec, node_selector_given: bool, names: dict[str, str] = CLI_FLAGS) -> list[str]:
    """What the local backend does not use of a job it will start, one `note:` line each: GPUs,
    CPU and memory, the cluster's scheduling settings, the image, the TTL. `node_selector_given`:
    the user gave one (a machine type's own is not theirs); `names`: the caller's names of them."""
    from .spec import DEFAULT_IMAGE

    notes = []
    if spec.accelerator or any(r.gpus for r in spec.replicas.values()):
        notes.append("note: GPU settings are ignored by the local backend (replicas run on this machine's CPU)")
    if any(r.cpu or r.memory for r in spec.replicas.values()):
        notes.append("note: CPU and memory requests are ignored by the local backend (replicas share this "
                     "machine's cores and memory)")
    cluster_only = [names[field] for field, value in (
        ("queue_name", spec.queue_name), ("priority_class", spec.priority_class), ("gang", spec.gang),
        ("success_policy", spec.success_policy), ("istio_sidecar", spec.istio_sidecar),
        ("service_account", spec.service_account), ("node_selector", node_selector_given)) if value]
    if cluster_only:
        notes.append(f"note: {', '.join(cluster_only)} {'is' if len(cluster_only) == 1 else 'are'} ignored by the "
                     "local backend (it starts every replica at once, as your processes on this machine, without "
                     "Istio; the chief decides success)")
    if spec.image != DEFAULT_IMAGE:
        runs = ("the given command" if spec.command else f"python -m {spec.module_name}" if spec.module_name
                else "this installation's trainer (python -m trainer.task)")
        notes.append(f"note: {names['image']} {spec.image} is not used by the local backend: its replicas run "
                     f"{runs} on this machine")
    if spec.run_policy.ttl_seconds_after_finished is not None:
        notes.append(f"note: {names['ttl_seconds_after_finished']} is ignored by the local backend (a finished "
                     "job stays until `delete`)")
    return notes


def sharing_note(spec: JobSpec, backend) -> str | None:
    """The local jobs that run already, whose replicas the new job's share this machine's cores with."""
    others = sorted(f"{job.name}{namespace_flag(job.namespace)}" for job in backend.list(None)
                    if job.phase in ("Created", "Running", "Restarting")
                    and (job.name, job.namespace) != (spec.name, spec.namespace))
    if not others:
        return None
    cores = os.cpu_count() or 1
    return (f"note: local job{'s' if len(others) > 1 else ''} {', '.join(others)} also "
            f"run{'' if len(others) > 1 else 's'} here: the jobs share this machine's {cores} "
            f"core{'s' if cores > 1 else ''}, each training slower (stop one with `python -m launcher delete NAME`)")
