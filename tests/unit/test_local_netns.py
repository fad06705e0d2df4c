"""Which local jobs need the network (and so cannot run in a private network namespace)."""
from __future__ import annotations

import pytest

from launcher.backends.local_netns import network_need


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
