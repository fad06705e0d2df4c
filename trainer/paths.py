"""Where things live in --job-dir (the data dirs are the models': trainer.models.default_data_dir).

    JOB_DIR/checkpoints/ckpt-<step>   tf.train.CheckpointManager
    JOB_DIR/train/                    TensorBoard events of training
    JOB_DIR/eval/                     TensorBoard events of the chief's evaluation
    JOB_DIR/evaluator/                TensorBoard events of the side-car evaluator
    JOB_DIR/export/<timestamp>/       SavedModel (serving_default)
    JOB_DIR/done.json                 the chief's "job finished" marker (see lifecycle.py)
"""
from __future__ import annotations

def join(job_dir: str, *names: str) -> str:
    """Join for local paths and gs:// URLs alike."""
    return "/".join([job_dir.rstrip("/"), *names])


def checkpoints(job_dir: str) -> str:
    return join(job_dir, "checkpoints")


def events(job_dir: str, name: str) -> str:
    return join(job_dir, name)


def exports(job_dir: str) -> str:
    return join(job_dir, "export")


def done_marker(job_dir: str) -> str:
    return join(job_dir, "done.json")
