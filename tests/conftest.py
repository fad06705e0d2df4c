"""Shared pytest setup. Fixture modules live in tests/support/ and are registered here."""
pytest_plugins: list[str] = []
pytest_plugins.append("tests.support.gcs")
pytest_plugins.append("tests.support.apiserver")
pytest_plugins.append("tests.support.local_jobs")
pytest_plugins.append("tests.support.cli_env")  # cli, cli_env, schema_cache
pytest_plugins.append("tests.support.trainer_cluster")  # mnist_dir
pytest_plugins.append("tests.support.taxi_data")  # taxi_dir
pytest_plugins.append("tests.support.serving")  # mnist_job
pytest_plugins.append("tests.support.packaging")  # dists
