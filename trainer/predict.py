"""Local online prediction against an exported SavedModel, like `gcloud ... predict`:

    python -m trainer.predict --model-dir JOB_DIR/export/1700000000 --json-instances request.json

    KEY  CLASSES  PROBABILITIES
    0    7        [0.0000, 0.0000, ..., 0.9991, 0.0000, 0.0002]

Each line of --json-instances is one instance, read as the model server reads a row of
`instances` (trainer.serve.codec, TF Serving's REST format): the value of the signature's
only input (MNIST: a bare list of 784 pixels), or an object naming its inputs (MNIST:
{"image": [...]}; taxi: {"trip_miles": 3.1, "trip_seconds": 600, "fare": 10.25,
"payment_type": "Credit Card", ...}), {"b64": ...} for binary strings. A SavedModel that
carries `instance_defaults()` (taxi) lets an instance leave its optional inputs out. A line
that is no JSON, an unknown or missing input, or a value of the wrong type or shape is
refused in one line naming the line.

Keys: an integer "key" on every line, or on none (a string key, or keys on only some
lines, are refused naming the line). Without --signature-name, instances with keys go to
`serving_default`, which takes the key and returns it (as TF Serving and KServe serve the
export); instances without keys go to `serving_default` when it takes no key, else to the
one signature whose inputs are serving_default's without "key" (MNIST: `unkeyed`, whose
`key` output, the row index, is not shown).

The table has one column per output (KEY first): a number as it is (4 decimals for a
fraction), more as a list, e.g. for taxi

    CLASSES  LOGISTIC  PROBABILITIES
    1        0.9731    [0.0269, 0.9731]

--model-dir may also be JOB_DIR/export (the newest export is used).
"""
from __future__ import annotations

import argparse
import functools
import json
import sys

from trainer.outputs import require_tensorflow

require_tensorflow(__name__, "trainer.predict")  # before numpy: one line without the [trainer] extra
import numpy as np

from trainer import lazy, outputs
from trainer.flags import Parser, location
from trainer.outputs import command
from trainer.serve import body_key, codec  # the model server's reading of an instance (no TensorFlow, no kserve)

tf = lazy.module("tensorflow")  # --help and flag errors without TensorFlow's import

KEY = "key"
DEFAULT = "serving_default"


class RequestError(ValueError):
    pass


def saved_versions(model_dir: str) -> list[int]:
    """The numeric version dirs of an export base that hold a SavedModel, newest first: one
    without saved_model.pb (an export being written, or cut off) is no version yet. The rule
    of predict and of trainer.serve."""
    root = model_dir.rstrip("/")
    if not tf.io.gfile.isdir(root):
        return []
    return sorted((int(name.strip("/")) for name in tf.io.gfile.listdir(root)
                   if name.strip("/").isdigit() and tf.io.gfile.exists(f"{root}/{name.strip('/')}/saved_model.pb")),
                  reverse=True)


def unreadable(flag: str, path: str, error, access: str = "give read access to it") -> str:
    """One line for a `path` TensorFlow failed to read (tf.errors.OpError): no access (the
    fix `access`), or a scheme this TensorFlow has no filesystem for (s3://, hdfs://). The
    rule of predict and of trainer.serve."""
    lines = (error.message or "").splitlines()
    if isinstance(error, tf.errors.UnimplementedError):
        access = "this TensorFlow reads local paths and gs:// only; copy it to one of those"
    return f"{flag}: cannot read {path} ({lines[0] if lines else error.__class__.__name__}); {access}"


def absent_export_bucket(model_dir: str) -> str | None:
    """The line for a --model-dir in a gs:// bucket that does not exist, else None: the rule
    of predict and of trainer.serve when they find no SavedModel."""
    if gone := outputs.absent_bucket(model_dir):
        return f"--model-dir: {gone} ({model_dir}); give the bucket the job exported to"
    return None


def resolve(model_dir: str) -> str:
    """The SavedModel dir: `model_dir` itself, or its newest numbered subdir."""
    root = model_dir.rstrip("/")
    try:
        if tf.io.gfile.exists(f"{root}/saved_model.pb"):
            return model_dir
        stamps = saved_versions(root)
    except tf.errors.OpError as error:  # permission denied, s3:// (no filesystem for it here), ...
        raise RequestError(unreadable("--model-dir", model_dir, error, "give read access to the export")) from None
    if not stamps:
        if line := absent_export_bucket(model_dir):
            raise RequestError(line)
        base = f"{model_dir.rstrip('/')}/export"
        if tf.io.gfile.isdir(base):  # the job dir itself
            raise RequestError(f"--model-dir: no SavedModel at {model_dir}, a job dir; pass {base} (its newest "
                               "version is used)")
        raise RequestError(f"--model-dir: no SavedModel at {model_dir}; pass JOB_DIR/export (its newest version "
                           "is used) or JOB_DIR/export/<version>")
    return f"{root}/{stamps[0]}"


def load(path: str):
    """The SavedModel at `path`; RequestError naming --model-dir when it cannot be loaded (a
    cut-off or corrupt export, an op this TensorFlow lacks). The rule of predict and of
    trainer.serve."""
    try:
        return tf.saved_model.load(path)
    except (OSError, ValueError, tf.errors.OpError) as error:
        lines = [line.strip() for line in (getattr(error, "message", None) or str(error)).splitlines() if line.strip()]
        reason = lines[0] if lines else error.__class__.__name__
        raise RequestError(f"--model-dir: cannot load the SavedModel {path} ({reason}); export it again, or pass "
                           "another version dir") from None


STDIN = "-"  # gcloud's name for standard input


def check_instances_file(path: str) -> None:
    """One line naming --json-instances when `path` is no file to read."""
    if path == STDIN:
        return
    try:
        if tf.io.gfile.isdir(path):
            raise RequestError(f"--json-instances: {path}: a directory; pass a file with one JSON instance per line")
        if not tf.io.gfile.exists(path):
            raise RequestError(f"--json-instances: {path}: no such file")
    except tf.errors.OpError as error:
        raise RequestError(unreadable("--json-instances", path, error)) from None


def instance_lines(path: str) -> list[tuple[int, str]]:
    """(number, line) of each non-blank line of a --json-instances file, as gcloud reads it:
    a UTF-8 byte order mark (Windows editors write one) is no part of line 1. `-`: stdin."""
    try:
        if path == STDIN:
            text = sys.stdin.read().removeprefix("\ufeff")
        else:
            with tf.io.gfile.GFile(path) as handle:
                text = handle.read().removeprefix("\ufeff")
    except tf.errors.OpError as error:  # a gs:// object it may not read
        raise RequestError(unreadable("--json-instances", path, error)) from None
    except UnicodeDecodeError:
        raise RequestError(f"--json-instances: cannot read {'stdin' if path == STDIN else path} (not UTF-8 text); "
                           "write one JSON instance per line") from None
    return [(number, line) for number, line in enumerate(text.split("\n"), 1) if line.strip()]


def key_of(value: dict, number: int) -> int | None:
    """The integer "key" of one instance object, or None when it has none."""
    key = value.get(KEY)
    if key is not None and (isinstance(key, bool) or not isinstance(key, int)):
        raise RequestError(f"--json-instances line {number}: key must be an integer, got {json.dumps(key)}")
    return key


def key_column(keys: list[int | None]) -> np.ndarray | None:
    """int64 [N] of the instances' keys, or None when no instance has one."""
    if all(key is None for key in keys):
        return None
    missing = [str(number) for number, key in enumerate(keys, 1) if key is None]
    if missing:
        raise RequestError(f"--json-instances: line(s) {', '.join(missing[:5])} have no \"key\" while others do; "
                           "give every instance a key, or none")
    return np.asarray(keys, dtype=np.int64)


def read_instances(path: str) -> tuple[list[tuple[int, object]], np.ndarray | None]:
    """([(line number, instance without its "key")], keys int64 [N] or None) of a
    --json-instances file: each line one JSON instance, as the model server's rows."""
    rows, keys = [], []
    for number, line in instance_lines(path):
        try:
            value = json.loads(line)
        except json.JSONDecodeError as error:
            raise RequestError(f"--json-instances line {number}: not JSON ({error.msg})") from None
        if key := body_key(value):
            raise RequestError(f"--json-instances line {number}: a whole request body ({{\"{key}\": [...]}}), not "
                               "an instance; write one JSON instance per line (launcher predict --json-request "
                               "takes a request body)")
        if isinstance(value, dict) and KEY in value:
            keys.append(key_of(value, number))
            value = {name: item for name, item in value.items() if name != KEY}
        else:
            keys.append(None)
        rows.append((number, value))
    if not rows:
        raise RequestError(f"--json-instances: {'stdin' if path == STDIN else path} holds no instances")
    return rows, key_column(keys)


def inputs_of(function) -> dict[str, tf.TensorSpec]:
    return function.structured_input_signature[1]


def named(signatures, name: str):
    """The signature `name`, or one line naming the ones the SavedModel has."""
    if name not in signatures:
        raise RequestError(f"--signature-name: the SavedModel has no signature {name!r}; it has "
                           f"{', '.join(sorted(signatures))}")
    return signatures[name]


def choose(signatures, name: str | None, keyed: bool) -> str:
    """The name of the signature for instances with (or without) keys: `name`
    (--signature-name) checked against them, else the rule of the module doc."""
    if name is not None:
        takes_key = KEY in inputs_of(named(signatures, name))
        if keyed and not takes_key:
            raise RequestError(f"--signature-name {name}: it takes no \"key\"; leave the keys out of the "
                               "instances, or drop --signature-name")
        if takes_key and not keyed:
            raise RequestError(f"--signature-name {name}: it takes a \"key\" on every instance; add keys")
        return name
    default = set(inputs_of(named(signatures, DEFAULT)))
    if (KEY in default) == keyed:
        return DEFAULT
    if keyed:
        raise RequestError(f"--json-instances: the instances carry a \"key\", which the model does not take "
                           f"({DEFAULT} takes {', '.join(sorted(default))}); leave the keys out")
    matches = [other for other in sorted(signatures) if set(inputs_of(signatures[other])) == default - {KEY}]
    if len(matches) != 1:
        raise RequestError(f"--json-instances: the instances carry no \"key\", which {DEFAULT} takes; "
                           "give every instance an integer key, or pass --signature-name")
    return matches[0]


def instance_defaults(loaded) -> dict:
    """The value of each input a request may leave out, from a SavedModel that carries
    `instance_defaults()` and `required_fields()` (a model of raw fields, e.g. taxi's); {}
    otherwise. The rule of predict and of trainer.serve."""
    if not hasattr(loaded, "instance_defaults"):
        return {}
    required = {field.decode() for field in loaded.required_fields().numpy()}
    defaults = {key: value.numpy() for key, value in loaded.instance_defaults().items() if key not in required}
    return {key: value.decode() if isinstance(value, bytes) else value.item() for key, value in defaults.items()}


def columns(rows: list[tuple[int, object]], inputs: dict[str, tf.TensorSpec], signature: str,
            defaults: dict) -> dict[str, np.ndarray]:
    """One array per input of the signature (`inputs`, "key" left out) from the instances,
    each read as the model server reads a row (trainer.serve.codec): the value of the only
    input, or an object naming the inputs, those with a default left out at will, {"b64":
    ...} for binary strings. A problem is one line naming the file's line."""
    specs = {name: codec.input_spec(name, spec) for name, spec in inputs.items()}
    found: dict[str, list[np.ndarray]] = {name: [] for name in specs}
    first = rows[0][0]
    for number, value in rows:
        try:
            arrays = codec.to_arrays(codec.Request(signature, False, [value]), specs, defaults)
        except codec.RequestError as error:
            raise RequestError(f"--json-instances line {number}: {str(error).removeprefix('instance 0: ')}") from None
        for name, array in arrays.items():
            shape, before = list(array.shape[1:]), found[name] and list(found[name][0].shape[1:])
            if found[name] and shape != before:  # one batch, as the server's
                raise RequestError(f"--json-instances line {number}: input {name!r} has shape {shape} where line "
                                   f"{first}'s has {before}; give every instance one shape")
            found[name].append(array)
    return {name: np.concatenate(arrays) for name, arrays in found.items()}


def predict(loaded, rows: list[tuple[int, object]], keys: np.ndarray | None,
            signature: str | None = None) -> dict[str, np.ndarray]:
    """Outputs of `signature` (default: see the module doc) for the instances and their
    keys; without keys, no "key" output (an unkeyed signature's row index)."""
    name = choose(loaded.signatures, signature, keys is not None)
    function = loaded.signatures[name]
    inputs = {key: spec for key, spec in inputs_of(function).items() if key != KEY}
    feed = {key: tf.constant(value, inputs[key].dtype)
            for key, value in columns(rows, inputs, name, instance_defaults(loaded)).items()}
    if keys is not None:
        feed[KEY] = tf.constant(keys)
    outputs = {key: value.numpy() for key, value in function(**feed).items()}
    if keys is None:
        outputs.pop(KEY, None)
    return outputs


def table(outputs: dict[str, np.ndarray]) -> list[str]:
    """The outputs, one column each (KEY first), one row per instance: a single number as
    it is (4 decimals for a fraction), more as a list."""
    names = sorted(outputs, key=lambda name: (name != KEY, name))
    lines = ["  ".join(name.upper() for name in names)]
    for row in range(len(next(iter(outputs.values())))):
        cells = []
        for name in names:
            value = np.asarray(outputs[name][row]).reshape(-1)
            cells.append(_cell(value).ljust(len(name)))
        lines.append("  ".join(cells).rstrip())
    return lines


def _cell(value: np.ndarray) -> str:
    def one(item) -> str:
        if value.dtype.kind == "f":
            return f"{item:.4f}"
        return item.decode(errors="backslashreplace") if isinstance(item, bytes) else str(item)
    return one(value[0]) if value.size == 1 else f"[{', '.join(one(item) for item in value)}]"


@command("trainer.predict")  # Ctrl-C: `Interrupted.`, exit 130
def main(argv: list[str] | None = None) -> int:
    lazy.quiet_tensorflow()
    parser = Parser(prog="python -m trainer.predict", description=__doc__, label="trainer.predict",
                    formatter_class=argparse.RawDescriptionHelpFormatter)  # one-line errors, as those below
    parser.add_argument("--model-dir", required=True, help="JOB_DIR/export (its newest version is used) or one "
                        "version's dir JOB_DIR/export/<version>, local or gs://",
                        type=functools.partial(location, what="JOB_DIR/export or JOB_DIR/export/<version>"))
    parser.add_argument("--json-instances", required=True, help="file with one JSON instance per line, local or "
                        "gs:// (- for stdin, as gcloud)",
                        type=functools.partial(location, what="a file with one JSON instance per line"))
    parser.add_argument("--signature-name", default=None,
                        help="signature to call, as `gcloud ai-platform predict --signature-name` (default: "
                             "serving_default for instances with keys, or when it takes none; else the signature "
                             "taking serving_default's inputs without \"key\", e.g. an export's unkeyed)")
    args = parser.parse_args(argv)
    try:
        check_instances_file(args.json_instances)
        loaded = load(resolve(args.model_dir))
        rows, keys = read_instances(args.json_instances)
        outputs = predict(loaded, rows, keys, args.signature_name)
    except (RequestError, tf.errors.NotFoundError) as error:
        print(f"trainer.predict: {error}", file=sys.stderr)
        return 2
    print("\n".join(table(outputs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
