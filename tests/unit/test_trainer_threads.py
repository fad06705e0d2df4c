"""trainer.runtime.default_threads: how the tasks of one machine share its cores when
--threads is 0 (the local backend's jobs; on a cluster only a CPU limit caps the pool)."""
from __future__ import annotations

from trainer.cluster import Cluster
from trainer.runtime import default_threads

LOCAL_PS = {"chief": ["127.0.0.1:1"], "ps": ["127.0.0.1:2"], "worker": ["127.0.0.1:3", "127.0.0.1:4"]}
LOCAL_SYNC = {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:3"]}
REMOTE_PS = {"chief": ["mnist-chief-0:2222"], "ps": ["mnist-ps-0:2222"], "worker": ["mnist-worker-0:2222"]}


def threads(role: str, spec: dict, cpus: int = 8, limit: int = 0) -> int:
    return default_threads(Cluster(role, 0, spec), cpus=cpus, limit=limit)


def test_parameter_server_tasks_on_one_machine():
    assert threads("worker", LOCAL_PS) == 4  # the workers split the cores
    assert threads("ps", LOCAL_PS) == 1  # it waits on the network
    assert threads("evaluator", LOCAL_PS) == 1  # a side-car evaluator runs beside the training
    # the coordinator evaluates on the test set (beside the training): every core for that
    assert threads("chief", LOCAL_PS) == 8
    assert threads("chief", LOCAL_PS, limit=2) == 2  # but within a CPU limit


def test_synchronous_training_splits_the_cores_between_chief_and_workers():
    assert threads("chief", LOCAL_SYNC) == threads("worker", LOCAL_SYNC) == 4
    assert threads("worker", LOCAL_SYNC, cpus=1) == 1


def test_on_a_cluster_only_a_cpu_limit_sizes_the_pool():
    assert threads("chief", REMOTE_PS) == 0  # TensorFlow's own default: the pod's cores
    assert threads("worker", REMOTE_PS, limit=3) == 3


def test_a_cpu_limit_is_read_from_the_cgroup_and_rounded_up(tmp_path):
    from trainer.runtime import cpu_limit

    cpu_max = tmp_path / "cpu.max"
    for content, cpus in [("150000 100000\n", 2), ("50000 100000\n", 1), ("400000 100000\n", 4), ("max 100000\n", None)]:
        cpu_max.write_text(content)
        assert cpu_limit(str(cpu_max)) == cpus, content
    assert cpu_limit(str(tmp_path / "none")) is None  # cgroup v1, or no cgroup file: no limit known


def test_a_pool_of_one_thread_still_gets_two_inter_op_threads():
    """Collectives and dataset iterators block inter-op threads: one alone can deadlock."""
    from trainer.runtime import session_config

    config = session_config(1)
    assert (config.intra_op_parallelism_threads, config.inter_op_parallelism_threads) == (1, 2)
    assert session_config(0).inter_op_parallelism_threads == 0  # TensorFlow's defaults
