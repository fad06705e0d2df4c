"""launcher.helm_values without helm: image splitting, the values file format."""
from __future__ import annotations

import re

import pytest
import yaml

from launcher.helm_values import install_command, split_image, values_for, values_yaml
from launcher.spec import JobSpec, ReplicaSpec

DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize("ref,expected", [
    ("tfjob-trainer:0.1.0", ("tfjob-trainer", "0.1.0", "")),
    ("gcr.io/proj/trainer:1.2-gpu", ("gcr.io/proj/trainer", "1.2-gpu", "")),
    ("localhost:5000/trainer", ("localhost:5000/trainer", "latest", "")),
    ("localhost:5000/trainer:dev", ("localhost:5000/trainer", "dev", "")),
    (f"trainer@{DIGEST}", ("trainer", "", DIGEST)),
    (f"host:443/a/b:v1@{DIGEST}", ("host:443/a/b", "v1", DIGEST)),
    ("trainer", ("trainer", "latest", "")),
])
def test_split_image(ref, expected):
    assert split_image(ref) == expected


def test_values_cover_every_role_and_ps_has_no_gpus():
    spec = JobSpec(name="mwms", replicas={"Worker": ReplicaSpec(3, gpus=1, memory="2Gi")})
    replicas = values_for(spec)["replicas"]
    assert replicas == {
        "chief": {"count": 0, "gpus": 0, "cpu": "", "memory": "", "nodeSelector": {}},
        "ps": {"count": 0, "cpu": "", "memory": "", "nodeSelector": {}},
        "worker": {"count": 3, "gpus": 1, "cpu": "", "memory": "2Gi", "nodeSelector": {}},
        "evaluator": {"count": 0, "gpus": 0, "cpu": "", "memory": "", "nodeSelector": {}},
    }


def test_values_file_quotes_every_string_and_round_trips():
    """Helm's YAML 1.1 parser reads bare y/on/no as booleans: every string is quoted."""
    spec = JobSpec(name="q", replicas={"Chief": ReplicaSpec(1)}, labels={"y": "on"},
                   env={"A": "y", "B": "no", "C": "~", "D": "12", "E": "line\nbreak"},
                   trainer_args=("off", "1e3"))
    text = values_yaml(spec)
    body = [line for line in text.splitlines() if not line.startswith("#")]
    for line in body:
        scalar = re.sub(r'^\s*(- )?("[^"]*":\s*)?', "", line)
        assert scalar in ("", "[]", "{}", "true", "false") or scalar.isdigit() or scalar.startswith('"'), line
    assert yaml.safe_load(text) == values_for(spec)


def test_header_tells_the_install_command():
    spec = JobSpec(name="mnist", namespace="ml", replicas={"Worker": ReplicaSpec(2)})
    assert install_command(spec, "v.yaml") == "helm install mnist charts/tfjob -n ml -f v.yaml"
    assert "# helm install mnist charts/tfjob -n ml -f" in values_yaml(spec)
