"""The node tier: a real kubelet, containerd + runc, CNI bridge and CoreDNS joined to the
test control plane, in a network namespace the run creates (tests/support/node/, the
code of scripts/node/up). Needs root and the binaries of scripts/controlplane/build.sh and
scripts/node/build.sh; a machine without them FAILS these tests with the reason."""
from __future__ import annotations

import contextlib
import subprocess
from typing import Iterator

import pytest

from tests.support.controlplane.procs import ControlPlaneError
from tests.support.node import NodeCluster, running_node_cluster
from tests.support.node.host import NodeHostError


TEST_TIMEOUT_S = 1800  # a first test also starts the node and imports the image; jobs train for minutes
LOCK_WAIT_S = 1200  # another session's node on this machine (a shared developer box): wait for it, bounded


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/node/" in item.nodeid.replace("\\", "/"):
            item.add_marker(pytest.mark.node)
            if item.get_closest_marker("timeout") is None:
                item.add_marker(pytest.mark.timeout(TEST_TIMEOUT_S))


def pytest_configure(config):
    config.addinivalue_line("markers", "node: runs real pods on a real kubelet (scripts/node/build.sh)")


@pytest.fixture(scope="session")
def node_cluster() -> Iterator[NodeCluster]:
    """The running single-node cluster; everything it made is removed after the session
    (a teardown that leaves anything behind fails the run)."""
    stack, problem = contextlib.ExitStack(), None
    try:
        cluster = stack.enter_context(running_node_cluster(lock_wait_seconds=LOCK_WAIT_S))
    except (NodeHostError, ControlPlaneError, subprocess.SubprocessError, OSError) as exc:
        stack.close()
        problem = f"node cluster did not start: {exc}"
    if problem:
        pytest.fail(problem, pytrace=False)
    with stack:
        yield cluster


@pytest.fixture(scope="session")
def trainer_image(node_cluster) -> str:
    """The trainer image built by scripts/image/build.sh (the project's Dockerfile on a
    local Debian + tensorflow-cpu base), imported into the node's containerd."""
    from tests.support.image import built_image  # lands with scripts/image/build.sh

    image = built_image(in_podman=False)  # the node takes the OCI archive, not podman's storage
    node_cluster.import_image(image.archive)
    return image.reference
