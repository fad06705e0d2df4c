"""Where things live in --job-dir (the data dirs are the models': trainer.models.default_data_dir).

    JOB_DIR/checkpoints/ckpt-<step>   tf.train.CheckpointManager
    JOB_DIR/train/                    TensorBoard events of training
    JOB_DIR/eval/                     TensorBoard events of the chief's evaluation
    JOB_DIR/evaluator/                TensorBoard events of the side-car evaluator
    JOB_DIR/export/<timestamp>/       SavedModel (serving_default)
    JOB_DIR/done.json                 the chief's "job finished" marker (see lifecycle.py)
"""
from __future__ import annotations

import ipaddress
import re

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


# Cloud Storage bucket names (cloud.google.com/storage/docs/buckets#naming): lowercase letters, digits, '-',
# '_' and '.', starting and ending with a letter or digit; 3-63 characters, or up to 222 with dots and at
# most 63 between dots; not an IP address, no "goog" prefix, no "google". The launcher checks --job-dir
# with the same rule (launcher/spec.py).
GCS = "gs://"
_BUCKET = re.compile(r"[a-z0-9](?:[-_.a-z0-9]*[a-z0-9])?")
BUCKET_RULE = ("bucket names are 3-63 lowercase letters, digits, '-', '_' and '.' (up to 222 with dots, 63 "
               "between dots), starting and ending with a letter or digit")
# gs:/bucket/x, gs:bucket/x: a URL with a slash missing, which is a local path (TensorFlow wrote the job's
# checkpoints and export to ./gs:/bucket/x, lost with the pod); GS://bucket: gs:// is written in lowercase
_NEAR_GCS = re.compile(r"gs:(?!//)/?|GS://", re.IGNORECASE)


def bucket_problem(bucket: str) -> str | None:
    """Why `bucket` is not a Cloud Storage bucket name, or None."""
    if not bucket:
        return "is empty"
    parts = bucket.split(".")
    if not _BUCKET.fullmatch(bucket) or len(bucket) < 3 or len(bucket) > (222 if len(parts) > 1 else 63) \
            or any(len(part) > 63 for part in parts):
        return "is not a Cloud Storage bucket name"
    try:
        ipaddress.IPv4Address(bucket)
        return "is an IP address, which Cloud Storage refuses as a bucket name"
    except ValueError:
        pass
    if bucket.startswith("goog") or "google" in bucket:
        return "is reserved by Cloud Storage (no \"goog\" prefix, no \"google\")"
    return None


def url_problem(location: str, example: str = "runs/1") -> str | None:
    """Why `location` (a path flag's value) is a malformed gs:// URL, or None: a bucket name
    Cloud Storage refuses (TensorFlow's gs:// filesystem waited for such a bucket without end),
    an empty folder name (`gs://b//x`: TensorFlow writes objects named `/x/...`),
    no bucket (`gs://` was the local dir `gs:`), a slash missing after `gs:` or an uppercase
    scheme (each a local path, so the outputs stayed in the pod). `example`: the path offered
    when the URL has none."""
    if _NEAR_GCS.match(location) and not location.startswith(GCS):
        rest = _plain(_NEAR_GCS.sub("", location, 1).lstrip("/"), "BUCKET/" + example)
        why = "gs:// is written in lowercase" if location[:5].lower() == GCS else "a slash is missing after gs:"
        return f"{location!r} is not a gs:// URL but a local path ({why}); write gs://{rest or 'BUCKET/' + example}"
    if not location.startswith(GCS):
        return None
    bucket, _, path = location[len(GCS):].partition("/")
    if problem := bucket_problem(bucket):
        fixed = bucket.lower() if bucket_problem(bucket.lower()) is None else "my-bucket"
        return (f"bucket {bucket!r} of {location!r} {problem}; {BUCKET_RULE}, "
                f"e.g. gs://{fixed}/{_plain(path or example, example)}")
    if any(c in path for c in "\n\r\x00"):
        return f"{location!r} has a line break or a NUL byte in its object path; use a path without one"
    if "//" in f"/{path.rstrip('/')}":  # gs://b/$UNSET/x: objects named /x..., beside the folders the user looks in
        tidy = _plain("/".join(part for part in path.split("/") if part), example)
        return f"{location!r} has an empty folder name ('//': a variable not set?); write gs://{bucket}/{tidy}"
    return None


def _plain(text: str, example: str) -> str:
    """`text` for the URL a message offers, or `example` when it holds what a terminal would
    act on (the refused value itself is shown as its repr)."""
    return text if text.isprintable() else example


def bucket(location: str) -> str:
    """gs://bucket/some/path -> gs://bucket."""
    return GCS + location[len(GCS):].partition("/")[0]


def url_like(location: str) -> bool:
    """Whether `location` is a URL, or close enough to gs:// to be taken for one (url_problem)."""
    return "://" in location or near_gcs(location)


def near_gcs(location: str) -> bool:
    """Whether `location` is a gs:// URL or meant as one (url_problem names what is wrong)."""
    return bool(_NEAR_GCS.match(location))
