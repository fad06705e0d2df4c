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
from tests.support.node.kserve import KServe, running_kserve


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


@contextlib.contextmanager
def started(context, what: str):
    """Enter `context` (a part of the cluster) for the session; a start-up problem FAILS the
    tests that need it with the reason (never a skip), after whatever did start is stopped."""
    stack, problem = contextlib.ExitStack(), None
    try:
        value = stack.enter_context(context)
    except (NodeHostError, ControlPlaneError, subprocess.SubprocessError, OSError) as exc:
        stack.close()
        problem = f"{what} did not start: {exc}"
    if problem:
        pytest.fail(problem, pytrace=False)
    with stack:
        yield value


@pytest.fixture(scope="session")
def node_cluster() -> Iterator[NodeCluster]:
    """The running single-node cluster; everything it made is removed after the session
    (a teardown that leaves anything behind fails the run)."""
    with started(running_node_cluster(lock_wait_seconds=LOCK_WAIT_S), "node cluster") as cluster:
        yield cluster


def imported(cluster: NodeCluster, kind: str) -> str:
    """An image of scripts/image/build.sh (the project's Dockerfile on a local Debian +
    tensorflow-cpu base) imported into the node's containerd from its OCI archive."""
    from tests.support.image import built_image

    image = built_image(in_podman=False, kind=kind)  # the node takes the OCI archive, not podman's storage
    cluster.import_image(image.archive)
    return image.reference


@pytest.fixture(scope="session")
def trainer_image(node_cluster) -> str:
    """The trainer image (the Dockerfile's default target)."""
    return imported(node_cluster, "trainer")


@pytest.fixture(scope="session")
def serve_image(node_cluster) -> str:
    """The serving image (the Dockerfile's `serve` target: the trainer image plus kserve)."""
    return imported(node_cluster, "serve")


@pytest.fixture(scope="session")
def kserve(node_cluster) -> Iterator[KServe]:
    """The real KServe controller (scripts/kserve/build.sh) on the node's control plane, in
    Standard mode with its CRDs, ConfigMap and webhooks."""
    with started(running_kserve(node_cluster), "KServe") as running:
        yield running
