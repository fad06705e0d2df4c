"""An insecure (skip-TLS-verify) kubeconfig against the real apiserver's TLS: one note,
not a urllib3 warning per request."""
from __future__ import annotations

import yaml

from tests.support.launcher_process import run_launcher


def insecure_kubeconfig(control_plane, tmp_path):
    config = yaml.safe_load(control_plane.kubeconfig.read_text())
    for cluster in config["clusters"]:
        cluster["cluster"].pop("certificate-authority-data", None)
        cluster["cluster"].pop("certificate-authority", None)
        cluster["cluster"]["insecure-skip-tls-verify"] = True
    path = tmp_path / "insecure-kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def test_an_insecure_cluster_is_one_note_and_no_urllib3_warning(control_plane, tmp_path):
    path = insecure_kubeconfig(control_plane, tmp_path)
    result = run_launcher(control_plane, "list", "-A", "--kubeconfig", str(path))
    assert result.returncode == 0, result.stderr
    assert "InsecureRequestWarning" not in result.stderr and "warnings.warn" not in result.stderr
    assert result.stderr.count("are not verified (insecure-skip-tls-verify in the kubeconfig)") == 1, result.stderr
