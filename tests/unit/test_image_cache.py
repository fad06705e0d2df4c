"""scripts/image/prune-cache.sh: the image archives build.sh keeps of other tags (each about
2 GB), by age and by count, on a real directory."""
from __future__ import annotations

import os
import subprocess
import time

from tests.support.tools import ROOT

SCRIPT = ROOT / "scripts" / "image" / "prune-cache.sh"
HOUR = 3600.0


def prune(cache, tag: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), str(cache), tag], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=60)


def folders(cache, used_hours_ago: dict[str, float]) -> None:
    """trainer-<t>/ and serve-<t>/ with an archive each, last used that many hours ago."""
    now = time.time()
    for tag, hours in used_hours_ago.items():
        for kind in ("trainer", "serve"):
            folder = cache / f"{kind}-{tag}"
            folder.mkdir()
            (folder / f"tfjob-{kind}.oci.tar").write_bytes(b"archive")
            os.utime(folder, (now - hours * HOUR, now - hours * HOUR))


def test_keeps_this_tag_and_the_two_most_recently_used_others_of_each_kind(tmp_path):
    folders(tmp_path, {"now": 100.0, "a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0, "stale": 80.0})
    (tmp_path / "debian-key").mkdir()  # the base's rootfs: not an archive of a tag
    done = prune(tmp_path, "now")
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "debian-key", "serve-a", "serve-b", "serve-now", "trainer-a", "trainer-b", "trainer-now"]
    assert time.time() - (tmp_path / "trainer-now").stat().st_mtime < HOUR  # used now: touched
    assert f"prune {tmp_path}/trainer-stale (unused for 2 days)" in done.stdout.splitlines()
    assert f"prune {tmp_path}/serve-d (only the 2 most recently used other tags are kept)" in done.stdout


def test_the_counts_come_from_the_environment_and_are_checked(tmp_path):
    folders(tmp_path, {"now": 0.0, "a": 1.0, "b": 30.0})
    done = prune(tmp_path, "now", TFJOB_IMAGE_KEEP_OTHERS="0", TFJOB_IMAGE_KEEP_DAYS="5")
    assert done.returncode == 0 and sorted(p.name for p in tmp_path.iterdir()) == ["serve-now", "trainer-now"]
    refused = prune(tmp_path, "now", TFJOB_IMAGE_KEEP_OTHERS="two")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "'two'" in refused.stderr
    assert prune(tmp_path / "absent", "now").returncode == 2
