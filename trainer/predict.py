"""Local online prediction against an exported SavedModel, like `gcloud ... predict`:

    python -m trainer.predict --model-dir JOB_DIR/export/1700000000 --json-instances request.json

    KEY  CLASSES  PROBABILITIES
    0    7        [0.0000, 0.0000, ..., 0.9991, 0.0000, 0.0002]

Image models (MNIST): each line of --json-instances is {"image": [...], "key": K} ("key"
optional) or a bare image list.

Keys: an integer "key" on every line, or on none (a string key, or keys on only some
lines, are refused naming the line). Without --signature-name, instances with keys go to
`serving_default`, which takes the key and returns it (as TF Serving and KServe serve the
export); instances without keys go to `serving_default` when it takes no key, else to the
one signature whose inputs are serving_default's without "key" (MNIST: `unkeyed`, whose
`key` output is the row index).

Feature models (`--model taxi`: the SavedModel has `instance_defaults()`): each line is
an object of raw fields, e.g. {"trip_miles": 3.1, "trip_seconds": 600, "fare": 10.25,
"payment_type": "Credit Card", "company": "Taxi Affiliation Services"} (keys as above, when
the model's signatures take one); a field left
out gets the model's default, a required one left out, an unknown field or a value of
the wrong type is refused naming the field.

    CLASSES  LOGISTIC  PROBABILITIES
    1        0.9731    [0.0269, 0.9731]

--model-dir may also be JOB_DIR/export (the newest export is used).
"""
from __future__ import annotations

import argparse
import functools
import json
import sys

import numpy as np

from trainer import lazy
from trainer.flags import Parser, location
from trainer.outputs import command

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


def resolve(model_dir: str) -> str:
    """The SavedModel dir: `model_dir` itself, or its newest numbered subdir."""
    if tf.io.gfile.exists(f"{model_dir.rstrip('/')}/saved_model.pb"):
        return model_dir
    root = model_dir.rstrip("/")
    stamps = saved_versions(root)
    if not stamps:
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


def check_instances_file(path: str) -> None:
    """One line naming --json-instances when `path` is no file to read."""
    if tf.io.gfile.isdir(path):
        raise RequestError(f"--json-instances: {path}: a directory; pass a file with one JSON instance per line")
    if not tf.io.gfile.exists(path):
        raise RequestError(f"--json-instances: {path}: no such file")


def instance_lines(path: str) -> list[tuple[int, str]]:
    """(number, line) of each non-blank line of a --json-instances file, as gcloud reads it:
    a UTF-8 byte order mark (Windows editors write one) is no part of line 1."""
    with tf.io.gfile.GFile(path) as handle:
        text = handle.read().removeprefix("\ufeff")
    return [(number, line) for number, line in enumerate(text.split("\n"), 1) if line.strip()]


def image(value, number: int) -> np.ndarray:
    try:
        pixels = np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError):
        raise RequestError(f"--json-instances line {number}: image must be numbers in [0, 1]") from None
    if pixels.size != 784:
        raise RequestError(f"--json-instances line {number}: image has {pixels.size} values; "
                           "send 784 (28x28) floats in [0, 1]")
    return pixels.reshape(784)


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


def instance(line: str, number: int) -> tuple[np.ndarray, int | None]:
    """(image, key or None) of one --json-instances line."""
    try:
        value = json.loads(line)
    except json.JSONDecodeError as error:
        raise RequestError(f"--json-instances line {number}: not JSON ({error.msg})") from None
    if not isinstance(value, dict):
        return image(value, number), None
    if "image" not in value:
        raise RequestError(f"--json-instances line {number}: no \"image\" field")
    return image(value["image"], number), key_of(value, number)


def read_instances(path: str) -> tuple[np.ndarray, np.ndarray | None]:
    """(images float32 [N,784], keys int64 [N] or None) from a --json-instances file."""
    rows = [instance(line, number) for number, line in instance_lines(path)]
    if not rows:
        raise RequestError(f"--json-instances: {path} holds no instances")
    return np.stack([pixels for pixels, _ in rows]), key_column([key for _, key in rows])


def inputs_of(function) -> dict[str, tf.TensorSpec]:
    return function.structured_input_signature[1]


def named(signatures, name: str):
    """The signature `name`, or one line naming the ones the SavedModel has."""
    if name not in signatures:
        raise RequestError(f"--signature-name: the SavedModel has no signature {name!r}; it has "
                           f"{', '.join(sorted(signatures))}")
    return signatures[name]


def choose(signatures, name: str | None, keyed: bool):
    """The signature for instances with (or without) keys: `name`
    (--signature-name) checked against them, else the rule of the module doc."""
    if name is not None:
        takes_key = KEY in inputs_of(named(signatures, name))
        if keyed and not takes_key:
            raise RequestError(f"--signature-name {name}: it takes no \"key\"; leave the keys out of the "
                               "instances, or drop --signature-name")
        if takes_key and not keyed:
            raise RequestError(f"--signature-name {name}: it takes a \"key\" on every instance; add keys")
        return signatures[name]
    default = set(inputs_of(named(signatures, DEFAULT)))
    if (KEY in default) == keyed:
        return signatures[DEFAULT]
    if keyed:
        raise RequestError(f"--json-instances: the instances carry a \"key\", which the model does not take "
                           f"({DEFAULT} takes {', '.join(sorted(default))}); leave the keys out")
    matches = [other for other in sorted(signatures) if set(inputs_of(signatures[other])) == default - {KEY}]
    if len(matches) != 1:
        raise RequestError(f"--json-instances: the instances carry no \"key\", which {DEFAULT} takes; "
                           "give every instance an integer key, or pass --signature-name")
    return signatures[matches[0]]


# ---- feature models ----------------------------------------------------------------
KINDS = {"float32": "a number", "int64": "an integer", "string": "a string"}  # by DType.name


def field_value(name: str, value, dtype: tf.DType, number: int):
    """One raw field of a json instance, checked against the signature's dtype."""
    ok = (isinstance(value, str) if dtype == tf.string
          else not isinstance(value, bool) and (isinstance(value, int) or (dtype == tf.float32 and isinstance(value, float))))
    if not ok:
        raise RequestError(f"--json-instances line {number}: field \"{name}\" must be {KINDS[dtype.name]}, "
                           f"got {json.dumps(value)}")
    return value


def feature_rows(path: str, inputs: dict[str, tf.TensorSpec], defaults: dict, required: set[str]
                 ) -> tuple[dict, np.ndarray | None]:
    """({field: np array [N]}, keys int64 [N] or None) of a --json-instances file for a
    feature model's signature (`inputs`: its raw fields, "key" left out)."""
    columns: dict[str, list] = {name: [] for name in inputs}
    keys: list[int | None] = []
    lines = instance_lines(path)
    if not lines:
        raise RequestError(f"--json-instances: {path} holds no instances")
    for number, line in lines:
        try:
            value = json.loads(line)
        except json.JSONDecodeError as error:
            raise RequestError(f"--json-instances line {number}: not JSON ({error.msg})") from None
        if not isinstance(value, dict):
            raise RequestError(f"--json-instances line {number}: an instance is an object of fields, "
                               f"e.g. {{\"{sorted(required or inputs)[0]}\": ...}}")
        keys.append(key_of(value, number))
        value = {field: item for field, item in value.items() if field != KEY}
        unknown = sorted(set(value) - set(inputs))
        if unknown:
            raise RequestError(f"--json-instances line {number}: unknown field \"{unknown[0]}\"; the model takes "
                               f"{', '.join(sorted(inputs))}")
        for name, spec in inputs.items():
            if name not in value:
                if name in required or name not in defaults:
                    raise RequestError(f"--json-instances line {number}: missing required field \"{name}\"")
                columns[name].append(defaults[name])
            else:
                columns[name].append(field_value(name, value[name], spec.dtype, number))
    return ({name: np.asarray(values, dtype=inputs[name].dtype.as_numpy_dtype if inputs[name].dtype != tf.string
                              else object) for name, values in columns.items()}, key_column(keys))


def instance_defaults(loaded) -> tuple[dict, set[str]]:
    """(default of each field a request may leave out, required fields) of a feature
    model's SavedModel (one with `instance_defaults()`, e.g. taxi); ({}, set()) otherwise."""
    if not hasattr(loaded, "instance_defaults"):
        return {}, set()
    defaults = {key: value.numpy() for key, value in loaded.instance_defaults().items()}
    defaults = {key: value.decode() if isinstance(value, bytes) else value.item() for key, value in defaults.items()}
    return defaults, {field.decode() for field in loaded.required_fields().numpy()}


def predict_features(loaded, path: str, signature: str | None) -> dict[str, np.ndarray]:
    fields = {key: spec for key, spec in inputs_of(named(loaded.signatures, signature or DEFAULT)).items()
              if key != KEY}
    defaults, required = instance_defaults(loaded)
    columns, keys = feature_rows(path, fields, defaults, required)
    function = choose(loaded.signatures, signature, keys is not None)
    inputs = inputs_of(function)
    feed = {key: tf.constant(value, inputs[key].dtype) for key, value in columns.items()}
    if keys is not None:
        feed[KEY] = tf.constant(keys)
    return {key: value.numpy() for key, value in function(**feed).items()}


def feature_table(outputs: dict[str, np.ndarray]) -> list[str]:
    names = sorted(outputs, key=lambda name: (name != KEY, name))
    lines = ["  ".join(name.upper() for name in names)]
    for row in range(len(next(iter(outputs.values())))):
        cells = []
        for name in names:
            value = np.asarray(outputs[name][row]).reshape(-1)
            text = (f"{value[0]:.4f}" if value.size == 1 and value.dtype.kind == "f" else
                    str(value[0]) if value.size == 1 else f"[{', '.join(f'{v:.4f}' for v in value)}]")
            cells.append(text.ljust(len(name)))
        lines.append("  ".join(cells).rstrip())
    return lines


def predict(model_dir: str, images: np.ndarray, keys: np.ndarray | None,
            signature: str | None = None) -> dict[str, np.ndarray]:
    """Outputs of `signature` (default: see the module doc) for images and their keys."""
    loaded = load(resolve(model_dir))
    function = choose(loaded.signatures, signature, keys is not None)
    feed = {"image": tf.constant(images)}
    if keys is not None:
        feed[KEY] = tf.constant(keys)
    outputs = function(**feed)
    return {name: value.numpy() for name, value in outputs.items()}


def table(outputs: dict[str, np.ndarray], keyed: bool) -> list[str]:
    header = ("KEY  " if keyed else "") + "CLASSES  PROBABILITIES"
    lines = [header]
    for key, cls, probs in zip(outputs["key"], outputs["classes"], outputs["probabilities"]):
        row = f"{int(key):<5d}" if keyed else ""
        lines.append(f"{row}{int(cls):<9d}[{', '.join(f'{p:.4f}' for p in probs)}]")
    return lines


@command("trainer.predict")  # Ctrl-C: `Interrupted.`, exit 130
def main(argv: list[str] | None = None) -> int:
    lazy.quiet_tensorflow()
    parser = Parser(prog="python -m trainer.predict", description=__doc__, label="trainer.predict",
                    formatter_class=argparse.RawDescriptionHelpFormatter)  # one-line errors, as those below
    parser.add_argument("--model-dir", required=True, help="JOB_DIR/export (its newest version is used) or one "
                        "version's dir JOB_DIR/export/<version>, local or gs://",
                        type=functools.partial(location, what="JOB_DIR/export or JOB_DIR/export/<version>"))
    parser.add_argument("--json-instances", required=True, help="file with one JSON instance per line",
                        type=functools.partial(location, what="a file with one JSON instance per line"))
    parser.add_argument("--signature-name", default=None,
                        help="signature to call, as `gcloud ai-platform predict --signature-name` (default: "
                             "serving_default for instances with keys, or when it takes none; else the signature "
                             "taking serving_default's inputs without \"key\", e.g. MNIST's unkeyed)")
    args = parser.parse_args(argv)
    try:
        check_instances_file(args.json_instances)
        loaded = load(resolve(args.model_dir))
        if hasattr(loaded, "instance_defaults"):  # a feature model (taxi)
            print("\n".join(feature_table(predict_features(loaded, args.json_instances, args.signature_name))))
            return 0
        images, keys = read_instances(args.json_instances)
        outputs = predict(args.model_dir, images, keys, args.signature_name)
    except (RequestError, tf.errors.NotFoundError) as error:
        print(f"trainer.predict: {error}", file=sys.stderr)
        return 2
    print("\n".join(table(outputs, keys is not None)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
