"""trainer.make_request on a few synthetic MNIST test records: --count refused in one
line, fewer examples than asked said, long label lists cut short, and as a command no
TensorFlow start-up lines on stderr."""
from __future__ import annotations

import errno
import json
import os
import stat

import numpy as np
import pytest

from tests.support.trainer_cluster import USER_SHELL_ONEDNN_ON, run_module
from trainer import data, make_request


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> str:
    out = str(tmp_path_factory.mktemp("mnist"))
    images = (np.arange(12 * 784) % 256).astype(np.uint8).reshape(12, 28, 28)
    data.write_split(out, "test", images, (np.arange(12) % 10).astype(np.uint8))
    return out


@pytest.mark.parametrize("count, expected", [
    ("0", "trainer.make_request: --count: must be > 0, got 0 (see --help)\n"),
    ("-3", "trainer.make_request: --count: must be > 0, got -3 (see --help)\n"),
    ("many", "trainer.make_request: --count: 'many' is not an integer > 0 (see --help)\n"),
])
def test_a_count_below_one_is_refused_in_one_line_and_nothing_is_written(data_dir, tmp_path, capsys, count, expected):
    out = tmp_path / "request.json"
    with pytest.raises(SystemExit) as refused:
        make_request.main(["--data-dir", data_dir, "--count", count, "--out", str(out)])
    assert refused.value.code == 2
    assert capsys.readouterr() == ("", expected)
    assert not out.exists()


@pytest.mark.parametrize("flag, expected", [
    ("--out", "trainer.make_request: --out: is empty; give a local file, a gs:// URL or - for stdout (see --help)\n"),
    # an unset shell variable (`--data-dir $DATA`) is not the default data dir
    ("--data-dir", "trainer.make_request: --data-dir: is empty; give a local directory or a gs:// URL (see --help)\n"),
])
def test_an_empty_path_is_refused_in_one_line(data_dir, tmp_path, capsys, monkeypatch, flag, expected):
    monkeypatch.chdir(tmp_path)
    given = {"--data-dir": data_dir, "--out": "request.json", flag: " "}
    with pytest.raises(SystemExit) as refused:
        make_request.main([arg for pair in given.items() for arg in pair])
    assert refused.value.code == 2
    assert capsys.readouterr() == ("", expected)
    assert list(tmp_path.iterdir()) == []


def test_an_out_it_cannot_write_and_records_it_cannot_read_are_one_line_before_any_work(data_dir, tmp_path, capsys):
    """They were tracebacks (exit 1), the first after the records had been read."""
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "test-00000-of-00001.tfrecord").write_text("not a TFRecord\n")
    (tmp_path / "file").write_text("a file\n")
    for argv, line in (
            (["--out", str(tmp_path / "nodir" / "r.json")],
             f"--out: its folder {tmp_path / 'nodir'} does not exist; create it or give another path"),
            (["--out", str(tmp_path / "file" / "r.json")],  # was: its folder ... does not exist
             f"--out: {tmp_path / 'file'} is not a directory; give another path"),
            (["--out", str(tmp_path)], f"--out: {tmp_path} is a directory; give a file in it, e.g. "
                                       f"{tmp_path / 'request.json'}"),
            (["--data-dir", str(tmp_path / "bad"), "--out", "-"],
             f"--data-dir: cannot read the test records in {tmp_path / 'bad'} as mnist records"),
            (["--out", "s3://bkt/r.json"],  # was exit 1 after reading every record: no filesystem for s3:// here
             "--out: cannot write s3://bkt/r.json (File system scheme 's3' not implemented (file: 's3://bkt/r.json')); "
             "this TensorFlow writes local paths and gs:// only: give one of those")):
        assert make_request.main(["--data-dir", data_dir, *argv]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.startswith(f"trainer.make_request: {line}") and err.count("\n") == 1, err
    assert not (tmp_path / "nodir").exists() and (tmp_path / "file").read_text() == "a file\n"


def test_a_taxi_request_on_an_mnist_dir_offers_a_dir_of_its_own_to_write_the_trips_into(data_dir, tmp_path, capsys,
                                                                                         monkeypatch):
    """It said: create them with: python -m trainer.data --dataset taxi --out DATA_DIR, into
    the MNIST dir given, which both models would then read as theirs."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TAXI_DATA_DIR", raising=False)
    assert make_request.main(["--model", "taxi", "--data-dir", data_dir, "--out", "trips.json"]) == 2
    assert capsys.readouterr() == ("", f"trainer.make_request: --data-dir: no Chicago taxi trips eval records at "
                                       f"{data_dir}: it holds mnist records (test-00000-of-00002.tfrecord); give the "
                                       "dir of Chicago taxi trips records, or write them to another with: python -m "
                                       "trainer.data --dataset taxi --out data/taxi\n")
    assert list(tmp_path.iterdir()) == []


def test_asking_more_than_there_are_says_how_many_were_written(data_dir, tmp_path, capsys):
    out = tmp_path / "request.json"
    assert make_request.main(["--data-dir", data_dir, "--count", "20", "--out", str(out)]) == 0
    assert capsys.readouterr().out == (f"Wrote 12 instances to {out}, not the 20 asked: only 12 test examples in "
                                       f"{data_dir} (true labels: 0 1 2 3 4 5 6 7 8 9 0 1)\n")
    assert len(out.read_text().splitlines()) == 12
    assert make_request.main(["--data-dir", data_dir, "--count", "20", "--out", "-"]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 12 and all("image" in json.loads(line) for line in out.splitlines())
    assert err == f"trainer.make_request: wrote 12 instances, not the 20 asked: only 12 test examples in {data_dir}\n"


def test_the_labels_are_all_printed_up_to_a_bound_then_cut_short(data_dir, tmp_path, capsys, monkeypatch):
    out = tmp_path / "request.json"
    assert make_request.main(["--data-dir", data_dir, "--count", "3", "--out", str(out)]) == 0
    assert capsys.readouterr().out == f"Wrote 3 instances to {out} (true labels: 0 1 2)\n"
    assert make_request.LABELS_SHOWN >= 3000  # scripts read the labels of the whole taxi eval split (3,000)
    monkeypatch.setattr(make_request, "LABELS_SHOWN", 10)
    monkeypatch.setattr(make_request, "LABELS_CUT", 4)
    assert make_request.main(["--data-dir", data_dir, "--count", "11", "--out", str(out)]) == 0
    assert capsys.readouterr().out == f"Wrote 11 instances to {out} (true labels: 0 1 2 3 ... of 11)\n"
    assert make_request.main(["--data-dir", data_dir, "--count", "10", "--out", str(out)]) == 0
    assert capsys.readouterr().out.endswith("(true labels: 0 1 2 3 4 5 6 7 8 9)\n")


def test_the_command_prints_its_line_and_no_tensorflow_start_up_lines(data_dir, tmp_path):
    out = tmp_path / "request.json"
    done = run_module("trainer.make_request", ["--data-dir", data_dir, "--count", "2", "--out", str(out)],
                      USER_SHELL_ONEDNN_ON)
    assert (done.returncode, done.stdout, done.stderr) == (0, f"Wrote 2 instances to {out} (true labels: 0 1)\n", "")


def test_a_stdout_that_fails_is_one_line_and_a_reader_that_left_ends_it_quietly(data_dir):
    """`--out - > /dev/full` was an OSError traceback; `--out - | head`, the reader gone
    before the write, a BrokenPipeError one. As the launcher's commands: one line, exit 1;
    exit 0 and nothing said."""
    args = ["--data-dir", data_dir, "--count", "12", "--out", "-"]
    with open("/dev/full", "w") as full:
        done = run_module("trainer.make_request", args, stdout=full)
    assert (done.returncode, done.stderr) == (1, "trainer.make_request: cannot write the output: No space left on "
                                                 "device\n")
    read, write = os.pipe()
    os.close(read)  # the reader has left before the command writes: its write fails with EPIPE
    try:
        done = run_module("trainer.make_request", args, stdout=write)
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (0, "")


def test_a_full_disk_is_one_line_naming_out_and_the_earlier_file_stays_whole(data_dir, tmp_path, capsys, monkeypatch):
    """It was a ResourceExhaustedError traceback (exit 1), the earlier file truncated and cut
    off where the disk filled."""
    out = tmp_path / "request.json"
    out.write_text('{"earlier": 1}\n')
    real = os.write

    def full(fd: int, payload) -> int:  # the request's file: 100 bytes fit, then the disk is full
        if os.readlink(f"/proc/self/fd/{fd}").startswith(str(tmp_path)):
            real(fd, bytes(payload[:100]))
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, payload)

    monkeypatch.setattr(os, "write", full)
    assert make_request.main(["--data-dir", data_dir, "--out", str(out)]) == 1
    assert capsys.readouterr() == ("", f"trainer.make_request: --out: cannot write {out}: No space left on device\n")
    assert os.listdir(tmp_path) == ["request.json"] and out.read_text() == '{"earlier": 1}\n'


def test_a_write_that_fails_midway_leaves_the_earlier_file_whole_not_cut_off(data_dir, tmp_path):
    """A real failure midway, in the command: a file size limit (RLIMIT_FSIZE, EFBIG as a
    full disk's ENOSPC) below the request's size. GFile(out, "w") truncated the earlier
    file and left the first 4096 bytes of the new one, cut off mid-line."""
    import resource
    import subprocess
    import sys

    from tests.support.trainer_cluster import ROOT, trainer_env

    out = tmp_path / "request.json"
    out.write_text('{"earlier": 1}\n')
    limit = lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))  # noqa: E731 - Python ignores SIGXFSZ
    done = subprocess.run([sys.executable, "-m", "trainer.make_request", "--data-dir", data_dir, "--out", str(out)],
                          cwd=ROOT, env=trainer_env(None), capture_output=True, text=True, timeout=300,
                          preexec_fn=limit)
    assert (done.returncode, done.stdout, done.stderr) == (
        1, "", f"trainer.make_request: --out: cannot write {out}: File too large\n")
    assert os.listdir(tmp_path) == ["request.json"] and out.read_text() == '{"earlier": 1}\n'


def test_a_request_written_over_an_earlier_file_keeps_its_mode_and_a_symlink_to_it(data_dir, tmp_path, capsys):
    target = tmp_path / "requests" / "request.json"
    target.parent.mkdir()
    target.write_text("earlier\n")
    target.chmod(0o640)
    link = tmp_path / "request.json"
    link.symlink_to(target)
    assert make_request.main(["--data-dir", data_dir, "--count", "2", "--out", str(link)]) == 0
    assert capsys.readouterr().out == f"Wrote 2 instances to {link} (true labels: 0 1)\n"
    assert link.is_symlink() and len(target.read_text().splitlines()) == 2
    assert stat.S_IMODE(target.stat().st_mode) == 0o640 and os.listdir(target.parent) == ["request.json"]
