"""Shared pytest setup. Fixture modules live in tests/support/ and are registered here."""
pytest_plugins: list[str] = []
pytest_plugins.append("tests.support.gcs")
pytest_plugins.append("tests.support.apiserver")
pytest_plugins.append("tests.support.local_jobs")
