"""trainer.export and trainer.predict on a plain (untrained) model; as a command,
trainer.predict prints no TensorFlow start-up lines on stderr."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tests.support.trainer_cluster import USER_SHELL_ONEDNN_ON, run_module
from trainer import export, models, predict


@pytest.fixture(scope="module")
def model():
    return models.build("mnist")


@pytest.fixture(scope="module")
def exported(tmp_path_factory, model) -> str:
    job_dir = str(tmp_path_factory.mktemp("job"))
    return export.export(model, job_dir)


def test_export_lands_in_a_timestamped_dir(exported):
    parent, stamp = exported.rsplit("/", 1)
    assert parent.endswith("/export") and stamp.isdigit()
    assert tf.io.gfile.exists(f"{exported}/saved_model.pb")
    assert os.listdir(parent) == [stamp]  # no temp dir left beside it


def save_spy(monkeypatch, fail: BaseException | None = None) -> list[str]:
    """Record where tf.saved_model.save writes; with `fail`: write a part of a SavedModel
    there (its variables/, as a save cut off does), then raise `fail`."""
    saved, save = [], tf.saved_model.save

    def spy(module, path, *args, **kwargs):
        saved.append(path)
        if fail is None:
            return save(module, path, *args, **kwargs)
        os.makedirs(f"{path}/variables")
        Path(f"{path}/variables/variables.index").write_bytes(b"part")
        raise fail

    monkeypatch.setattr(tf.saved_model, "save", spy)
    return saved


def test_the_savedmodel_is_written_beside_the_version_and_renamed_once_complete(model, tmp_path, monkeypatch):
    """TF Serving and KServe load the highest numbered dir of the export base: it appears
    whole, the SavedModel written first to a dir whose name is no version."""
    saved = save_spy(monkeypatch)
    path = export.export(model, str(tmp_path))
    base, stamp = path.rsplit("/", 1)
    assert len(saved) == 1 and saved[0].rsplit("/", 1) == [base, f"temp-{stamp}"]
    assert os.listdir(base) == [stamp]
    assert {"saved_model.pb", "variables"} <= set(os.listdir(path))
    assert predict.resolve(base) == path


@pytest.mark.parametrize("fail", [RuntimeError("disk full"), KeyboardInterrupt()])
def test_a_save_cut_off_leaves_no_version_and_no_temp_dir(model, tmp_path, monkeypatch, fail):
    saved = save_spy(monkeypatch, fail)
    with pytest.raises(type(fail)):
        export.export(model, str(tmp_path))
    assert len(saved) == 1 and not os.path.exists(saved[0])
    assert os.listdir(tmp_path / "export") == []


def test_a_failed_rename_leaves_no_version_and_no_temp_dir(model, tmp_path, monkeypatch):
    def rename(src, dst, overwrite=False):
        raise tf.errors.PermissionDeniedError(None, None, f"{dst}: permission denied")

    monkeypatch.setattr(tf.io.gfile, "rename", rename)
    with pytest.raises(tf.errors.PermissionDeniedError):
        export.export(model, str(tmp_path))
    assert os.listdir(tmp_path / "export") == []


def test_only_a_local_path_is_renamed_in_one_step():
    assert export.atomic_rename("/tmp/job/export/1") and export.atomic_rename("file:///tmp/job/export/1")
    assert not export.atomic_rename("gs://bucket/job/export/1")


@pytest.fixture
def object_store(monkeypatch) -> list[tuple[str, str]]:
    """Publish as for gs:// (file by file), on local disk; records each rename."""
    renames, rename = [], tf.io.gfile.rename

    def spy(src, dst, overwrite=False):
        renames.append((src, dst))
        return rename(src, dst, overwrite)

    monkeypatch.setattr(export, "atomic_rename", lambda path: False)
    monkeypatch.setattr(tf.io.gfile, "rename", spy)
    return renames


def test_file_by_file_the_version_holds_saved_model_pb_only_when_complete(model, tmp_path, object_store):
    path = export.export(model, str(tmp_path))
    base, stamp = path.rsplit("/", 1)
    targets = [target for _, target in object_store]
    assert targets[-1] == f"{path}/saved_model.pb" and f"{path}/variables/variables.index" in targets
    assert all(source.startswith(f"{base}/temp-{stamp}/") for source, _ in object_store)
    assert os.listdir(base) == [stamp]
    assert predict.resolve(base) == path
    tf.saved_model.load(path).signatures["serving_default"](image=tf.zeros((1, 784)),
                                                            key=tf.constant([3], tf.int64))


def test_file_by_file_a_move_cut_off_removes_the_incomplete_version(model, tmp_path, object_store, monkeypatch):
    moved, rename = [], tf.io.gfile.rename

    def second_fails(src, dst, overwrite=False):
        if moved:
            raise tf.errors.UnavailableError(None, None, "503")
        moved.append(dst)
        return rename(src, dst, overwrite)

    monkeypatch.setattr(tf.io.gfile, "rename", second_fails)
    with pytest.raises(tf.errors.UnavailableError):
        export.export(model, str(tmp_path))
    assert len(moved) == 1 and not moved[0].endswith("/saved_model.pb")
    assert os.listdir(tmp_path / "export") == []


def test_exports_within_one_second_get_versions_one_apart(model, tmp_path, monkeypatch):
    monkeypatch.setattr(export.time, "time", lambda: 1700000000.5)
    paths = [export.export(model, str(tmp_path)) for _ in range(3)]
    assert [path.rsplit("/", 1)[1] for path in paths] == ["1700000000", "1700000001", "1700000002"]


def test_file_by_file_a_version_that_exists_is_not_written_into(tmp_path, object_store):
    """Another export's version (two chiefs, say): refused whole, its files untouched."""
    temp, path = tmp_path / "export" / "temp-5", tmp_path / "export" / "5"
    for folder, text in ((temp, "new"), (path, "old")):
        (folder / "variables").mkdir(parents=True)
        (folder / "saved_model.pb").write_text(text)
    with pytest.raises(tf.errors.AlreadyExistsError):
        export.publish(str(temp), str(path))
    assert (path / "saved_model.pb").read_text() == "old" and not temp.exists() and object_store == []


def test_a_killed_exports_temp_dir_is_no_version_and_the_next_export_removes_it(model, tmp_path, capsys):
    """SIGKILL (or SIGTERM, which leaves through os._exit) between the save and the rename
    leaves temp-<version>/: not numeric, so no version to predict or TF Serving; the next
    export of the job dir removes it (and nothing else)."""
    base = tmp_path / "export"
    first = export.export(model, str(tmp_path))
    left = base / "temp-9999999999"
    (left / "variables").mkdir(parents=True)
    (left / "saved_model.pb").write_bytes(b"")
    (base / "temp-notes").mkdir()
    assert predict.resolve(str(base)) == first
    second = export.export(model, str(tmp_path))
    assert sorted(os.listdir(base)) == sorted([first.rsplit("/", 1)[1], second.rsplit("/", 1)[1], "temp-notes"])
    assert predict.resolve(str(base)) == max(first, second)


@pytest.mark.parametrize("shape", [(3, 784), (3, 28, 28), (3, 28, 28, 1)])
def test_serving_default_takes_images_and_keys_and_passes_the_keys_through(exported, shape):
    outputs = tf.saved_model.load(exported).signatures["serving_default"](
        image=tf.zeros(shape), key=tf.constant([17, 4, 9], tf.int64))
    assert outputs["classes"].shape == (3,) and outputs["classes"].dtype == tf.int64
    assert outputs["probabilities"].shape == (3, 10)
    np.testing.assert_allclose(outputs["probabilities"].numpy().sum(axis=1), 1.0, rtol=1e-5)
    assert outputs["key"].numpy().tolist() == [17, 4, 9]


def test_the_saved_signatures_are_what_serving_sees(exported):
    """TensorFlow's own reading of the SavedModel's signature_def (what TF Serving and
    KServe's TensorFlow runtime serve): serving_default takes exactly the seeds' request
    fields, `unkeyed` the image alone."""
    from tensorflow.python.tools import saved_model_utils

    defs = saved_model_utils.get_meta_graph_def(exported, "serve").signature_def
    assert sorted(defs) == ["__saved_model_init_op", "serving_default", "unkeyed"]
    default = defs["serving_default"]
    assert {name: tf.as_dtype(info.dtype).name for name, info in default.inputs.items()} == \
        {"image": "float32", "key": "int64"}
    assert [dim.size for dim in default.inputs["key"].tensor_shape.dim] == [-1]
    assert sorted(default.outputs) == ["classes", "key", "probabilities"]
    assert sorted(defs["unkeyed"].inputs) == ["image"]


def test_unkeyed_signature_numbers_the_rows(exported):
    outputs = tf.saved_model.load(exported).signatures["unkeyed"](image=tf.zeros((2, 784)))
    assert outputs["key"].numpy().tolist() == [0, 1]


def test_predict_prints_classes_and_probabilities(exported, tmp_path, capsys):
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"image": [0.0] * 784, "key": 5}) + "\n"
                       + json.dumps({"image": [0.5] * 784, "key": 6}) + "\n")
    assert predict.main(["--model-dir", exported.rsplit("/", 1)[0], "--json-instances", str(request)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "KEY  CLASSES  PROBABILITIES"
    for key, line in zip((5, 6), lines[1:], strict=True):
        fields = line.split(maxsplit=2)
        assert int(fields[0]) == key and 0 <= int(fields[1]) <= 9
        assert len(json.loads(fields[2])) == 10
        assert re.fullmatch(r"\[(\d\.\d{4}, ){9}\d\.\d{4}\]", fields[2]), fields[2]  # 4 decimals, as the doc says


def test_the_command_prints_the_table_and_no_tensorflow_start_up_lines(exported, tmp_path):
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"image": [0.0] * 784, "key": 7}) + "\n")
    done = run_module("trainer.predict", ["--model-dir", exported, "--json-instances", str(request)],
                      USER_SHELL_ONEDNN_ON)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines()[0] == "KEY  CLASSES  PROBABILITIES"
    assert done.stdout.splitlines()[1].startswith("7 ")


def test_instances_without_keys_go_to_the_unkeyed_signature(exported, tmp_path, capsys):
    request = tmp_path / "request.json"
    request.write_text(json.dumps([0.1] * 784) + "\n" + json.dumps({"image": [0.2] * 784}) + "\n")
    rows, keys = predict.read_instances(str(request))
    assert [number for number, _ in rows] == [1, 2] and keys is None
    assert predict.main(["--model-dir", exported, "--json-instances", str(request)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "CLASSES  PROBABILITIES" and len(lines) == 3


def test_instances_come_from_stdin_given_as_dash_as_gcloud_reads_them(exported, monkeypatch, capsys):
    """`--json-instances -` looked for a file named `-`."""
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps({"image": [0.1] * 784, "key": 4}) + "\n"))
    assert predict.main(["--model-dir", exported, "--json-instances", "-"]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith("4 ")
    monkeypatch.setattr("sys.stdin", io.StringIO("\n"))
    assert predict.main(["--model-dir", exported, "--json-instances", "-"]) == 2
    assert capsys.readouterr().err == "trainer.predict: --json-instances: stdin holds no instances\n"


def test_a_byte_order_mark_is_no_part_of_the_first_instance(exported, tmp_path, capsys):
    """As gcloud reads --json-instances (utf-8-sig): Windows editors start the file with one."""
    request = tmp_path / "request.json"
    request.write_bytes(b"\xef\xbb\xbf" + (json.dumps({"image": [0.1] * 784, "key": 3}) + "\r\n").encode())
    assert predict.main(["--model-dir", exported, "--json-instances", str(request)]) == 0
    out, err = capsys.readouterr()
    assert err == "" and out.splitlines()[1].startswith("3 ")


def test_an_export_that_cannot_be_loaded_is_one_line_exit_2(tmp_path, capsys):
    """A corrupt or cut-off saved_model.pb: the --model-dir's fault, one line, not a traceback."""
    version = tmp_path / "export" / "5"
    version.mkdir(parents=True)
    (version / "saved_model.pb").write_bytes(b"not a SavedModel")
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"image": [0.1] * 784, "key": 3}) + "\n")
    assert predict.main(["--model-dir", str(tmp_path / "export"), "--json-instances", str(request)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"trainer.predict: --model-dir: cannot load the SavedModel {version} (Cannot "
                                        "parse file") and err.count("\n") == 1, err


def test_bad_requests_are_refused(tmp_path, exported, capsys):
    request = tmp_path / "request.json"
    """Each line read as the model server reads a row (trainer.serve.codec): what it refuses,
    named with the file's line."""
    image = json.dumps({"image": [0.5] * 784})
    for lines, expected in (
            ([json.dumps({"pixels": [0.0] * 784})], "line 1: 'pixels' is not an input of signature 'unkeyed' "
                                                    "(inputs: image)"),
            ([image, json.dumps({"image": ["a"] * 784})], "line 2: input 'image': expects JSON numbers (float32), "
                                                          "got strings"),
            ([image, json.dumps({"image": [[0.5] * 28] * 28})], "line 2: input 'image' has shape [28, 28] where "
                                                                "line 1's has [784]; give every instance one shape"),
            ([image, "", "{image"], "line 3: not JSON (Expecting property name enclosed in double quotes)")):
        request.write_text("\n".join(lines) + "\n")
        assert predict.main(["--model-dir", exported, "--json-instances", str(request)]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err == f"trainer.predict: --json-instances {expected}\n"


def test_missing_model_is_refused(tmp_path, capsys):
    request = tmp_path / "request.json"
    request.write_text(json.dumps([0.0] * 784) + "\n")
    assert predict.main(["--model-dir", str(tmp_path), "--json-instances", str(request)]) == 2
    assert "--model-dir: no SavedModel at" in capsys.readouterr().err


def test_signature_name_picks_the_signature(exported, tmp_path, capsys):
    keyed, bare = tmp_path / "keyed.json", tmp_path / "bare.json"
    keyed.write_text(json.dumps({"image": [0.0] * 784, "key": 5}) + "\n")
    bare.write_text(json.dumps({"image": [0.0] * 784}) + "\n")
    assert predict.main(["--model-dir", exported, "--json-instances", str(keyed), "--signature-name",
                         "serving_default"]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith("5    ")
    assert predict.main(["--model-dir", exported, "--json-instances", str(bare), "--signature-name", "unkeyed"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[0].isdigit()
    for request, name, expected in (
            (keyed, "predict", "--signature-name: the SavedModel has no signature 'predict'; it has "
                               "serving_default, unkeyed"),
            (keyed, "unkeyed", '--signature-name unkeyed: it takes no "key"; leave the keys out'),
            (bare, "serving_default", '--signature-name serving_default: it takes a "key" on every instance')):
        assert predict.main(["--model-dir", exported, "--json-instances", str(request), "--signature-name",
                             name]) == 2
        err = capsys.readouterr().err
        assert expected in err and err.count("\n") == 1, err


@pytest.mark.parametrize("lines, expected", [
    ([{"image": [0.0] * 784, "key": "a7"}], 'line 1: key must be an integer, got "a7"'),
    ([{"image": [0.0] * 784, "key": True}], "line 1: key must be an integer, got true"),  # not key 1
    ([{"image": [0.0] * 784, "key": 1}, {"image": [0.0] * 784}], 'line(s) 2 have no "key" while others do'),
])
def test_string_keys_and_keys_on_some_lines_are_refused(exported, tmp_path, capsys, lines, expected):
    request = tmp_path / "request.json"
    request.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert predict.main(["--model-dir", exported, "--json-instances", str(request)]) == 2
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") == 1


def test_a_job_dir_as_model_dir_points_at_its_export_base(exported, tmp_path, capsys):
    request = tmp_path / "request.json"
    request.write_text(json.dumps([0.0] * 784) + "\n")
    job_dir = exported.rsplit("/", 2)[0]
    assert predict.main(["--model-dir", job_dir, "--json-instances", str(request)]) == 2
    assert capsys.readouterr().err == (f"trainer.predict: --model-dir: no SavedModel at {job_dir}, a job dir; pass "
                                       f"{job_dir}/export (its newest version is used)\n")
    assert predict.main(["--model-dir", f"{job_dir}/export", "--json-instances", str(request)]) == 0


def test_a_missing_json_instances_file_is_refused_naming_the_flag(exported, tmp_path, capsys):
    missing = tmp_path / "x.json"
    assert predict.main(["--model-dir", exported, "--json-instances", str(missing)]) == 2
    assert capsys.readouterr() == ("", f"trainer.predict: --json-instances: {missing}: no such file\n")
    assert predict.main(["--model-dir", exported, "--json-instances", str(tmp_path)]) == 2
    assert capsys.readouterr() == ("", f"trainer.predict: --json-instances: {tmp_path}: a directory; pass a file "
                                       "with one JSON instance per line\n")
    body = tmp_path / "request.json"  # gcloud's --json-request file: was "'instances' is not an input ..."
    body.write_text('{"inputs": {"image": [[0.0]]}}\n')
    assert predict.main(["--model-dir", exported, "--json-instances", str(body)]) == 2
    assert capsys.readouterr() == ("", 'trainer.predict: --json-instances line 1: a whole request body ({"inputs": '
                                       "[...]}), not an instance; write one JSON instance per line (launcher predict "
                                       "--json-request takes a request body)\n")


@pytest.mark.parametrize("flag", ["--model-dir", "--json-instances"])
def test_a_location_tensorflow_cannot_read_is_one_line_exit_2(exported, tmp_path, capsys, flag):
    """s3:// (no filesystem for it in this TensorFlow): was a traceback (UnimplementedError)."""
    request = tmp_path / "request.json"
    request.write_text(json.dumps([0.0] * 784) + "\n")
    given = {"--model-dir": exported, "--json-instances": str(request), flag: "s3://bucket/runs/1/x"}
    assert predict.main([arg for pair in given.items() for arg in pair]) == 2
    assert capsys.readouterr() == ("", f"trainer.predict: {flag}: cannot read s3://bucket/runs/1/x (File system "
                                       "scheme 's3' not implemented (file: 's3://bucket/runs/1/x"
                                       f"{'/saved_model.pb' if flag == '--model-dir' else ''}')); this TensorFlow "
                                       "reads local paths and gs:// only; copy it to one of those\n")


def test_instances_without_keys_are_refused_when_two_signatures_could_take_them(tmp_path, capsys):
    """No signature is guessed between two that both take serving_default's inputs without "key"."""
    class Twins(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x"),
                                      tf.TensorSpec([None], tf.int64, name="key")])
        def keyed(self, x, key):
            return {"y": x, "key": key}

        @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x")])
        def plain(self, x):
            return {"y": x}

    module = Twins()
    version = tmp_path / "export" / "1"
    tf.saved_model.save(module, str(version), signatures={"serving_default": module.keyed, "a": module.plain,
                                                          "b": module.plain})
    request = tmp_path / "request.json"
    request.write_text('{"x": 1.5}\n')
    assert predict.main(["--model-dir", str(version), "--json-instances", str(request)]) == 2
    assert capsys.readouterr() == ("", 'trainer.predict: --json-instances: the instances carry no "key", which '
                                       "serving_default takes; give every instance an integer key, or pass "
                                       "--signature-name\n")
    assert predict.main(["--model-dir", str(version), "--json-instances", str(request), "--signature-name", "b"]) == 0


def test_instances_that_are_not_utf8_are_one_line_exit_2(exported, tmp_path, capsys, monkeypatch):
    """Was a traceback (UnicodeDecodeError, exit 1); launcher predict said it in one line."""
    import io
    import sys

    request = tmp_path / "request.json"
    request.write_bytes(b"\xff\xfe[0.5]\n")
    assert predict.main(["--model-dir", exported, "--json-instances", str(request)]) == 2
    assert capsys.readouterr() == ("", f"trainer.predict: --json-instances: cannot read {request} (not UTF-8 text); "
                                       "write one JSON instance per line\n")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"\xff\xfe[0.5]\n"), encoding="utf-8"))
    assert predict.main(["--model-dir", exported, "--json-instances", "-"]) == 2
    assert capsys.readouterr() == ("", "trainer.predict: --json-instances: cannot read stdin (not UTF-8 text); "
                                       "write one JSON instance per line\n")
