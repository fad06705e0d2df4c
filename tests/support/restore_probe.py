"""Restore a job dir's latest checkpoint the way the chief does, into a parameter-server
layout of --ps tasks, and report every restored variable against the stored value:

    python -m tests.support.restore_probe JOB_DIR --model mnist --ps 1

The ps and worker servers are real `tf.distribute.Server`s, started in this process (as
TensorFlow's own create_in_process_cluster does); the model, optimizer and checkpoint
code are the trainer's. Prints one JSON object:

    {"checkpoint": PATH, "variables": {KEY: {"equal": bool, "nonzero": bool, "shards": N, "value": first}},
     "slots": {KEY: bool}}

`shards`: over how many ps tasks the restored variable lies here. `slots`: for each Adam
slot of a weight, whether the stored whole slot is, row block by row block, the slot that
Adam updates for each shard of the weight here (found by the optimizer's own index of
that shard, as the training step finds it), i.e. each shard's momentum lies at that
shard's rows. Run it in a subprocess (the test process stays free of TensorFlow).
"""
from __future__ import annotations

import argparse
import json

import numpy as np
import tensorflow as tf

from trainer import checkpoints, flags, models, variables
from trainer.train import ps as train_ps
from trainer.train import step as train_step
from trainer.cluster import Cluster
from tests.support.ports import free_port
from tests.support.trainer_cluster import LOCAL

SERVERS: list[tf.distribute.Server] = []  # kept alive for the life of the process


def cluster(ps: int) -> Cluster:
    """1 worker and `ps` ps servers in this process; this process is the chief."""
    spec = {role: [f"{LOCAL}:{free_port()}" for _ in range(count)]
            for role, count in (("chief", 1), ("ps", ps), ("worker", 1))}
    for role in ("ps", "worker"):
        for index in range(len(spec[role])):
            SERVERS.append(tf.distribute.Server(tf.train.ClusterSpec(spec), job_name=role, task_index=index,
                                                protocol="grpc", start=True))
    return Cluster(role="chief", index=0, spec=spec)


def shards(variable) -> int:
    parts = getattr(variable, "variables", None) or [variable]
    return len({part.device.split("/device")[0] for part in parts})


def slots_aligned(path: str, model, optimizer, keys: dict[str, str]) -> dict[str, bool]:
    """{slot key: whether the stored slot is the concatenation, in the weight's row order,
    of the slots Adam updates for the weight's shards} (see the module doc); `keys`:
    {readable key: checkpoint key}."""
    aligned = {}
    for attribute, kind in checkpoints.SLOTS.items():
        slots = getattr(optimizer, attribute, None) or []
        for weight in (model.trainable_variables if slots else []):
            key = f"optimizer/{weight.path.replace('/', '.')}.{kind}"
            used = [tf.convert_to_tensor(variables.underlying(slots[optimizer._get_variable_index(part)])).numpy()
                    for part in variables.parts(weight)]
            aligned[key] = bool(np.array_equal(tf.train.load_variable(path, keys[key]), np.concatenate(used)))
    return aligned


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("job_dir")
    parser.add_argument("--model", default="mnist")
    parser.add_argument("--ps", type=int, default=1)
    options = parser.parse_args()
    args = flags.parse(["--job-dir", options.job_dir, "--model", options.model])
    strategy = train_ps.strategy_for(cluster(options.ps), args.ps_min_shard_bytes)
    with strategy.scope():
        model = models.build(args.model)
        optimizer = train_step.build_optimizer(model, train_step.learning_rate(args))
        step = train_step.global_step()
    parts = checkpoints.groups(model, optimizer, step)
    path = checkpoints.Checkpointer(args.job_dir, parts, args.model, writer=False).restore()
    report = {}
    for key, variable in checkpoints.entries(parts).items():
        stored = tf.train.load_variable(path, key)
        restored = tf.convert_to_tensor(variable).numpy()
        report[checkpoints.readable(key)] = {
            "equal": bool(np.array_equal(stored, restored)), "nonzero": bool(np.any(stored)),
            "shards": shards(variable), "value": float(np.ravel(restored)[0])}
    keys = {checkpoints.readable(key): key for key in checkpoints.entries(parts)}
    print(json.dumps({"checkpoint": path, "variables": report, "slots": slots_aligned(path, model, optimizer, keys)}))


if __name__ == "__main__":
    main()
