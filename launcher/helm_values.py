"""JobSpec -> Helm values for charts/tfjob: the chart then renders the same TFJob as
`render.render(spec)` (tests/unit/test_helm_parity.py keeps the two equal).

`launcher render --values-out FILE` writes `values_yaml(spec)`; then
`helm install NAME charts/tfjob -n NAMESPACE -f FILE` (see `install_command`) creates the
same job. The namespace is Helm's (`-n`), not a value, as Helm charts conventionally do.
"""
from __future__ import annotations

import yaml

from .render import context, run_policy
from .spec import GPU_ROLES, ROLES, JobSpec

CHART = "charts/tfjob"


def split_image(ref: str) -> tuple[str, str, str]:
    """`repo[:tag][@digest]` -> (repository, tag, digest). An untagged, undigested
    reference gets the tag `latest`, which is what the container runtime pulls for it."""
    name, _, digest = ref.partition("@")
    colon = name.rfind(":")
    if colon > name.rfind("/"):
        repository, tag = name[:colon], name[colon + 1:]
    else:
        repository, tag = name, ""
    if not tag and not digest:
        tag = "latest"
    return repository, tag, digest


def replica_values(spec: JobSpec, role: str) -> dict:
    """One `replicas.<role>` entry; a role the spec leaves out gets count 0."""
    replica = spec.replicas.get(role)
    values: dict = {"count": replica.count if replica else 0}
    if role in GPU_ROLES:
        values["gpus"] = replica.gpus if replica else 0
    values["cpu"] = (replica.cpu if replica else None) or ""
    values["memory"] = (replica.memory if replica else None) or ""
    values["nodeSelector"] = dict(spec.role_node_selectors.get(role, {}))
    return values


def values_for(spec: JobSpec) -> dict:
    """The complete values for charts/tfjob (every key set, so chart defaults don't matter)."""
    ctx = context(spec)
    repository, tag, digest = split_image(spec.image)
    return {
        "jobName": spec.name,
        "image": {"repository": repository, "tag": tag, "digest": digest, "pullPolicy": ""},
        "replicas": {role.lower(): replica_values(spec, role) for role in ROLES},
        "accelerator": spec.accelerator or "",
        "nodeSelector": dict(spec.node_selector),
        "labels": dict(spec.labels),
        "env": [{"name": k, "value": v} for k, v in spec.env.items()],
        "secretEnv": [{"name": s.name, "secretName": s.secret, "key": s.key} for s in spec.secret_env],
        "command": list(spec.command),
        "moduleName": spec.module_name or "",
        "packagePath": spec.package_path or "",
        "args": list(spec.trainer_args),
        "jobDir": spec.job_dir or "",
        "restartPolicy": spec.restart_policy,
        # the chart derives suspend from queueName and schedulingPolicy from gang
        "runPolicy": {k: v for k, v in run_policy(spec).items() if k not in ("suspend", "schedulingPolicy")},
        "serviceAccount": {"create": False, "name": spec.service_account or "",
                           "gcpServiceAccount": "", "annotations": {}, "automount": False},
        "volumes": [{"claimName": v.claim, "mountPath": v.mount_path, "readOnly": v.read_only}
                    for v in spec.volumes],
        "successPolicy": spec.success_policy,
        "queueName": spec.queue_name or "",
        "priorityClassName": spec.priority_class or "",
        "istioSidecar": spec.istio_sidecar,
        "gang": {"enabled": spec.gang, "queue": spec.gang_queue or "",
                 **{key: value for key, value in (("minAvailable", spec.gang_min_available),
                                                  ("timeoutSeconds", spec.gang_timeout_seconds)) if value}},
        "networkPolicy": {"enabled": spec.network_policy},
        "podSecurityContext": ctx["pod_security_context"],
        "securityContext": ctx["container_security_context"],
    }


class _QuotedDumper(yaml.SafeDumper):
    """Writes every string double-quoted: Helm's YAML 1.1 parser reads bare y/n/on/off
    as booleans, so no string may be left to its guess."""


_QuotedDumper.add_representer(
    str, lambda dumper, value: dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"'))


def values_yaml(spec: JobSpec) -> str:
    """The values file for `helm install -f`, with a header saying how to use it."""
    header = (f"# Helm values for TFJob {spec.name!r}, written by the launcher.\n"
              f"# {install_command(spec, '<this file>')}\n")
    return header + yaml.dump(values_for(spec), Dumper=_QuotedDumper, sort_keys=False,
                              default_flow_style=False, allow_unicode=True, width=1_000_000)


def install_command(spec: JobSpec, values_file: str) -> str:
    """The helm command that creates the same job from the written values."""
    return f"helm install {spec.name} {CHART} -n {spec.namespace} -f {values_file}"
