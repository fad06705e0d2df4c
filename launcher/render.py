"""JobSpec -> TFJob dict, through the one Jinja template in launcher/templates/ (package data);
and the job's NetworkPolicy through a second one (`render_network_policy`).

The template holds no logic beyond loops and conditionals; everything derived from the
JobSpec (selectors, tolerations, resources, labels) comes from JobSpec methods, so the
Helm values (`helm_values.py`) and the local backend see the same data.
"""
from __future__ import annotations

import json
import re
from functools import lru_cache

import jinja2
import yaml

from .spec import JOB_NAME_LABEL, RUN_AS_USER, TF_PORT, JobSpec

NETWORK_POLICY_SUFFIX = "-tf-port"
# What YAML (PyYAML's and Go's, YAML 1.1) does not read back as written inside a quoted
# string: C1 controls and DEL, U+0085/U+2028/U+2029 (line breaks there), surrogates, BOM,
# U+FFFE/U+FFFF. Everything else goes as itself, characters beyond U+FFFF too (json.dumps'
# default, a surrogate pair of \u escapes, is read by YAML as two lone surrogates).
_YAML_UNSAFE = re.compile("[^\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]")


def yaml_json(obj, **kwargs) -> str:
    """json.dumps for a value in a YAML document (the templates' tojson): the characters of
    _YAML_UNSAFE as \\u escapes (json.dumps has escaped those below U+0020), the rest raw."""
    return _YAML_UNSAFE.sub(lambda m: f"\\u{ord(m[0]):04x}", json.dumps(obj, ensure_ascii=False, **kwargs))


@lru_cache(maxsize=3)
def template(name: str = "tfjob.yaml.j2") -> jinja2.Template:
    """One of the package's templates (the TFJob, its NetworkPolicy, serving's
    InferenceService), whose `tojson` writes YAML-safe JSON (yaml_json)."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("launcher", "templates"),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
    )
    env.policies["json.dumps_function"] = yaml_json
    return env.get_template(name)


def run_policy(spec: JobSpec) -> dict:
    policy = {"cleanPodPolicy": spec.run_policy.clean_pod_policy}
    optional = {
        "ttlSecondsAfterFinished": spec.run_policy.ttl_seconds_after_finished,
        "activeDeadlineSeconds": spec.run_policy.active_deadline_seconds,
        "backoffLimit": spec.run_policy.backoff_limit,
    }
    policy.update({k: v for k, v in optional.items() if v is not None})
    if spec.queue_name:
        policy["suspend"] = True  # Kueue admits (unsuspends) the job when its queue has quota
    if spec.gang:
        policy["schedulingPolicy"] = spec.scheduling_policy()
    return policy


def context(spec: JobSpec) -> dict:
    """Everything the template needs, derived from the JobSpec only."""
    return {
        "name": spec.name,
        "namespace": spec.namespace,
        "labels": spec.all_labels(),
        "job_labels": spec.job_labels(),
        "pod_annotations": spec.pod_annotations(),
        "success_policy": spec.success_policy,
        "priority_class": spec.priority_class,
        "run_policy": run_policy(spec),
        "restart_policy": spec.restart_policy,
        "service_account": spec.service_account,
        "image": spec.image,
        "command": list(spec.container_command()),
        "working_dir": spec.package_parent(),  # --package-path: `python -m` finds the package first
        "args": spec.container_args(),
        "env": spec.container_env(),
        "port": TF_PORT,
        "volumes": spec.pod_volumes(),
        "volume_mounts": spec.volume_mounts(),
        "pod_security_context": {"runAsNonRoot": True, "runAsUser": RUN_AS_USER,
                                 "runAsGroup": RUN_AS_USER, "fsGroup": RUN_AS_USER,
                                 "seccompProfile": {"type": "RuntimeDefault"}},
        "container_security_context": {"allowPrivilegeEscalation": False,
                                       "capabilities": {"drop": ["ALL"]}},
        "replicas": [
            {
                "type": role,
                "count": spec.count(role),
                "node_selector": spec.replica_node_selector(role),
                "tolerations": spec.replica_tolerations(role),
                "resources": spec.replica_resources(role),
            }
            for role in spec.active_roles()
        ],
    }


def render_yaml(spec: JobSpec) -> str:
    """The TFJob manifest as the template writes it."""
    return template().render(**context(spec))


def render(spec: JobSpec) -> dict:
    """The TFJob as a dict (the template's output parsed back)."""
    return yaml.safe_load(render_yaml(spec))


def network_policy_name(job_name: str) -> str:
    return job_name + NETWORK_POLICY_SUFFIX


def network_policy_context(spec: JobSpec) -> dict:
    return {
        "name": network_policy_name(spec.name),
        "namespace": spec.namespace,
        "labels": spec.all_labels(),
        "pod_labels": {JOB_NAME_LABEL: spec.name},
        "port": TF_PORT,
    }


def render_network_policy(spec: JobSpec) -> dict | None:
    """The job's NetworkPolicy (None with --no-network-policy): ingress to the job's pods
    only on the TensorFlow port and only from the job's own pods."""
    if not spec.network_policy:
        return None
    return yaml.safe_load(template("networkpolicy.yaml.j2").render(**network_policy_context(spec)))


class _KubeDumper(yaml.SafeDumper):
    """yaml.safe_dump's, quoting also the strings that Go's YAML (kubectl's, helm's: YAML 1.1
    with Go's number syntax) reads as no string where PyYAML reads one: y, n (booleans);
    1e3, 1.5e3, 0o17, 0X1F (numbers). A string is quoted when a resolver here matches it."""


_KubeDumper.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^[yYnN]$"), list("yYnN"))
_KubeDumper.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(r"^[-+]?\.?[0-9][0-9a-zA-Z_.+-]*$"),
                                  list("-+.0123456789"))


def to_yaml(obj: dict) -> str:
    """The object as YAML that kubectl (Go) and PyYAML both read back as it is."""
    return yaml.dump(obj, Dumper=_KubeDumper, sort_keys=False, default_flow_style=False)
