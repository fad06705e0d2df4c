"""trainer.cluster: TF_CONFIG exactly as training-operator writes it (launcher.tfconfig)."""
from __future__ import annotations

import json

import pytest

from launcher.render import render
from launcher.spec import JobSpec, ReplicaSpec
from launcher.tfconfig import replicas, tf_config
from trainer.cluster import Cluster, ConfigError, bypass_grpc_proxy, parse
from trainer.cluster import tf_config as tf_config_of


def operator_configs(counts: dict[str, int]) -> dict[tuple[str, int], str | None]:
    tfjob = render(JobSpec(name="mnist", replicas={r: ReplicaSpec(n) for r, n in counts.items()}))
    return {(rtype, index): tf_config(tfjob, rtype, index) for rtype, index in replicas(tfjob)}


def test_no_tf_config_is_one_process():
    for text in (None, "", "  ", "{}"):
        cluster = parse(text)
        assert (cluster.role, cluster.index, cluster.mode, cluster.is_chief) == ("chief", 0, "single", True)


def test_every_replica_of_an_operator_ps_job_finds_its_role():
    configs = operator_configs({"Chief": 1, "PS": 2, "Worker": 2, "Evaluator": 1})
    for (rtype, index), text in configs.items():
        cluster = parse(text)
        assert (cluster.role, cluster.index) == (rtype.lower(), index)
        assert cluster.mode == "ps"
        assert cluster.is_chief == (rtype == "Chief")
        assert cluster.chief_address == "mnist-chief-0.default.svc:2222"
        assert "evaluator" not in cluster.spec


def test_workers_without_ps_are_synchronous_and_worker_0_leads():
    configs = operator_configs({"Worker": 3})
    clusters = [parse(configs[("Worker", i)]) for i in range(3)]
    assert [c.mode for c in clusters] == ["sync"] * 3
    assert [c.is_chief for c in clusters] == [True, False, False]
    assert clusters[0].chief_address is None


def test_master_is_the_chief():
    text = json.dumps({"cluster": {"master": ["m:1"], "ps": ["p:1"], "worker": ["w:1"]},
                       "task": {"type": "master", "index": 0}, "environment": "cloud"})
    cluster = parse(text)
    assert cluster.role == "chief" and cluster.spec["chief"] == ["m:1"] and "master" not in cluster.spec


def test_hosts_lists_every_member_once():
    cluster = parse(operator_configs({"Chief": 1, "PS": 1, "Worker": 2})[("PS", 0)])
    assert cluster.hosts() == sorted(["mnist-chief-0.default.svc", "mnist-ps-0.default.svc",
                                      "mnist-worker-0.default.svc", "mnist-worker-1.default.svc"])


def test_a_cluster_of_one_is_one_process_and_a_task_without_index_is_the_first():
    cluster = parse('{"cluster": {"chief": ["c:1"]}, "task": {"type": "chief"}}')
    assert (cluster.role, cluster.index, cluster.mode, cluster.is_chief) == ("chief", 0, "single", True)
    assert parse('{"cluster": {"worker": ["w:1"]}, "task": {"type": "worker", "index": 0}}').mode == "single"


def test_the_normalized_tf_config_names_master_chief_for_tensorflows_readers():
    cluster = parse('{"cluster": {"master": ["m:1"], "worker": ["w:1"]}, "task": {"type": "master"}}')
    assert json.loads(tf_config_of(cluster)) == {"cluster": {"chief": ["m:1"], "worker": ["w:1"]},
                                                 "task": {"type": "chief", "index": 0}, "environment": "cloud"}


def test_hosts_of_ipv6_addresses_keep_their_colons():
    cluster = Cluster(spec={"worker": ["[fd00::1]:2222", "[fd00::2]:2222"]})
    assert cluster.hosts() == ["[fd00::1]", "[fd00::2]"]


BAD = {
    "malformed JSON": ('{"cluster": ', "malformed JSON"),
    "not an object": ("[1, 2]", "JSON object"),
    "unknown task role": ('{"cluster": {"chief": ["c:1"]}, "task": {"type": "boss", "index": 0}}', "'boss'"),
    "unknown cluster role": ('{"cluster": {"chief": ["c:1"], "boss": ["b:1"]}, "task": {"type": "chief"}}', "'boss'"),
    "index out of range": ('{"cluster": {"chief": ["c:1"], "worker": ["w:1"]}, "task": {"type": "worker", "index": 1}}',
                           "out of range"),
    "negative index": ('{"cluster": {"worker": ["w:1"]}, "task": {"type": "worker", "index": -1}}', "task.index"),
    "role not in cluster": ('{"cluster": {"worker": ["w:1"]}, "task": {"type": "ps", "index": 0}}', "out of range"),
    "ps without chief": ('{"cluster": {"ps": ["p:1"], "worker": ["w:1"]}, "task": {"type": "ps", "index": 0}}',
                         "ps without a chief"),
    "ps without workers": ('{"cluster": {"chief": ["c:1"], "ps": ["p:1"]}, "task": {"type": "chief", "index": 0}}',
                           "ps without workers"),
    "evaluator in cluster": ('{"cluster": {"chief": ["c:1"], "evaluator": ["e:1"]}, "task": {"type": "chief"}}',
                             "evaluator must not be in the cluster"),
    "two chiefs": ('{"cluster": {"chief": ["c:1", "c:2"]}, "task": {"type": "chief"}}', "at most one chief"),
    "chief and master": ('{"cluster": {"chief": ["c:1"], "master": ["m:1"]}, "task": {"type": "chief"}}', "keep one"),
    "address without port": ('{"cluster": {"worker": ["w"]}, "task": {"type": "worker"}}', "host:port"),
    "no task": ('{"cluster": {"worker": ["w:1"]}}', "task"),
    "empty cluster": ('{"cluster": {}, "task": {"type": "chief", "index": 0}}', "must be a non-empty object"),
    "boolean index": ('{"cluster": {"worker": ["w:1", "v:1"]}, "task": {"type": "worker", "index": true}}',
                      "TF_CONFIG task.index: True is not an integer >= 0"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_tf_config_is_one_line_naming_the_field(case):
    text, expected = BAD[case]
    with pytest.raises(ConfigError) as error:
        parse(text)
    message = str(error.value)
    assert message.startswith("TF_CONFIG") and "\n" not in message
    assert expected in message


def test_grpc_bypasses_a_proxy_for_cluster_hosts():
    cluster = Cluster(role="worker", index=0, spec={"chief": ["c.svc:2222"], "ps": ["p.svc:2222"], "worker": ["w:1"]})
    environ = {"https_proxy": "http://proxy:3128", "no_proxy": "internal.example"}
    bypass_grpc_proxy(cluster, environ)
    assert environ["no_grpc_proxy"].split(",") == ["internal.example", "127.0.0.1", "localhost", "c.svc", "p.svc", "w"]
    assert environ["no_proxy"] == "internal.example"  # libcurl (gs://) still uses the proxy


def test_no_proxy_means_nothing_to_bypass():
    environ: dict[str, str] = {}
    bypass_grpc_proxy(Cluster(spec={"worker": ["w:1", "v:1"]}), environ)
    assert environ == {}


@pytest.mark.parametrize("spec", [
    {"worker": ["w0:1", "w1:1"]},
    {"chief": ["c:1"], "worker": ["w0:1", "w1:1", "w2:1"]},
    {"chief": ["c:1"], "worker": ["w0:1"], "evaluator": ["e:1"]},
])
def test_a_mirrored_workers_input_pipeline_is_numbered_as_tensorflow_numbers_it(spec):
    """sync.input_context against TensorFlow's own multi_worker_util.id_in_cluster (what
    distribute_datasets_from_function gives MultiWorkerMirrored workers)."""
    import tensorflow as tf
    from tensorflow.python.distribute import multi_worker_util

    from trainer.train.sync import input_context

    members = [(role, index) for role in ("chief", "worker") for index in range(len(spec.get(role, [])))]
    ids = []
    for role, index in members:
        context = input_context(Cluster(role, index, spec), tf.distribute.get_strategy())
        assert context.input_pipeline_id == multi_worker_util.id_in_cluster(spec, role, index)
        assert context.num_input_pipelines == multi_worker_util.worker_count(spec, role) == len(members)
        ids.append(context.input_pipeline_id)
    assert sorted(ids) == list(range(len(members)))
