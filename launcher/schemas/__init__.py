"""The CRD schemas the launcher validates against, shipped as package data.

Each schema has a name (`tfjob`; `inferenceservice` later), a packaged CRD file taken by
`scripts/crds/update.py` from a pinned Go module, an origin record beside it
(`<file>.origin.json`: module, version, path in the module, sha256), and an environment
variable that points the launcher at another copy of the CRD instead.

Which CRD a command validates with, first match wins:
  1. the file in the environment variable (e.g. $TFJOB_CRD), when set;
  2. on the k8s backend (submit, server dry run), the CRD the cluster has installed;
  3. the packaged copy.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path


@dataclass(frozen=True)
class Schema:
    name: str          # short name used in code and messages
    kind: str          # the custom resource's kind
    crd_name: str      # metadata.name of the CRD (plural.group)
    version: str       # the served version whose openAPIV3Schema is used
    file: str          # packaged CRD file in launcher/schemas/
    env: str           # environment variable naming another CRD file


SCHEMAS = {
    "tfjob": Schema("tfjob", "TFJob", "tfjobs.kubeflow.org", "v1", "kubeflow.org_tfjobs.yaml", "TFJOB_CRD"),
}


def get(name: str) -> Schema:
    return SCHEMAS[name]


def packaged_path(name: str) -> Path:
    """The packaged CRD file (a real file: the package is installed unzipped)."""
    return Path(str(resources.files(__name__) / SCHEMAS[name].file))


def origin(name: str) -> dict:
    """The origin record of the packaged copy: module, version, path, sha256, ..."""
    text = (resources.files(__name__) / f"{SCHEMAS[name].file}.origin.json").read_text(encoding="utf-8")
    return json.loads(text)


def describe(name: str) -> str:
    """"training-operator v1.9.4 (packaged)" style text for notes."""
    record = origin(name)
    return f"{record['module'].rsplit('/', 1)[-1]} {record['version']}"


def configured_path(name: str) -> str | None:
    """The file named by the schema's environment variable, if set (not checked here)."""
    return os.environ.get(SCHEMAS[name].env) or None
