"""gs:// for batch prediction without any server: gcloud's wildcard patterns matched against
object names, and the one-line refusals that need no bucket (a missing [gcs] extra, no
credentials, a malformed URL). The bucket-side errors run against the real GCS emulator in
tests/integration/test_predict_gcs.py."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from launcher.serving.gcs import matching, prefix, regex

pytestmark = pytest.mark.usefixtures("cli_env")  # the packaged TFJob CRD, a per-session schema cache

NAMES = ["requests/", "requests/part-0.json", "requests/part-1.json", "requests/part-10.json",
         "requests/part-1.txt", "requests/old/part-2.json", "requests/old/", "requests-2/part-0.json",
         "other/part-0.json", "requests/[x].json"]


@pytest.mark.parametrize("pattern, expected", [
    ("requests/part-0.json", ["requests/part-0.json"]),                      # no wildcard: that object
    ("requests/*", ["requests/[x].json", "requests/part-0.json", "requests/part-1.json",
                    "requests/part-1.txt", "requests/part-10.json"]),        # one level, no folder placeholders
    ("requests/part-*", ["requests/part-0.json", "requests/part-1.json", "requests/part-1.txt",
                         "requests/part-10.json"]),                          # gcloud's trailing wildcard
    ("requests/part-?.json", ["requests/part-0.json", "requests/part-1.json"]),
    ("requests/part-[01].json", ["requests/part-0.json", "requests/part-1.json"]),
    ("requests/part-[!0].json", ["requests/part-1.json"]),
    ("requests/**.json", ["requests/[x].json", "requests/old/part-2.json", "requests/part-0.json",
                          "requests/part-1.json", "requests/part-10.json"]),  # ** crosses folders
    ("requests/**/part-2.json", ["requests/old/part-2.json"]),
    ("requests/**/part-0.json", ["requests/part-0.json"]),                  # **/ is zero or more levels
    ("requests*/part-0.json", ["requests-2/part-0.json", "requests/part-0.json"]),
    ("*/part-0.json", ["other/part-0.json", "requests-2/part-0.json", "requests/part-0.json"]),
    ("requests/[[]x].json", ["requests/[x].json"]),
    ("requests/part-0", []),                                                 # names are matched whole
    ("requests", []),
])
def test_patterns_match_whole_object_names_as_gcloud(pattern, expected):
    assert matching(pattern, NAMES) == expected
    assert all(name.startswith(prefix(pattern)) for name in expected)


def test_the_listing_prefix_is_everything_before_the_first_wildcard():
    assert prefix("requests/part-*.json") == "requests/part-"
    assert prefix("a/b?/c*") == "a/b"
    assert prefix("a/[ab]/c") == "a/"
    assert prefix("a/b.json") == "a/b.json"
    assert prefix("**") == ""


def test_regex_metacharacters_in_names_are_literal():
    assert regex("a+b(1).json").fullmatch("a+b(1).json")
    assert not regex("a.json").fullmatch("aXjson")
    assert not regex("a/*").fullmatch("a/b/c")



@pytest.fixture
def request_file(tmp_path) -> Path:
    path = tmp_path / "request.json"
    path.write_text('{"image": [0.0], "key": 0}\n')
    return path


@pytest.fixture
def no_gcs_client(monkeypatch):
    """This Python without google-cloud-storage (as without the [gcs] extra)."""
    monkeypatch.setitem(sys.modules, "google.cloud.storage", None)


@pytest.mark.parametrize("argv, field", [
    (["--input-paths", "gs://bucket/requests/*.json", "--output-path", "{tmp}/out"], "--input-paths"),
    (["--input-paths", "{request}", "--output-path", "gs://bucket/out"], "--output-path"),
    (["--json-instances", "gs://bucket/request.json"], "--json-instances"),
    (["--json-request", "gs://bucket/request.json"], "--json-request"),
])
def test_without_the_gcs_extra_a_gs_path_is_one_line_naming_the_extra(cli, tmp_path, request_file, no_gcs_client,
                                                                      argv, field):
    argv = [a.format(tmp=tmp_path, request=request_file) for a in argv]
    line = cli("predict", "mnist", *argv, "--url", "http://127.0.0.1:9").refused(field)
    assert "google-cloud-storage" in line and "pip install 'tfjob-launcher[gcs]'" in line
    assert not (tmp_path / "out").exists()


def test_without_credentials_a_gs_path_says_how_to_get_them(cli, tmp_path, monkeypatch):
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    # a credentials file that does not exist: google-auth stops there (no metadata server asked)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing-key.json"))
    line = cli("predict", "mnist", "--input-paths", "gs://bucket/r/*.json", "--output-path",
               str(tmp_path / "out"), "--url", "http://127.0.0.1:9").refused("--input-paths")
    assert "gcloud auth application-default login" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv, field, says", [
    (["--input-paths", "gs://", "--output-path", "{tmp}/out"], "--input-paths", "names no bucket"),
    (["--input-paths", "gs://buck*/r.json", "--output-path", "{tmp}/out"], "--input-paths",
     "wildcards in the bucket name are not matched; name the bucket"),
    (["--input-paths", "{request}", "--output-path", "gs:///out"], "--output-path", "names no bucket"),
    (["--input-paths", "{request}", "--output-path", "gs://bucket/out-*"], "--output-path", "wildcard"),
    # a slash short, or in capitals: a local path before (./gs:/bucket/out written here)
    (["--input-paths", "gs:/bucket/r.json", "--output-path", "{tmp}/out"], "--input-paths", "write gs://bucket/r.json"),
    (["--input-paths", "{request}", "--output-path", "gs:/bucket/out"], "--output-path", "write gs://bucket/out"),
    (["--input-paths", "{request}", "--output-path", "GS://bucket/out"], "--output-path",
     "gs:// is written in lowercase"),
    (["--input-paths", "gs://My_Bucket/r.json", "--output-path", "{tmp}/out"], "--input-paths",
     "is not a Cloud Storage bucket name"),
])
def test_malformed_gs_urls_are_refused_before_any_request(cli, tmp_path, request_file, no_gcs_client, argv,
                                                          field, says):
    argv = [a.format(tmp=tmp_path, request=request_file) for a in argv]
    assert says in cli("predict", "mnist", *argv, "--url", "http://127.0.0.1:9").refused(field)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("pattern", ["requests/**.json", "requests/**/part-2.json", "requests/**/part-0.json",
                                     "requests/**", "requests/*", "*/part-0.json"])
def test_local_patterns_match_the_files_gs_patterns_match(tmp_path, monkeypatch, pattern):
    """One grammar for --input-paths, local or gs://: `**` crosses folders here too (the local
    glob matched one level, and files deeper down were skipped without a word)."""
    from launcher.serving.predictions import input_files

    files = [name for name in NAMES if not name.endswith("/")]
    for name in files:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}\n")
    monkeypatch.chdir(tmp_path)
    assert input_files(pattern) == [name for name in matching(pattern, files)], pattern
    assert input_files(f"{tmp_path}/{pattern}") == [f"{tmp_path}/{name}" for name in matching(pattern, files)]


def test_local_patterns_take_what_the_shells_glob_takes(tmp_path, monkeypatch):
    """Regular files through symlinked folders; no broken link, pipe or hidden file unless named."""
    from launcher.serving.predictions import input_files

    monkeypatch.chdir(tmp_path)
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "a.json").write_text("{}\n")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "linked").symlink_to(tmp_path / "real")
    (tmp_path / "d" / "loop").symlink_to(tmp_path / "d")  # walked once, not forever
    (tmp_path / "d" / "b.json").write_text("{}\n")
    (tmp_path / "d" / ".hidden.json").write_text("{}\n")
    (tmp_path / "d" / ".git").mkdir()  # a hidden folder: not walked unless named
    (tmp_path / "d" / ".git" / "a.json").write_text("{}\n")
    (tmp_path / "d" / "broken.json").symlink_to(tmp_path / "nowhere.json")
    os.mkfifo(tmp_path / "d" / "fifo.json")
    assert input_files("d/*/a.json") == ["d/linked/a.json"]
    assert input_files("d/*.json") == ["d/b.json"]
    assert input_files("d/.*.json") == ["d/.hidden.json"]
    assert input_files("d/**.json") == ["d/b.json", "d/linked/a.json"]
    assert input_files("d/.git/*.json") == ["d/.git/a.json"]
    # a file two patterns match is predicted once
    assert input_files("d/*.json,d/b.json, d/b.json") == ["d/b.json"]


def test_a_full_disk_names_the_output_file_and_leaves_no_partial_file(tmp_path, monkeypatch):
    """Batch prediction's local --output-path: one line naming the file (exit 1 through BackendError)."""
    import errno
    import os

    from launcher.backends.base import BackendError
    from launcher.serving import predictions

    def full(*args):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(predictions.os, "replace", full)
    out = tmp_path / "out"
    with pytest.raises(BackendError, match=rf"^--output-path: cannot write {out}/{predictions.RESULTS}: "
                                           r"No space left on device$"):
        predictions.write_outputs(str(out), {predictions.RESULTS: "{}\n", predictions.ERRORS: ""})
    assert list(out.iterdir()) == []
