"""Which local jobs need the network (and so cannot run in a private network namespace)."""
from __future__ import annotations

import pytest

from launcher.backends.local.netns import network_need


def plan(*argv: str, **env: str) -> dict:
    return {"replicas": [{"id": "worker-0", "argv": ["python", "-m", "trainer.task", *argv],
                          "env": {"TF_CONFIG": '{"cluster": {}}', "UNSET": None, **env}}]}


@pytest.mark.parametrize("argv, env", [
    (("--job-dir", "/tmp/x", "--data-dir", "data/mnist"), {}),
    (("--job-dir", "file:///tmp/x"), {}),
    ((), {"JOB_DIR": "/tmp/out"}),
])
def test_local_paths_need_no_network(argv, env):
    assert network_need(plan(*argv, **env)) is None


@pytest.mark.parametrize("argv, env, shown", [
    (("--job-dir", "gs://bucket/run"), {}, "gs://bucket/run"),
    (("--data-dir=s3://b/d",), {}, "s3://b/d"),
    ((), {"JOB_DIR": "gs://bucket/env"}, "gs://bucket/env"),
    (("--prepare-data",), {}, "--prepare-data"),
])
def test_remote_urls_and_downloads_need_the_network(argv, env, shown):
    reason = network_need(plan(*argv, **env))
    assert reason and "worker-0" in reason and shown in reason


def test_outbound_is_blocked_by_what_only_the_hosts_loopback_has(monkeypatch, tmp_path):
    from launcher.backends.local import netns as local_netns

    resolv = tmp_path / "resolv.conf"
    resolv.write_text("nameserver 10.0.0.53\n")
    monkeypatch.setattr(local_netns, "RESOLV_CONF", str(resolv))
    monkeypatch.setattr(local_netns.shutil, "which", lambda name: f"/usr/bin/{name}")
    job = plan("--job-dir", "gs://bucket/run")
    assert local_netns.outbound_blocker(job, {"JUPYTER_URL": "http://localhost:8888"}) is None  # not the job's
    assert "https_proxy" in local_netns.outbound_blocker(job, {"https_proxy": "http://127.0.0.1:3128"})
    assert "STORAGE_EMULATOR_HOST" in local_netns.outbound_blocker(job, {"STORAGE_EMULATOR_HOST": "localhost:9023"})
    assert "http://[::1]:80/x" in local_netns.outbound_blocker(plan("--data-dir", "http://[::1]:80/x"), {})
    assert "install slirp4netns" in local_netns.outbound_blocker(job, {"TFJOB_LOCAL_SLIRP4NETNS": ""})
    resolv.write_text("nameserver 127.0.0.53\n")
    assert "DNS resolver" in local_netns.outbound_blocker(job, {})


def test_only_what_the_job_itself_sees_decides_and_only_a_loopback_only_resolver_blocks(monkeypatch, tmp_path):
    """The job's own env overrides yours (a proxy on 127.0.0.1 in your shell that the job
    replaces by a remote one blocks nothing); `*.localhost` is loopback (RFC 6761); a resolver
    on loopback beside a reachable one blocks nothing (the namespace asks the other)."""
    from launcher.backends.local import netns as local_netns

    resolv = tmp_path / "resolv.conf"
    resolv.write_text("nameserver 127.0.0.53\nnameserver 10.0.0.53\n")
    monkeypatch.setattr(local_netns, "RESOLV_CONF", str(resolv))
    monkeypatch.setattr(local_netns.shutil, "which", lambda name: f"/usr/bin/{name}")
    remote_proxy = plan("--job-dir", "gs://bucket/run", https_proxy="http://proxy.corp:3128")
    assert local_netns.outbound_blocker(remote_proxy, {"https_proxy": "http://127.0.0.1:3128"}) is None
    reason = local_netns.outbound_blocker(plan("--data-dir", "http://data.localhost:8080/d"), {})
    assert reason and "http://data.localhost:8080/d" in reason
