"""`launcher tensorboard NAME --backend k8s`: the job dir comes from the TFJob the real
apiserver stores (the chief's `--job-dir` argument); here a gs:// bucket of the GCS emulator,
as on GKE, read by TensorBoard through TensorFlow's own gs:// filesystem (the TLS proxy of
tests/support/gcs.py). The pods run on KWOK nodes: no trainer writes, the test does."""
from __future__ import annotations

from tests.support.launcher_process import run_launcher
from tests.support.tensorboard import serves_the_train_run, write_events


def test_tensorboard_reads_the_job_dir_from_the_tfjob(control_plane, gcs):
    job_dir = gcs.make_bucket("tensorboard-k8s") + "/jobs/board"
    write_events(f"{job_dir}/train", gcs.env)
    env = {**control_plane.env(), **gcs.env}
    env["no_proxy"] = env["NO_PROXY"] = control_plane.env()["NO_PROXY"]  # the apiserver, the emulator: loopback
    with control_plane.namespace("e2e-board", wait=False) as namespace:
        submitted = run_launcher(control_plane, "submit", "--backend", "k8s", "-n", namespace, "--name", "board",
                                 "--workers", "1", "--ps", "0", "--job-dir", job_dir, "--detach")
        assert submitted.returncode == 0, submitted.stdout + submitted.stderr
        serves_the_train_run(env, "board", job_dir, "--backend", "k8s", "-n", namespace)
        other = run_launcher(control_plane, "tensorboard", "nope", "--backend", "k8s", "-n", namespace)
        assert other.returncode == 1 and other.stderr.startswith("error: tfjob nope not found"), other.stderr
