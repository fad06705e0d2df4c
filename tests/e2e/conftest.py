"""e2e tests run the launcher CLI, kubectl and helm against the real control plane of
tests/support/controlplane/ (built by scripts/controlplane/build.sh)."""
from tests.support.controlplane import control_plane  # noqa: F401  (session fixture)


def pytest_collection_modifyitems(items):
    import pytest

    for item in items:
        if "tests/e2e/" in item.nodeid.replace("\\", "/"):
            item.add_marker(pytest.mark.e2e)


def pytest_configure(config):
    config.addinivalue_line("markers", "e2e: runs against the real control plane (scripts/controlplane/build.sh)")
