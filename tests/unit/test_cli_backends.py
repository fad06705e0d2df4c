"""`--backend auto|local|k8s`: which backend auto picks, and the one-line local note."""
from __future__ import annotations

import sys

import pytest

from launcher import backends
from launcher.backends.base import BackendError
from launcher.spec import SpecError

pytestmark = pytest.mark.usefixtures("cli_env")  # the packaged TFJob CRD, a per-session schema cache

CONFIG = "apiVersion: v1\nkind: Config\ncurrent-context: {context}\ncontexts: []\nclusters: []\nusers: []\n"


def kubeconfig(path, context="kind-kind"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(CONFIG.format(context=context))
    return path


def test_no_config_means_local(tmp_path):
    assert not backends.cluster_configured(env={}, home=tmp_path, token=tmp_path / "token")


def test_home_kubeconfig_with_current_context(tmp_path):
    kubeconfig(tmp_path / ".kube" / "config")
    assert backends.cluster_configured(env={}, home=tmp_path, token=tmp_path / "token")


def test_an_empty_kubeconfig_does_not_count(tmp_path):
    kubeconfig(tmp_path / ".kube" / "config", context='""')  # no context at all, none current
    assert not backends.cluster_configured(env={}, home=tmp_path, token=tmp_path / "token")
    (tmp_path / ".kube" / "config").write_text("")
    assert not backends.cluster_configured(env={}, home=tmp_path, token=tmp_path / "token")


def test_a_broken_kubeconfig_is_an_error_not_this_machine(tmp_path):
    """kubectl fails on it; auto used to run the job here without a word."""
    (tmp_path / ".kube").mkdir()
    (tmp_path / ".kube" / "config").write_text("apiVersion: v1\ncurrent-context: [unclosed\n")
    with pytest.raises(BackendError, match=r"^kubeconfig \S+/\.kube/config cannot be read as YAML at line 3; fix "
                                           r"it or point --kubeconfig elsewhere, or use --backend local"):
        backends.resolve_kind("auto", lambda line: pytest.fail("no note"), env={}, home=tmp_path,
                              token=tmp_path / "t")


def test_contexts_without_a_current_one_are_an_error_not_this_machine(tmp_path):
    path = tmp_path / "config"
    path.write_text("apiVersion: v1\nkind: Config\ncurrent-context: ''\ncontexts:\n"
                    "- {name: gke_p_z_c, context: {cluster: c, user: u}}\n")
    with pytest.raises(BackendError, match=r"has no current context; pick one with --context NAME "
                                           r"\(contexts: gke_p_z_c\), or use --backend local"):
        backends.cluster_configured(env={"KUBECONFIG": str(path)}, home=tmp_path, token=tmp_path / "t")


@pytest.mark.parametrize("command", [["list"], ["submit", "--name", "a", "--dry-run"], ["status", "a"]])
def test_the_commands_say_a_broken_kubeconfig_in_one_line(cli, tmp_path, monkeypatch, command):
    path = tmp_path / "broken"
    path.write_text("clusters: {unclosed\n")
    monkeypatch.setenv("KUBECONFIG", str(path))
    result = cli(*command)
    assert (result.code, result.out) == (1, "")
    assert result.err == (f"error: kubeconfig {path} cannot be read as YAML at line 2; fix it or point --kubeconfig "
                          "elsewhere, or use --backend local to run on this machine\n")


def test_kubeconfig_env_list_replaces_home(tmp_path):
    kubeconfig(tmp_path / ".kube" / "config")
    second = kubeconfig(tmp_path / "b.yaml", context="gke_p_z_c")
    env = {"KUBECONFIG": f"{tmp_path / 'missing.yaml'}:{second}"}
    assert backends.cluster_configured(env=env, home=tmp_path / "nohome", token=tmp_path / "token")
    assert not backends.cluster_configured(env={"KUBECONFIG": str(tmp_path / "missing.yaml")},
                                           home=tmp_path, token=tmp_path / "token")


def test_in_cluster_needs_env_and_token(tmp_path):
    token = tmp_path / "token"
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}
    assert not backends.cluster_configured(env=env, home=tmp_path, token=token)
    token.write_text("t")
    assert backends.cluster_configured(env=env, home=tmp_path, token=token)


def test_auto_announces_local_in_one_line(tmp_path):
    notes = []
    kind = backends.resolve_kind("auto", notes.append, env={}, home=tmp_path, token=tmp_path / "t")
    assert kind == "local"
    assert notes == ["No Kubernetes cluster configured; using this machine (local backend). Use --backend k8s to "
                     "force the cluster."]


def test_auto_picks_k8s_silently(tmp_path):
    kubeconfig(tmp_path / ".kube" / "config")
    notes = []
    assert backends.resolve_kind("auto", notes.append, env={}, home=tmp_path, token=tmp_path / "t") == "k8s"
    assert notes == []


@pytest.mark.parametrize("kind", ["local", "k8s"])
def test_explicit_kinds_pass_through(kind):
    assert backends.resolve_kind(kind, lambda line: pytest.fail("no note expected")) == kind


def test_unknown_kind():
    with pytest.raises(SpecError, match="--backend"):
        backends.resolve_kind("cloud")


def _loaded_modules(statement: str) -> list[str]:
    import subprocess
    from pathlib import Path

    code = (f"import sys, contextlib, io\n{statement}\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('kubernetes', 'rich', 'tensorflow', 'jsonschema', 'jinja2')"
            " or m in ('launcher.backends.k8s', 'launcher.backends.local')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    return eval(out.stdout.strip().splitlines()[-1])


def test_help_loads_no_heavy_module():
    assert _loaded_modules("import launcher.cli; launcher.cli.build_parser().format_help()") == []


def test_render_loads_neither_kubernetes_nor_rich_nor_tensorflow():
    loaded = _loaded_modules("import launcher.cli\nwith contextlib.redirect_stdout(io.StringIO()):\n"
                             "    assert launcher.cli.main(['render', '--name', 'x']) == 0")
    assert not [m for m in loaded if m.split(".")[0] in ("kubernetes", "rich", "tensorflow")]
    assert "jsonschema" in loaded  # it did validate


def test_kubeconfig_mistakes_are_one_line(cli, tmp_path, monkeypatch):
    import yaml

    good = tmp_path / "config"
    good.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "a",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "a", "context": {"cluster": "c", "user": "u"}},
                     {"name": "b", "context": {"cluster": "c", "user": "u"}}]}))
    broken = tmp_path / "broken"
    broken.write_text("clusters: [\n")
    no_current = tmp_path / "no-current"
    no_current.write_text(good.read_text().replace("current-context: a", "current-context: ''"))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    for flags, code, line in [
        (["--kubeconfig", str(tmp_path / "absent")], 2, f"error: --kubeconfig: '{tmp_path / 'absent'}' is not a file"),
        (["--kubeconfig", str(good), "--context", "nope"], 2,
         f"error: --context: no context 'nope' in {good}; use one of: a, b (kubectl config get-contexts)"),
        (["--kubeconfig", str(broken)], 1, f"error: kubeconfig {broken} cannot be read as YAML at line 2"),
        (["--kubeconfig", str(no_current)], 1, f"error: kubeconfig {no_current} has no current context"),
    ]:
        result = cli("list", *flags)
        assert (result.code, result.out) == (code, ""), (flags, result.err)
        assert result.err.startswith(line) and result.err.count("\n") == 1, (flags, result.err)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "gone"))
    result = cli("list", "--backend", "k8s")
    assert result.code == 1 and result.err.startswith(f"error: no kubeconfig file at KUBECONFIG={tmp_path / 'gone'}")


NAMESPACED = """apiVersion: v1
kind: Config
current-context: gke
contexts:
- {name: gke, context: {cluster: c, user: u, namespace: training}}
- {name: other, context: {cluster: c, user: u}}
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
"""


@pytest.mark.parametrize("flags, namespace", [
    ([], "training"),  # the current context's, as kubectl
    (["--context", "other"], "default"),  # a context without one
    (["-n", "team-a"], "team-a"),  # the flag wins
    (["--backend", "local"], "default"),  # this machine has no kubeconfig namespaces
])
def test_the_namespace_defaults_to_the_kubeconfig_contexts(cli, tmp_path, monkeypatch, flags, namespace):
    import yaml

    (tmp_path / "config").write_text(NAMESPACED)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "config"))
    result = cli("render", "--name", "a", *flags)
    assert result.code == 0, result.err
    assert yaml.safe_load(result.out)["metadata"]["namespace"] == namespace


def test_an_empty_namespace_is_refused_not_taken_as_default(cli):
    result = cli("render", "--name", "a", "-n", "")
    assert (result.code, result.err) == (2, "error: --namespace: '' is not a valid namespace; use lowercase letters, "
                                            "digits, '-'\n")


def test_in_a_pod_the_namespace_is_the_service_accounts(tmp_path):
    from launcher.backends.kubeconfig import context_namespace

    account = tmp_path / "namespace"
    account.write_text("ml-team\n")
    assert context_namespace(None, None, env={}, home=tmp_path, in_cluster=True, service_account=account) == "ml-team"
    assert context_namespace(None, None, env={}, home=tmp_path, in_cluster=False, service_account=account) is None


@pytest.mark.parametrize("flags, line", [
    (["--kubeconfig", "/nonexistent/config"], "error: --kubeconfig: '/nonexistent/config' is not a file; give the "
     "path of a kubeconfig (e.g. ~/.kube/config, or what `kubectl config view --flatten` prints, saved)\n"),
    (["--context", "nope"], "error: --context: no context 'nope' in CONFIG; use one of: gke, other "
     "(kubectl config get-contexts)\n"),
])
def test_render_checks_a_given_kubeconfig_and_context_too(cli, tmp_path, monkeypatch, flags, line):
    """They choose the namespace (the context's) of what render prints, as for submit."""
    (tmp_path / "config").write_text(NAMESPACED)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "config"))
    result = cli("render", "--name", "a", *flags)
    assert (result.code, result.out, result.err) == (2, "", line.replace("CONFIG", str(tmp_path / "config")))


def test_request_timeout_is_said_unused_when_auto_picks_this_machine(cli, tmp_path, monkeypatch):
    """auto found no cluster: the flag bounds nothing, and the user hears it (--backend local refuses it)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing.yaml"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    result = cli("list", "--request-timeout", "5s")
    assert result.code == 0, result
    assert ("note: --request-timeout is not used: no cluster is configured, so this runs on this machine "
            "(the local backend)\n") in result.err
    assert "--request-timeout" not in cli("list").err
    (tmp_path / "instances.json").write_text('{"x": 1}\n')
    assert "note: --request-timeout is not used" in cli("models", "list", "--request-timeout", "5s").err
    # predict's bounds the model server's answers, on this machine too
    predicted = cli("predict", "m", "--json-instances", str(tmp_path / "instances.json"), "--request-timeout", "5s")
    assert "--request-timeout" not in predicted.err and "model m is not served here" in predicted.err, predicted
    notes = []
    backends.get_backend("auto", notes.append, request_timeout=5)
    assert notes == [backends.LOCAL_NOTE.format(force='backend="k8s"'), "request_timeout is not used: no cluster is configured, so the local "
                                          "backend runs the jobs"]
    assert cli("list", "--backend", "local", "--request-timeout", "5s").refused("--request-timeout").endswith(
        "bounds the calls to a cluster's API server, which the local backend does not make; drop one of them")


@pytest.mark.parametrize("kwargs, field", [
    ({"kubeconfig": "/k"}, "--kubeconfig"), ({"context": "gke"}, "--context"), ({"request_timeout": 5}, "--request-timeout")])
def test_one_rule_for_the_cluster_settings_in_each_callers_spelling(kwargs, field):
    """The CLI and get_backend share check_cluster_args; each names the setting as its caller spells it."""
    from launcher.cli import CLI_NAMES

    with pytest.raises(SpecError) as cli_error:
        backends.check_cluster_args("local", names=CLI_NAMES, **kwargs)
    with pytest.raises(SpecError) as api_error:
        backends.get_backend("local", **kwargs)
    assert cli_error.value.field == field and api_error.value.field == next(iter(kwargs))
    assert str(cli_error.value).split(": ", 1)[1] == str(api_error.value).split(": ", 1)[1]
    assert backends.check_cluster_args("auto", names=CLI_NAMES, **kwargs) == (
        "auto" if "request_timeout" in kwargs else "k8s")
