"""Failures the trainer explains in one line instead of a traceback, with an exit code the
restart policies understand (training-operator's ExitCode policy restarts codes 128-255
and fails the job on 1-127; OnFailure restarts any non-zero code).

    128  retryable. A parameter server was lost: the chief (the coordinator, which sees it
         first) exits so that it is restarted; the restarted ps starts empty and the new
         chief restores the latest checkpoint into it. A ps that restarted so fast at the
         same address that no RPC failed shows up as InvalidArgument "unknown device" or
         "Unable to find the relevant tensor remote_handle" from /job:ps: the same loss
         (ClusterCoordinator's own _is_ps_failure reads it so). Storage still unavailable after
         TensorFlow's own retries (gfile retries 5xx/429 about 10 times, ~2-3 min) too.
         A MultiWorkerMirrored peer was lost (its collectives fail, or TensorFlow's health
         check aborts them): every worker exits so that all restart together and resume
         from the latest checkpoint, the same for all of them.
         A call to a worker failed inside TensorFlow's RPC layer with InternalError (seen in
         CI: "Unable to parse request", a request TensorFlow garbled while copying a result
         to the chief, when the chief made such copies from several threads at once; it
         makes them one at a time since: train/ps.py Call): ClusterCoordinator stops after
         it; the restarted chief resumes.
    1    permanent. Storage refused a request (403 Forbidden, 404, 400, ...): restarting
         cannot help; the job should fail with this line as its message.

Anything else is not explained here (the caller prints a traceback and exits 1).
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass

EXIT_PERMANENT = 1
EXIT_RETRYABLE = 128
_PS_TASK = re.compile(r"/job:ps/replica:\d+/task:(\d+)")
_PEER_TASK = re.compile(r"/job:(worker|chief)/replica:\d+/task:(\d+)")
_FROM_PS = "GRPC error information from remote target /job:ps"
_FROM_WORKER = re.compile(r"GRPC error information from remote target /job:worker/replica:\d+/task:(\d+)")
_PS_RESTARTED = ("unknown device", "unable to find the relevant tensor remote_handle")
_GS_PATH = re.compile(r"gs://[^\s'\",;\]]+")
_HTTP_CODE = re.compile(r"HTTP response code (\d+)")
_BODY_MESSAGE = re.compile(r'"message":\s*"([^"]*)"')
_NOISE = re.compile(r"\{\{function_node [^}]*\}\}\s*|\s*\[Op:[^\]]*\].*$|^\(\d+\) [A-Z_]+:\s*")
# lines before the cause: headers, and where a tf.function's op was defined (TensorFlow's
# "Detected at node ... (most recent call last):" and its File lines: the trainer's own code)
_HEADERS = re.compile(r"^(Graph execution error:|\d+ root error\(s\) found\.|Detected at node .*\(most recent call last\):"
                      r"|File \"[^\"]*\", line \d+, in .*)?$")


@dataclass(frozen=True)
class Failure:
    code: int
    line: str


def explain(error: BaseException, job_dir: str) -> Failure | None:
    """The one-line explanation of `error`, or None if it is not one of the above."""
    # TensorFlow's error classes, if it is loaded at all (a server may have loaded only part of it: task.serve)
    errors = sys.modules.get("tensorflow.python.framework.errors_impl")
    error = getattr(error, "original_exception", None) or error  # ClosureInputError, ClosureAbortedError
    if errors is None or not isinstance(error, errors.OpError):
        return None
    return (lost_ps(error, errors) or storage(error, job_dir, errors) or lost_peer(error, errors)
            or failed_call(error, errors))


def summary(error: BaseException, limit: int = 200) -> str:
    """The first meaningful line of a TensorFlow error message."""
    lines = (_NOISE.sub("", line.strip()) for line in str(error).splitlines())
    text = next((line for line in lines if not _HEADERS.match(line)), "")
    return text if len(text) <= limit else text[:limit] + "..."


def ps_restarted(error: BaseException, errors) -> bool:
    """A ps replaced at the same address between two RPCs (see the module doc)."""
    text = str(error)
    return (isinstance(error, errors.InvalidArgumentError) and _FROM_PS in text
            and any(sign in text.lower() for sign in _PS_RESTARTED))


def lost_ps(error: BaseException, errors) -> Failure | None:
    tasks = sorted(set(_PS_TASK.findall(str(error))), key=int)
    retryable = (errors.UnavailableError, errors.AbortedError, errors.CancelledError)
    if not tasks or not (isinstance(error, retryable) or ps_restarted(error, errors)):
        return None
    names = ", ".join(f"ps/{task}" for task in tasks)
    return Failure(EXIT_RETRYABLE,
                   f"lost parameter server {names} ({type(error).__name__}: {summary(error)}); "
                   f"exiting {EXIT_RETRYABLE} (retryable): the restarted chief resumes from the latest checkpoint")


def lost_peer(error: BaseException, errors) -> Failure | None:
    """A worker (or chief) of MultiWorkerMirrored training gone: retryable."""
    peers = sorted({f"{job}/{task}" for job, task in _PEER_TASK.findall(str(error))})
    retryable = (errors.UnavailableError, errors.AbortedError, errors.CancelledError,
                 errors.DeadlineExceededError)
    if not peers or not isinstance(error, retryable):
        return None
    return Failure(EXIT_RETRYABLE,
                   f"lost peer {', '.join(peers)} ({type(error).__name__}: {summary(error)}); exiting "
                   f"{EXIT_RETRYABLE} (retryable): restarted, the workers resume from the latest checkpoint")


def failed_call(error: BaseException, errors) -> Failure | None:
    """An InternalError from a worker's side of an RPC (see the module doc): retryable."""
    tasks = sorted(set(_FROM_WORKER.findall(str(error))), key=int)
    if not tasks or not isinstance(error, errors.InternalError):
        return None
    names = ", ".join(f"worker/{task}" for task in tasks)
    return Failure(EXIT_RETRYABLE,
                   f"a call on {names} failed ({type(error).__name__}: {summary(error)}); exiting "
                   f"{EXIT_RETRYABLE} (retryable): the restarted chief resumes from the latest checkpoint")


def storage_path(text: str, job_dir: str) -> str | None:
    """The gs:// or job-dir path an error message names."""
    match = _GS_PATH.search(text)
    if match:
        return match[0].rstrip(".")
    match = re.search(re.escape(job_dir.rstrip("/")) + r"[^\s'\",;]*", text) if job_dir else None
    return match[0] if match else None


def storage(error: BaseException, job_dir: str, errors) -> Failure | None:
    text = str(error)
    path = storage_path(text, job_dir)
    if path is None:
        return None
    http, message = _HTTP_CODE.search(text), _BODY_MESSAGE.search(text)
    what = type(error).__name__ + (f", HTTP {http[1]}" if http else "")
    detail = message[1] if message else summary(error, 120)
    if isinstance(error, (errors.AbortedError, errors.UnavailableError, errors.DeadlineExceededError)):
        return Failure(EXIT_RETRYABLE, f"storage request for {path} failed ({what}) after TensorFlow's retries; "
                                       f"exiting {EXIT_RETRYABLE} (retryable)")
    return Failure(EXIT_PERMANENT, f"storage request for {path} failed ({what}): {detail}; restarting will "
                                   "not help: check that the path exists and that the job may read and write it")
