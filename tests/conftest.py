"""Shared pytest setup. Fixture modules live in tests/support/ and are registered here."""
import signal

# Tests send real SIGINTs (Ctrl-C) to this process and to launchers they start. A run started
# with SIGINT ignored (a background job of a script, a CI runner's wrapper) passed that on:
# Python keeps an ignored SIGINT ignored, and so do the processes it starts; those tests then
# waited out their bounds and failed. As an interactive shell starts it: Python's own handler,
# which the processes started here get back as the default.
signal.signal(signal.SIGINT, signal.default_int_handler)
pytest_plugins: list[str] = []
pytest_plugins.append("tests.support.gcs")
pytest_plugins.append("tests.support.apiserver")
pytest_plugins.append("tests.support.local_jobs")
pytest_plugins.append("tests.support.cli_env")  # cli, cli_env, schema_cache
pytest_plugins.append("tests.support.trainer_cluster")  # mnist_dir
pytest_plugins.append("tests.support.taxi_data")  # taxi_dir
pytest_plugins.append("tests.support.serving")  # mnist_job
pytest_plugins.append("tests.support.packaging")  # dists
