"""--secret-env NAME=SECRET:KEY (valueFrom.secretKeyRef) and the warning for a plain --env
that looks like a secret: parsing, refusals (one line, exit 2, nothing rendered), the
rendered TFJob, the Helm values (the chart's parity is in test_helm_parity.py)."""
from __future__ import annotations

import pytest
import yaml

from launcher.helm_values import values_for
from launcher.render import render
from launcher.spec import JobSpec, ReplicaSpec, SecretEnv, SpecError

pytestmark = pytest.mark.usefixtures("cli_env")  # the packaged TFJob CRD, a per-session schema cache


def env_of(tfjob: dict) -> list[dict]:
    return tfjob["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["env"]


def test_secret_env_renders_a_secret_key_ref_after_the_plain_env(cli):
    result = cli("render", "--name", "mnist", "--workers", "1", "--ps", "0", "--env", "MODE=fast",
                 "--secret-env", "HF_TOKEN=hf-token:token")
    assert result.code == 0, result.err
    assert env_of(yaml.safe_load(result.out)) == [
        {"name": "MODE", "value": "fast"},
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}}]
    assert result.err == ""


def test_helm_values_carry_the_references():
    spec = JobSpec(name="s", replicas={"Worker": ReplicaSpec(1)}, env={"A": "b"},
                   secret_env=(SecretEnv("HF_TOKEN", "hf-token", "token"),))
    values = values_for(spec)
    assert values["env"] == [{"name": "A", "value": "b"}]
    assert values["secretEnv"] == [{"name": "HF_TOKEN", "secretName": "hf-token", "key": "token"}]
    assert env_of(render(spec))[1]["valueFrom"]["secretKeyRef"] == {"name": "hf-token", "key": "token"}


@pytest.mark.parametrize("flag, words", [
    ("HF_TOKEN", "is not NAME=SECRET:KEY"),
    ("HF_TOKEN=hf-token", "is not NAME=SECRET:KEY"),
    ("=hf-token:token", "is not NAME=SECRET:KEY"),
    ("HF_TOKEN=Hf_Token:token", "is not a Secret name"),
    ("HF_TOKEN=hf-token:to/ken", "is not a Secret key"),
    ("TF_CONFIG=s:k", "is not allowed as a variable name"),
    ("MODE=s:k", "is set twice"),
])
def test_bad_secret_env_is_one_line_exit_2(cli, flag, words):
    result = cli("submit", "--name", "mnist", "--backend", "k8s", "--dry-run", "--env", "MODE=x",
                 "--secret-env", flag)
    assert result.code == 2 and result.out == ""
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --secret-env: ") and words in lines[0], result.err


@pytest.mark.parametrize("name", ["HF_TOKEN", "DB_PASSWORD", "AWS_SECRET_ACCESS_KEY", "API-KEY", "token",
                                  "GOOGLE_CREDENTIALS"])
def test_a_secret_looking_env_warns_without_its_value(cli, name):
    result = cli("render", "--name", "mnist", "--env", f"{name}=s3cr3t-value")
    assert result.code == 0
    (warning,) = [line for line in result.err.splitlines() if line.startswith("warning:")]
    assert f"--env {name}" in warning and f"--secret-env {name}=SECRET:KEY" in warning
    assert "s3cr3t-value" not in result.err


@pytest.mark.parametrize("name", ["MODE", "KEYBOARD_LAYOUT", "MONKEY", "TOKENIZER_PATH"])
def test_ordinary_names_do_not_warn(cli, name):
    assert "warning" not in cli("render", "--name", "mnist", "--env", f"{name}=x").err


def test_secret_env_check_is_part_of_the_spec():
    with pytest.raises(SpecError, match="--secret-env"):
        JobSpec(name="s", replicas={"Worker": ReplicaSpec(1)}, secret_env=(SecretEnv("A", "s", ""),))


def test_local_submit_without_a_value_is_refused_before_anything_starts(cli, monkeypatch, tmp_path):
    from tests.support.fakes.backend import FakeBackend

    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("TFJOB_LOCAL_SECRETS_DIR", str(tmp_path))
    backend = FakeBackend(name="local")
    result = cli("submit", "--name", "mnist", "--backend", "local", "--secret-env", "HF_TOKEN=hf-token:token",
                 backend=backend)
    assert result.code == 2 and backend.submitted == []
    assert result.err.strip() == (f"error: --secret-env HF_TOKEN=hf-token:token: the local backend found no value; "
                                  f"export HF_TOKEN or write the value to {tmp_path}/hf-token/token")
