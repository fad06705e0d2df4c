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
