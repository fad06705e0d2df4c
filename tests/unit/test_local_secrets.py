"""Where the local backend finds a --secret-env value (launcher/backends/local/secrets.py):
the environment, else $TFJOB_LOCAL_SECRETS_DIR/SECRET/KEY (default
~/.config/tfjob-launcher/secrets/SECRET/KEY, as a Secret mounted as a volume)."""
from __future__ import annotations

from launcher.backends.local.secrets import resolve, secrets_dir, unresolved

REF = {"name": "HF_TOKEN", "secret": "hf-token", "key": "token"}


def test_the_secrets_dir_defaults_to_the_users_config_and_expands_a_tilde(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert secrets_dir({}) == tmp_path / ".config" / "tfjob-launcher" / "secrets"
    assert secrets_dir({"TFJOB_LOCAL_SECRETS_DIR": "~/vault"}) == tmp_path / "vault"


def test_the_environment_comes_before_the_file_and_a_files_last_newline_is_not_the_values(tmp_path):
    environ = {"TFJOB_LOCAL_SECRETS_DIR": str(tmp_path)}
    (tmp_path / "hf-token").mkdir()
    (tmp_path / "hf-token" / "token").write_text("from-file\n")  # as `echo VALUE > FILE` writes it
    assert resolve(REF, environ) == "from-file"
    assert resolve(REF, {**environ, "HF_TOKEN": "from-env"}) == "from-env"


def test_a_secret_file_that_cannot_be_read_is_the_one_line_not_a_traceback(tmp_path):
    """A directory where the value's file should be, or bytes that are no text."""
    environ = {"TFJOB_LOCAL_SECRETS_DIR": str(tmp_path)}
    path = tmp_path / "hf-token" / "token"
    path.mkdir(parents=True)
    line = (f"--secret-env HF_TOKEN=hf-token:token: the local backend found no value; "
            f"export HF_TOKEN or write the value to {path}")
    assert resolve(REF, environ) is None and unresolved([REF], environ) == line
    path.rmdir()
    path.write_bytes(b"\xff\xfe\x00")
    assert resolve(REF, environ) is None and unresolved([REF], environ) == line
