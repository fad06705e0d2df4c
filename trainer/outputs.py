"""What the trainer's commands write (`--out`) and how they end: why a local path or a gs://
URL cannot be written, said before any work (it was a traceback after the download or the
reading, or for a missing bucket a wait without end; stdout (`-`) and other URLs are left to
the write); a write that fails (a full disk) as one line naming the flag and the path
(`writing`), a file written whole or not at all (`write_text`); Ctrl-C and a failing GCS as
the launcher's commands and the trainer answer them (`command`)."""
from __future__ import annotations

import contextlib
import errno
import functools
import importlib.util
import json
import os
import secrets
import stat
import sys

from trainer import failures, paths

EXIT_FAILED, EXIT_INTERRUPTED = 1, 130  # the launcher's codes (launcher/cli)
EXIT_USAGE = 2
NO_TENSORFLOW = "TensorFlow is not installed, and the trainer runs on it; pip install 'tfjob-launcher[trainer]'"


def tensorflow_missing() -> bool:
    """The package's base install (the launcher's dependencies): no TensorFlow, no numpy."""
    return importlib.util.find_spec("tensorflow") is None or importlib.util.find_spec("numpy") is None


def require_tensorflow(module: str, label: str) -> None:
    """Called at the top of a trainer command's module, before its imports of numpy and
    TensorFlow: run as the program (`module` is "__main__") without them, one line naming
    the extra and exit 2, not a ModuleNotFoundError traceback (`--help` too: it needs them
    to import). Imported as a library, nothing."""
    if module == "__main__" and tensorflow_missing():
        print(f"{label}: {NO_TENSORFLOW}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def unwritable_file(out: str, example: str) -> str | None:
    """Why the local file `out` cannot be written, or None; `example`: the file name offered
    in `out` when it is a directory."""
    if out == "-":
        return None
    if paths.url_like(out):
        return unwritable_url(out, example)
    if os.path.isdir(out):
        return f"{out} is a directory; give a file in it, e.g. {os.path.join(out, example)}"
    folder = os.path.dirname(out) or "."
    if problem := _blocked(folder):
        return problem
    if not os.path.isdir(folder):  # its write makes no folders
        return f"its folder {folder} does not exist; create it or give another path"
    return None


def unwritable_dir(out: str) -> str | None:
    """Why the local directory `out` cannot be written into, or None; a missing one is made
    with its parents (tf.io.gfile.makedirs)."""
    if out == "-":
        return None
    if paths.url_like(out):
        return unwritable_url(out)
    return _blocked(out.rstrip("/") or "/")


def credentials_problem() -> str | None:
    """Why $GOOGLE_APPLICATION_CREDENTIALS, when set, names no credentials file, or None:
    TensorFlow's gs:// filesystem then goes on without credentials (anonymously: HTTP 401 from
    Cloud Storage, whose message does not name the variable)."""
    name = "GOOGLE_APPLICATION_CREDENTIALS"
    given = os.environ.get(name)
    if not given:
        return None
    fix = f"point it at a service account key file, or unset it to use gcloud's (gcloud auth application-default login)"
    try:
        with open(given, "rb") as handle:
            key = json.loads(handle.read(1 << 20))
    except FileNotFoundError:
        return f"{name}={given}: no such file; {fix}"
    except OSError as error:
        return f"{name}={given}: cannot read it ({error.strerror}); {fix}"
    except ValueError:
        return f"{name}={given} is not a JSON credentials file; {fix}"
    if not isinstance(key, dict) or "type" not in key:
        return f"{name}={given} is not a credentials file (no \"type\"); {fix}"
    return None


def _bucket_exists(tf, bucket: str) -> bool:
    """Whether `bucket` exists; True when these credentials may not read its metadata
    (storage.buckets.get: roles/storage.objectAdmin, the README's GKE role, lacks it, and
    writes objects all the same): the object checks after this one ask what they may do."""
    try:
        return tf.io.gfile.exists(bucket)
    except (tf.errors.PermissionDeniedError, tf.errors.UnauthenticatedError):
        return True


def absent_bucket(location: str) -> str | None:
    """"bucket gs://B does not exist" when `location` is in a gs:// bucket that does not
    exist (an export read from it was "no SavedModel in ...", naming no bucket), else None
    (a local path, a bucket there, or one that cannot be asked: the read says why)."""
    if not location.startswith(paths.GCS):
        return None
    import tensorflow as tf

    try:
        exists = _bucket_exists(tf, paths.bucket(location))
    except tf.errors.OpError:
        return None
    return None if exists else f"bucket {paths.bucket(location)} does not exist"


_TRANSIENT = ("AbortedError", "UnavailableError", "DeadlineExceededError")


def unwritable_url(out: str, example: str | None = None) -> str | None:
    """Why the gs:// folder `out` (a file when `example`, the name offered when `out` is a
    folder, is given) cannot be written, or None; other URLs are left to the write. Asked of
    the bucket before any work: a malformed URL (paths.url_problem); a scheme this TensorFlow
    has no filesystem for (s3:// without tensorflow-io); a bucket that does not
    exist (TensorFlow's gs:// filesystem made folders in it without end: its makedirs looks
    for an existing parent up to the bucket and past it); a folder, or a folder on the way to
    it, that is a file (an object); a file that is a folder; a bucket that cannot be read (no
    or wrong credentials, permission denied: the error's first line). A transient error
    (5xx, 429 after TensorFlow's own retries, GCS unreachable) is raised as it is: the caller
    fails as it fails on any storage error (exit 128, retryable: trainer.failures, `command`)."""
    if problem := paths.url_problem(out):
        return problem
    import tensorflow as tf

    if not out.startswith(paths.GCS):  # s3://, hdfs://: a filesystem of tensorflow-io's, if installed
        try:
            tf.io.gfile.exists(out)
        except tf.errors.UnimplementedError as error:  # none: the write failed after all the work
            return (f"cannot write {out} ({failures.summary(error, 160)}); this TensorFlow writes local paths and "
                    "gs:// only: give one of those")
        except tf.errors.OpError:  # left to the write, which names it
            pass
        return None

    if problem := credentials_problem():
        return problem
    bucket, target = paths.bucket(out), out.rstrip("/")
    try:
        if not _bucket_exists(tf, bucket):
            return (f"bucket {bucket} does not exist; create it "
                    f"(gcloud storage buckets create {bucket}) or give another")
        if example is not None and (target == bucket or tf.io.gfile.isdir(target)):
            return f"{out} is a folder; give a file in it, e.g. {target}/{example}"
        folder = target if example is None else target.rsplit("/", 1)[0]
        while len(folder) > len(bucket):  # the folders that will be made on the way, up to the bucket
            if tf.io.gfile.exists(folder) and not tf.io.gfile.isdir(folder):
                return f"{folder} is a file (an object), not a folder; give another path"
            folder = folder.rsplit("/", 1)[0]
    except tf.errors.OpError as error:
        if type(error).__name__ in _TRANSIENT:  # TensorFlow's message names no path: the bucket's
            raise type(error)(None, None, f"reading {bucket}; {error.message}") from None
        return (f"cannot read {bucket} ({type(error).__name__}: {failures.summary(error, 160)}); give credentials "
                "that may read and write it (GOOGLE_APPLICATION_CREDENTIALS, gcloud auth application-default "
                "login, the pod's service account)")
    return None


def _blocked(path: str) -> str | None:
    """Why `path`, or the dirs made on the way to it, cannot be written: the nearest of them
    that exists is a file, or a directory this process cannot write in."""
    base = path
    while not os.path.lexists(base):
        base = os.path.dirname(base) or "."
    if not os.path.isdir(base):
        return f"{base} is not a directory; give another path"
    if not os.access(base, os.W_OK | os.X_OK):
        return f"cannot write in {base} (permission denied); give a path you can write in"
    return None


class WriteError(Exception):
    """An output that could not be written; the message names the flag and the path."""


def command(label: str):
    """Decorator of a trainer command's main(argv): Ctrl-C (KeyboardInterrupt, wherever it
    lands before main returns) is the line `Interrupted.` on stderr and exit 130, as the
    launcher's commands, not a traceback; a WriteError is `LABEL: its message`, exit 1.
    What was being written is left as it was: the writes go to a temporary name first
    (trainer.data's staging dir, write_text's temporary file), removed on the way out.
    stdout, as the launcher's (launcher/__main__.py): its reader gone (`--out - | head`) ends
    the command quietly, exit 0; a stdout that cannot be written (`> /dev/full`, a full
    disk) is one line, exit 1 (both were tracebacks). A storage request that failed (a gs://
    read or check: GCS failing after TensorFlow's retries, permission denied) is the
    trainer's one line and exit code (trainer.failures: 128 retryable, 1), not a traceback.
    It is flushed before main's code is
    returned, so that its failure comes here and not at the interpreter's exit."""
    def decorate(main):
        @functools.wraps(main)
        def run(*args, **kwargs) -> int:
            try:
                code = main(*args, **kwargs)
                sys.stdout.flush()
                return code
            except WriteError as error:
                print(f"{label}: {error}", file=sys.stderr, flush=True)
                return EXIT_FAILED
            except KeyboardInterrupt:
                print("Interrupted.", file=sys.stderr, flush=True)
                return EXIT_INTERRUPTED
            except BrokenPipeError:
                _drop_stdout()
                return 0
            except OSError as error:
                if error.errno not in (errno.ENOSPC, errno.EIO, errno.EDQUOT, errno.EFBIG):
                    raise
                _drop_stdout()  # what is buffered cannot go out either
                print(f"{label}: cannot write the output: {error.strerror}", file=sys.stderr, flush=True)
                return EXIT_FAILED
            except Exception as error:
                if not _op_error(error) or (failure := failures.explain(error, "")) is None:
                    raise
                print(f"{label}: {failure.line}", file=sys.stderr, flush=True)
                return failure.code
        return run
    return decorate


def _drop_stdout() -> None:
    """stdout to /dev/null: what is still buffered would fail again at the interpreter's exit."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


@contextlib.contextmanager
def writing(flag: str, path: str):
    """A failure to write `path` (given as `flag`) in the block, an OSError or TensorFlow's
    OpError (a full disk: ResourceExhaustedError `FILE; No space left on device`), raised as
    WriteError: `--out: cannot write PATH: No space left on device`. Only the writing
    belongs in the block: a download's or a read's OSError is not the output's."""
    try:
        yield
    except OSError as error:
        raise WriteError(f"{flag}: cannot write {path}: {error.strerror or error}") from None
    except Exception as error:
        if not _op_error(error):
            raise
        raise WriteError(f"{flag}: cannot write {path}: {_reason(error.message, path)}") from None


def _op_error(error: BaseException) -> bool:
    """Whether `error` is a tf.errors.OpError (without importing TensorFlow for it)."""
    return any(cls.__name__ == "OpError" and cls.__module__.startswith("tensorflow")
               for cls in type(error).__mro__)


def _reason(message: str, path: str) -> str:
    """The first line of an OpError's message, without the `FILE; ` that TensorFlow's file
    systems put before the reason when FILE is `path` or in it (trainer.data's staging
    dir: no concern of the user's)."""
    first = (message or "").strip().splitlines()[0] if (message or "").strip() else "unknown error"
    head, sep, tail = first.partition("; ")
    root = path.rstrip("/")
    if sep and tail and (head == root or head.startswith(f"{root}/")):
        return tail
    return first


def write_text(out: str, text: str) -> None:
    """Write `text` to the file `out`, whole or not at all. A local file: into a temporary
    file beside it (`.NAME.XXXXXXXX.tmp`), synced, then renamed over it (os.replace), the
    temporary file removed on any failure or Ctrl-C: a failure midway (a full disk) leaves
    an earlier file as it was (GFile(out, "w") truncated it and left it cut off). An earlier
    file's mode is kept; a symlink's target is replaced, the link kept. A device, a pipe and
    a path in /dev or /proc (/dev/stdout) are written directly. gs://: through tf.io.gfile
    in one append; TensorFlow's GCS file system writes into a local temporary file and
    uploads the object on close, and GCS replaces an object only when an upload completes."""
    data = text.encode()
    if "://" in out:
        import tensorflow as tf

        with tf.io.gfile.GFile(out, "wb") as handle:
            handle.write(data)
        return
    try:
        mode = os.stat(out).st_mode
    except FileNotFoundError:
        mode = None
    if (mode is not None and not stat.S_ISREG(mode)) or os.path.abspath(out).startswith(("/dev/", "/proc/")):
        # a device, a pipe, /dev/stdout (a shell's redirect: its file is the shell's to replace)
        with open(out, "wb") as handle:
            handle.write(data)
        return
    target = os.path.realpath(out)
    folder, name = os.path.split(target)
    temporary = os.path.join(folder, f".{name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies, as to a new file
    try:
        try:
            if mode is not None:
                os.fchmod(fd, stat.S_IMODE(mode))
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
