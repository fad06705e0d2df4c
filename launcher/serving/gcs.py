"""gs:// files for batch prediction, through the `google-cloud-storage` client (the `[gcs]`
extra): never TensorFlow's filesystem, which the launcher does not import.

- Credentials are Application Default Credentials, as `gcloud auth application-default
  login` or Workload Identity leave them. With `STORAGE_EMULATOR_HOST` set the client talks
  to that emulator, anonymously.
- Patterns are gcloud's: `*` and `?` match within one path level, `**` across levels
  (`a/**/x.json` includes `a/x.json`), `[abc]` one of a set. The bucket is listed under the pattern's prefix before its first
  wildcard and the rest of the object name is matched (`gs://b/requests/*.json`,
  `gs://b/requests/part-*`, `gs://b/a/**/x.json`).
- Every failure is one line naming the flag and the path: a SpecError (exit 2) for a
  missing extra, no credentials, no such bucket, a pattern matching nothing, permission
  denied; a BackendError (exit 1) when GCS itself fails.
"""
from __future__ import annotations

import importlib
import re

from trainer import paths

from ..backends.base import BackendError
from ..spec import SpecError

SCHEME = "gs://"
WILDCARDS = "*?["
EXTRA = "pip install 'tfjob-launcher[gcs]'"
TIMEOUT = 60.0  # seconds per HTTP request to GCS


def is_gcs(path: str) -> bool:
    """A gs:// URL, or one a slash short or in capitals (`gs:/b/x`, `GS://b/x`): meant as one,
    and refused by split (they were local paths: `--output-path gs:/b/out` wrote ./gs:/b/out)."""
    return paths.near_gcs(path)


def split(url: str, flag: str) -> tuple[str, str]:
    """gs://bucket/some/name -> ("bucket", "some/name"); a malformed URL is a SpecError
    (trainer.paths.url_problem: the same rules as the trainer's and --job-dir's)."""
    if not url.startswith(SCHEME):
        raise SpecError(flag, paths.url_problem(url, "PATH"))
    bucket, _, name = url[len(SCHEME):].partition("/")
    if not bucket:
        raise SpecError(flag, f"{url!r} names no bucket; pass gs://BUCKET/PATH")
    if any(c in bucket for c in WILDCARDS):
        raise SpecError(flag, f"{url!r}: wildcards in the bucket name are not matched; name the bucket")
    if problem := paths.url_problem(url, "PATH"):
        raise SpecError(flag, problem)
    return bucket, name


def prefix(pattern: str) -> str:
    """The part of an object-name pattern before its first wildcard (what the bucket is listed under)."""
    cut = min((i for i, c in enumerate(pattern) if c in WILDCARDS), default=len(pattern))
    return pattern[:cut]


def regex(pattern: str) -> re.Pattern:
    """An object-name pattern as a regular expression matching whole names."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):  # zero or more folder levels
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[" and pattern.find("]", i + 2) != -1:
            end = pattern.find("]", i + 2)  # a "]" right after "[" (or "[!") is a member, as in fnmatch
            body = pattern[i + 1:end]
            negate = body.startswith("!")
            body = body[1:] if negate else body
            if negate and not body:  # "[!]...": the "]" was the member
                end = pattern.find("]", end + 1)
                if end == -1:
                    out.append(re.escape(c))
                    i += 1
                    continue
                body = pattern[i + 2:end]
            body = body.replace("\\", "\\\\").replace("^", "\\^").replace("[", "\\[").replace("]", "\\]")
            out.append(("[^/" if negate else "[") + body + "]")
            i = end + 1
            continue
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out), re.DOTALL)


def matching(pattern: str, names) -> list[str]:
    """The object names (sorted) that `pattern` matches whole; folder placeholders (`.../`) are not files."""
    compiled = regex(pattern)
    return sorted(n for n in names if not n.endswith("/") and compiled.fullmatch(n))


def client(flag: str):
    """A storage client (anonymous on $STORAGE_EMULATOR_HOST), or a SpecError saying what to install or run."""
    try:
        storage = importlib.import_module("google.cloud.storage")
    except ImportError:
        raise SpecError(flag, f"gs:// paths need the google-cloud-storage package, which this Python lacks; "
                        f"{EXTRA}") from None
    from google.auth.exceptions import DefaultCredentialsError

    try:
        return storage.Client()
    except DefaultCredentialsError:
        raise SpecError(flag, "gs:// needs Google credentials and none were found; run `gcloud auth "
                        "application-default login` (or set GOOGLE_APPLICATION_CREDENTIALS)") from None


def _failure(error: Exception, flag: str, url: str, bucket: str, missing: str = "") -> SpecError | BackendError:
    """What the user can fix (no such bucket or object, no access) is a SpecError (exit 2);
    GCS itself failing (5xx, the network) a BackendError (exit 1). One line, naming flag and path."""
    from google.api_core import exceptions

    if isinstance(error, exceptions.NotFound):
        return SpecError(flag, f"{url}: {missing or f'bucket gs://{bucket} does not exist'}; check the name with "
                         "`gcloud storage ls`")
    if isinstance(error, (exceptions.Forbidden, exceptions.Unauthorized)):
        return SpecError(flag, f"{url}: permission denied ({error.code}); grant this account read (and for "
                         "--output-path write) access to the bucket, e.g. roles/storage.objectAdmin")
    reason = getattr(error, "message", None) or str(error) or error.__class__.__name__
    return BackendError(f"{flag}: {url}: GCS failed ({error.__class__.__name__}: "
                        f"{(reason.splitlines() or [''])[0][:200]})")


def _errors():
    from google.api_core.exceptions import GoogleAPIError
    from google.auth.exceptions import GoogleAuthError
    from requests.exceptions import RequestException

    return GoogleAPIError, GoogleAuthError, RequestException


def expand(url_pattern: str, flag: str, gcs=None) -> list[str]:
    """The gs:// URLs of the objects one pattern matches (SpecError when none)."""
    bucket, pattern = split(url_pattern, flag)
    gcs = gcs or client(flag)
    try:
        names = [blob.name for blob in gcs.list_blobs(bucket, prefix=prefix(pattern), timeout=TIMEOUT)]
    except _errors() as error:
        raise _failure(error, flag, url_pattern, bucket) from None
    found = matching(pattern, names)
    if not found:
        hint = (f"; it is a folder, use {url_pattern.rstrip('/')}/*"
                if not any(c in pattern for c in WILDCARDS) and any(n.startswith(pattern.rstrip("/") + "/")
                                                                     for n in names) else "")
        raise SpecError(flag, f"{url_pattern!r} matches no object{hint or '; pass files of JSON instances'}")
    return [f"{SCHEME}{bucket}/{name}" for name in found]


def read_text(url: str, flag: str, gcs=None) -> str:
    bucket, name = split(url, flag)
    gcs = gcs or client(flag)
    try:
        data = gcs.bucket(bucket).blob(name).download_as_bytes(timeout=TIMEOUT)
    except _errors() as error:
        raise _failure(error, flag, url, bucket, "no such object (or bucket)") from None
    try:
        return data.decode("utf-8-sig")  # without a byte order mark, as a local file is read
    except UnicodeDecodeError:
        raise SpecError(flag, f"cannot read {url} (not UTF-8 text); pass a file of JSON lines") from None


def folder(url: str) -> tuple[str, str]:
    """gs://bucket[/path[/]] -> ("bucket", "path/" or "")."""
    bucket, _, name = url[len(SCHEME):].partition("/")
    name = name.strip("/")
    return bucket, (name + "/" if name else "")


def exists(url: str, flag: str, gcs=None) -> bool:
    """Whether object `url` exists; also checks that its bucket exists and may be listed (SpecError if not)."""
    bucket, name = split(url, flag)
    gcs = gcs or client(flag)
    try:
        return any(blob.name == name for blob in gcs.list_blobs(bucket, prefix=name, max_results=1,
                                                                timeout=TIMEOUT))
    except _errors() as error:
        raise _failure(error, flag, url, bucket) from None


def write_text(url: str, text: str, flag: str, gcs=None) -> None:
    """One object, uploaded whole (GCS shows it complete or not at all)."""
    bucket, name = split(url, flag)
    gcs = gcs or client(flag)
    try:
        gcs.bucket(bucket).blob(name).upload_from_string(text.encode("utf-8"), content_type="text/plain",
                                                         timeout=TIMEOUT)
    except _errors() as error:
        raise _failure(error, flag, url, bucket) from None
