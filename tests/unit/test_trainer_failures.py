"""trainer.failures: which TensorFlow errors are a lost ps (retryable exit), on the texts
TensorFlow's gRPC runtime produces."""
from __future__ import annotations

import pytest
import tensorflow as tf

from trainer import failures

JOB_DIR = "/runs/mnist"
FROM_PS = ("\nAdditional GRPC error information from remote target /job:ps/replica:0/task:1 while calling "
           "/tensorflow.eager.EagerService/Enqueue:\n:{\"created\":\"@1706768288.511248869\"}")


@pytest.mark.parametrize("message", [
    "Unable to find the relevant tensor remote_handle: Op ID: 3940, Output num: 0" + FROM_PS,
    "Unknown device: /job:ps/replica:0/task:1/device:CPU:0" + FROM_PS,
])
def test_a_ps_restarted_at_the_same_address_is_a_lost_ps(message):
    failure = failures.explain(tf.errors.InvalidArgumentError(None, None, message), JOB_DIR)
    assert failure is not None and failure.code == failures.EXIT_RETRYABLE == 128
    assert failure.line.startswith("lost parameter server ps/1 (InvalidArgumentError: ")
    assert "\n" not in failure.line


def test_a_lost_ps_wrapped_by_the_coordinator_is_explained():
    class ClosureAbortedError(Exception):  # the coordinator's wrapper: the cause in original_exception
        def __init__(self, original):
            super().__init__(str(original))
            self.original_exception = original

    lost = tf.errors.UnavailableError(None, None, "failed to connect to all addresses" + FROM_PS)
    assert failures.explain(ClosureAbortedError(lost), JOB_DIR).code == 128


def test_other_invalid_arguments_are_not_a_lost_ps():
    plain = tf.errors.InvalidArgumentError(None, None, "Unknown device: /job:ps/replica:0/task:1 (no RPC)")
    assert failures.explain(plain, JOB_DIR) is None  # not from a ps over gRPC: a traceback, exit 1
    shape = tf.errors.InvalidArgumentError(None, None, "Incompatible shapes: [16,10] vs. [32,10]" + FROM_PS)
    assert failures.explain(shape, JOB_DIR) is None


def test_a_lost_mirrored_peer_is_retryable():
    message = ("Collective ops is aborted by: cluster check alive failed, /job:worker/replica:0/task:1 is down\n"
               "The error could be from a previous operation. Restart your program to reset. [Op:CollectiveReduceV2]")
    failure = failures.explain(tf.errors.UnavailableError(None, None, message), JOB_DIR)
    assert failure.code == 128 and failure.line.startswith("lost peer worker/1 (UnavailableError: Collective ops")


def test_a_lost_mirrored_peer_is_explained_by_its_cause_not_where_the_op_was_defined():
    """The text of a worker whose peer was SIGKILLed in a real 2-worker job (TensorFlow 2.21):
    the line used to say `(UnavailableError: Detected at node while/adam/CollectiveReduceV2
    defined at (most recent call last):)`, the header of the op's traceback."""
    frames = "".join(f'  File "/work/main/trainer/{name}", line {line}, in {function}\n\n' for name, line, function in
                     [("task.py", 184, "train"), ("train/sync.py", 87, "run"), ("train/step.py", 190, "steps")])
    message = ("Graph execution error:\n\nDetected at node while/adam/CollectiveReduceV2 defined at (most recent call "
               "last):\n" + frames + "Collective ops is aborted by: recvmsg:Connection reset by peer\nAdditional GRPC "
               "error information from remote target /job:worker/replica:0/task:1 while calling "
               "/tensorflow.WorkerService/RecvBuf:\n:UNKNOWN:Error received from peer  {grpc_message:\"recvmsg:Connection "
               "reset by peer\", grpc_status:14}\nThe error could be from a previous operation. Restart your program to "
               "reset.\n\t [[{{node while/adam/CollectiveReduceV2}}]] [Op:__inference_train_voting_1130]")
    failure = failures.explain(tf.errors.UnavailableError(None, None, message), JOB_DIR)
    assert failure.code == 128 and "\n" not in failure.line
    assert failure.line.startswith("lost peer worker/1 (UnavailableError: Collective ops is aborted by: "
                                   "recvmsg:Connection reset by peer); exiting 128 (retryable)"), failure.line


def test_an_internal_error_on_a_workers_side_of_a_call_is_retryable():
    """The text of a CI run: TensorFlow garbled a request while copying a result to the chief."""
    message = ("2 root error(s) found.\n  (0) INTERNAL: {{function_node __wrapped__Identity_device_/job:chief/replica:0/"
               "task:0/device:CPU:0}} Unable to parse request\nAdditional GRPC error information from remote target "
               "/job:worker/replica:0/task:0/device:CPU:0 while calling /tensorflow.eager.EagerService/"
               "RunComponentFunction:\n:UNKNOWN:Error received from peer  {grpc_message:\"Unable to parse request\", "
               "grpc_status:13}\n  (1) CANCELLED: RecvFromRemoteAsync is cancelled.\n0 successful operations.")
    failure = failures.explain(tf.errors.InternalError(None, None, message), JOB_DIR)
    assert failure.code == 128 and failure.line.startswith("a call on worker/0 failed (InternalError: Unable to parse")
    assert "\n" not in failure.line
    local = tf.errors.InternalError(None, None, "Blas GEMM launch failed")  # no worker's RPC: not explained
    assert failures.explain(local, JOB_DIR) is None


# The texts of TensorFlow's GCS filesystem (curl_http_request.cc, retrying_utils.cc): after its
# own retries it raises AbortedError naming the last failure; a refusal is raised as it comes.
DENIED_BODY = ('{\n  "error": {\n    "code": 403,\n    "message": "trainer@p.iam.gserviceaccount.com does not have '
               'storage.objects.create access to the Google Cloud Storage object.",\n    "errors": []\n  }\n}\n')
DENIED = ("Error executing an HTTP request: HTTP response code 403 with body '" + DENIED_BODY + "'\n\t when initiating "
          "an upload to gs://bucket/job/checkpoints/ckpt-10_temp/part-00000-of-00001.index.")


def test_a_storage_refusal_is_permanent_in_one_line_naming_the_path_and_the_reason():
    failure = failures.explain(tf.errors.PermissionDeniedError(None, None, DENIED), "gs://bucket/job")
    assert failure.code == failures.EXIT_PERMANENT == 1  # ExitCode: the job fails instead of restarting
    assert failure.line == (
        "storage request for gs://bucket/job/checkpoints/ckpt-10_temp/part-00000-of-00001.index failed "
        "(PermissionDeniedError, HTTP 403): trainer@p.iam.gserviceaccount.com does not have storage.objects.create "
        "access to the Google Cloud Storage object.; restarting will not help: check that the path exists and that "
        "the job may read and write it")


def test_a_local_job_dir_refused_is_explained_by_its_path():
    error = tf.errors.PermissionDeniedError(None, None, "/runs/mnist/checkpoints/checkpoint.tmp123; Permission denied")
    failure = failures.explain(error, "/runs/mnist/")
    assert failure.code == 1 and failure.line.startswith(
        "storage request for /runs/mnist/checkpoints/checkpoint.tmp123 failed (PermissionDeniedError): "
        "/runs/mnist/checkpoints/checkpoint.tmp123; Permission denied; restarting will not help")
    assert failures.explain(error, "/other/job") is None  # no path of the job's: a traceback


@pytest.mark.parametrize("kind", [tf.errors.AbortedError, tf.errors.UnavailableError, tf.errors.DeadlineExceededError])
def test_storage_still_failing_after_tensorflows_retries_is_retryable(kind):
    message = ("All 10 retry attempts failed. The last failure: Error executing an HTTP request: HTTP response code 503 "
               "with body 'Service Unavailable'\n\t when reading metadata of gs://bucket/job/done.json")
    failure = failures.explain(kind(None, None, message), "gs://bucket/job")
    assert failure.code == failures.EXIT_RETRYABLE == 128
    assert failure.line == (f"storage request for gs://bucket/job/done.json failed ({kind.__name__}, HTTP 503) after "
                            "TensorFlow's retries; exiting 128 (retryable)")


def test_a_ps_call_cancelled_and_a_peer_past_its_deadline_are_lost_tasks():
    cancelled = tf.errors.CancelledError(None, None, "RPC cancelled" + FROM_PS)
    assert failures.explain(cancelled, JOB_DIR).line.startswith("lost parameter server ps/1 (CancelledError: ")
    late = tf.errors.DeadlineExceededError(None, None, "Deadline Exceeded /job:worker/replica:0/task:2 check alive")
    failure = failures.explain(late, JOB_DIR)
    assert failure.code == 128 and failure.line.startswith("lost peer worker/2 (DeadlineExceededError: ")


def test_the_lost_tasks_are_named_in_numeric_order_and_a_long_cause_is_cut_short():
    cause = "x" * 300
    message = (cause + "\n/job:ps/replica:0/task:10 and /job:ps/replica:0/task:2 unreachable" + FROM_PS)
    failure = failures.explain(tf.errors.UnavailableError(None, None, message), JOB_DIR)
    assert failure.line.startswith("lost parameter server ps/1, ps/2, ps/10 (UnavailableError: " + "x" * 200 + "...); ")


def test_the_trainer_exits_with_the_failures_code_and_its_one_line_on_stderr(monkeypatch, capsys):
    from trainer import flags, task
    from trainer.cluster import Cluster

    args = flags.parse(["--job-dir", "gs://bucket/job"])
    single = Cluster(role="chief", index=0, spec={})

    def denied(*_):
        raise tf.errors.PermissionDeniedError(None, None, DENIED)

    monkeypatch.setattr(task, "compute", denied)
    assert task.run_role(args, single) == 1
    out, err = capsys.readouterr()
    assert err == f"trainer: {failures.explain(tf.errors.PermissionDeniedError(None, None, DENIED), args.job_dir).line}\n"
    assert "storage request" not in out

    def unexplained(*_):
        raise tf.errors.InternalError(None, None, "Blas GEMM launch failed")

    monkeypatch.setattr(task, "compute", unexplained)
    with pytest.raises(tf.errors.InternalError):  # the caller's traceback, exit 1
        task.run_role(args, single)
