"""TensorFlow Serving's REST predict format <-> numpy arrays, for one signature.

Pure data handling (no TensorFlow): the server describes a signature's inputs as
`InputSpec`s and calls `parse_body`, `to_arrays` and `to_response`; every problem with a
request is a `RequestError`, which the server answers with HTTP 400 `{"error": ...}`.

Request (https://www.tensorflow.org/tfx/serving/api_rest#predict_api):

    {"signature_name": "...",          optional, default "serving_default"
     "instances": [...]}               row format: one element per example
     | "inputs": {...} or [...]}       columnar format: one value per named input

A row is the value of the signature's only input, or an object naming every input.
`{"b64": "..."}` stands for a binary (string) value. The response is `{"predictions":
[...]}` for the row format (one object per example, or bare values when the signature
has one output) and `{"outputs": ...}` for the columnar format. A string output is text
when it is UTF-8, else `{"b64": ...}`; one whose name ends in `_bytes` is always
`{"b64": ...}`, as TF Serving writes it (its json_tensor.cc, IsNamedTensorBytes).
"""
from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

DEFAULT_SIGNATURE = "serving_default"


class RequestError(ValueError):
    """A request the server cannot accept (answered with HTTP 400)."""


@dataclass(frozen=True)
class InputSpec:
    name: str
    dtype: np.dtype            # object for tf.string
    shape: tuple | None        # None: unknown rank; a None dim: any size

    @property
    def binary(self) -> bool:
        return self.dtype == np.dtype(object)


def input_spec(name: str, spec: Any) -> InputSpec:
    """The InputSpec of a signature's input given as a tf.TensorSpec (read by its
    attributes: no TensorFlow import here)."""
    dtype = np.dtype(object) if spec.dtype.name == "string" else np.dtype(spec.dtype.as_numpy_dtype)
    shape = None if spec.shape.rank is None else tuple(spec.shape.as_list())
    return InputSpec(name, dtype, shape)


@dataclass(frozen=True)
class Request:
    signature_name: str
    columnar: bool
    data: Any  # the value of "instances" or "inputs"


def loads(body: bytes | str) -> Any:
    """JSON as TF Serving reads it: also the tokens NaN, Infinity and -Infinity for float
    values (its REST API's "JSON conformance"), which orjson, the fast path, refuses."""
    try:
        import orjson  # the model server's own JSON library (a kserve dependency)
    except ImportError:
        return json.loads(body)
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return json.loads(body)


def dumps(answer: Any, outputs: dict[str, np.ndarray]) -> bytes:
    """The JSON of an answer made of `outputs`: orjson's, but where a float output holds NaN
    or an infinity, TF Serving's tokens NaN, Infinity and -Infinity (orjson writes null)."""
    if all(array.dtype.kind != "f" or np.isfinite(array).all() for array in outputs.values()):
        try:
            import orjson

            return orjson.dumps(answer)
        except ImportError:
            pass
    return json.dumps(answer).encode()


def parse_body(body: Any) -> Request:
    """The request body (raw bytes or already decoded JSON) as a `Request`."""
    if isinstance(body, (bytes, bytearray, str)):
        try:
            body = loads(body)
        except ValueError as error:  # json.JSONDecodeError and orjson.JSONDecodeError
            raise RequestError(f"the request body is not JSON ({error}); send a JSON object "
                               'with "instances" or "inputs"') from None
    if not isinstance(body, dict):
        raise RequestError('the request body must be a JSON object with "instances" or "inputs", '
                           f"not {type(body).__name__}")
    if "instances" in body and "inputs" in body:
        raise RequestError('the request has both "instances" and "inputs"; send one: instances (row '
                           "format) or inputs (columnar format)")
    if "instances" not in body and "inputs" not in body:
        raise RequestError('the request has neither "instances" nor "inputs"')
    signature = body.get("signature_name", DEFAULT_SIGNATURE)
    if not isinstance(signature, str):
        raise RequestError('"signature_name" must be a string')
    columnar = "inputs" in body
    data = body["inputs"] if columnar else body["instances"]
    if not columnar and (not isinstance(data, list) or not data):
        raise RequestError('"instances" must be a non-empty list (one element per example)')
    return Request(signature, columnar, data)


def _is_b64(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"b64"}


def _decode_b64(value: Any, where: str) -> Any:
    """`value` with every {"b64": ...} object replaced by its bytes."""
    if _is_b64(value):
        if not isinstance(value["b64"], str):
            raise RequestError(f"{where}: a b64 value must be a base64 string")
        try:
            return base64.b64decode(value["b64"], validate=True)
        except (binascii.Error, ValueError):
            raise RequestError(f"{where}: not valid base64") from None
    if isinstance(value, list):
        return [_decode_b64(item, where) for item in value]
    if isinstance(value, str):
        return value.encode()
    return value


def _has_b64(value: Any) -> bool:
    if _is_b64(value):
        return True
    return isinstance(value, list) and any(_has_b64(item) for item in value)


def shape_text(shape: tuple | None) -> str:
    if shape is None:
        return "any shape"
    return "[" + ", ".join("-1" if dim is None else str(dim) for dim in shape) + "]"


_KINDS = {"U": "strings", "S": "strings", "f": "numbers with a fraction or a decimal point (7.0)", "b": "booleans", "c": "complex numbers",
          "O": "null or values of mixed types"}


def _has_bool(value: Any) -> bool:
    """Whether a rectangular value (numpy read it as numbers) holds a JSON boolean. It runs on
    every numeric input of every request: the innermost lists are searched at C speed (a
    call per value cost 6.5 ms on 64 MNIST images, 1.4 ms so)."""
    if not isinstance(value, list):
        return type(value) is bool
    if value and isinstance(value[0], list):  # rectangular: every item a list
        return any(_has_bool(item) for item in value)
    return bool in map(type, value)


def _json_integers(value: Any) -> bool:
    """Whether `value` is a JSON integer or nested lists of them only (not booleans)."""
    if isinstance(value, list):
        return all(_json_integers(item) for item in value)
    return type(value) is int


def _numbers(value: Any, dtype: np.dtype, where: str) -> np.ndarray:
    """The value of a numeric input: JSON numbers only, integers only for an integer input,
    as TensorFlow Serving takes them (its json_tensor.cc: IsNumber / IsInt64); numpy alone
    would read "3.1" as 3.1, true as 1, null as nan and 7.5 as 7. Floats: one conversion
    (numpy's type inference, which tells the kinds apart), then the cast."""
    try:
        inferred = np.asarray(value)
    except (TypeError, ValueError, OverflowError):
        inferred = None  # ragged, or an integer beyond 64 bits
    integers = dtype.kind in "iu"
    if inferred is not None and inferred.size == 0:  # [] (numpy's float64): an empty batch, the shape decides
        return np.zeros(inferred.shape, dtype)
    if inferred is not None and inferred.dtype.kind in "iuf" and _has_bool(value):  # [true, 1] read as [1, 1]
        raise RequestError(f"{where}: expects JSON {'integers' if integers else 'numbers'} ({dtype}), got booleans")
    if inferred is not None and (inferred.dtype.kind == "O" or integers and inferred.dtype.kind == "f") \
            and inferred.size and _json_integers(value):
        # integers no numpy integer type holds (beyond 64 bits, or int64's and uint64's mixed),
        # which numpy reads as objects or floats: the input's dtype decides
        try:
            inferred = np.asarray(value, dtype=dtype if integers else np.float64)
        except OverflowError:
            raise RequestError(f"{where}: a value is out of the range of {dtype}") from None
    if inferred is None or inferred.dtype.kind not in ("iu" if integers else "iuf"):
        if _has_b64(value):
            raise RequestError(f"{where}: b64 values are only for string inputs; this input is {dtype}")
        if inferred is None:
            raise RequestError(f"{where}: not a rectangular array of {dtype} values "
                               "(rows of different lengths, or values of the wrong type)")
        got = _KINDS.get(inferred.dtype.kind, "values of another type")
        raise RequestError(f"{where}: expects JSON {'integers' if integers else 'numbers'} ({dtype}), got {got}")
    if integers:
        try:
            return np.asarray(value, dtype=dtype)  # a value out of the dtype's range is an error, not wrapped
        except OverflowError:
            raise RequestError(f"{where}: a value is out of the range of {dtype}") from None
    with np.errstate(over="ignore"):  # 1e39 as float32 is inf: refused below, not a numpy warning
        array = inferred.astype(dtype, copy=False)
    if np.isinf(array).any() and not np.isinf(inferred).any():
        raise RequestError(f"{where}: a value is out of the range of {dtype}")
    return array


def to_array(value: Any, spec: InputSpec) -> np.ndarray:
    """One input's value as an array of the signature's dtype and a compatible shape."""
    where = f"input {spec.name!r}"
    if spec.dtype.kind in "iuf":
        array = _numbers(value, spec.dtype, where)
    else:
        if spec.binary:
            value = _decode_b64(value, where)
        elif spec.dtype.kind == "b" and _has_b64(value):  # numpy makes True of any object
            raise RequestError(f"{where}: b64 values are only for string inputs; this input is {spec.dtype}")
        try:
            array = np.asarray(value, dtype=spec.dtype)
        except (TypeError, ValueError, OverflowError):
            raise RequestError(f"{where}: not a rectangular array of {spec.dtype} values "
                               "(rows of different lengths, or values of the wrong type)") from None
        others = [item for item in array.flat if not isinstance(item, bytes)] if spec.binary else []
        if others:  # said as the request wrote it: null, 1, true
            raise RequestError(f"{where}: expects strings (or {{\"b64\": ...}} values), got "
                               f"{json.dumps(others[0], default=str)[:40]}")
    check_shape(array, spec, where)
    return array


def check_shape(array: np.ndarray, spec: InputSpec, where: str) -> None:
    """RequestError unless `array` has the signature's rank and its known dimensions."""
    if spec.shape is not None:
        fits = array.ndim == len(spec.shape) and all(
            want is None or want == got for want, got in zip(spec.shape, array.shape))
        if not fits:
            raise RequestError(f"{where}: shape {list(array.shape)} does not match the signature's "
                               f"{shape_text(spec.shape)}")


def check_names(given: dict, names: list[str], signature: str, where: str, defaults: dict) -> None:
    """`given` (one row, or the columnar inputs) names the signature's inputs: all of them
    but those with a default."""
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise RequestError(f"{where}: {unknown[0]!r} is not an input of signature {signature!r} "
                           f"(inputs: {', '.join(names)})")
    missing = [name for name in names if name not in given and name not in defaults]
    if missing:
        raise RequestError(f"{where}: input {missing[0]!r} of signature {signature!r} is missing")


def _row_columns(instances: list, specs: dict[str, InputSpec], signature: str, defaults: dict) -> dict[str, list]:
    names = sorted(specs)
    single = len(names) == 1
    if single and not any(isinstance(row, dict) and not _is_b64(row) for row in instances):
        return {names[0]: instances}
    columns: dict[str, list] = {name: [] for name in names}
    for number, row in enumerate(instances):
        if not isinstance(row, dict) or _is_b64(row):
            raise RequestError(f"instance {number}: signature {signature!r} has inputs {', '.join(names)}; "
                               "send each instance as an object naming them")
        check_names(row, names, signature, f"instance {number}", defaults)
        for name in names:
            columns[name].append(row[name] if name in row else defaults[name])
    return columns


def _columnar(data: Any, specs: dict[str, InputSpec], signature: str, defaults: dict) -> dict[str, Any]:
    names = sorted(specs)
    if isinstance(data, dict) and not _is_b64(data):
        check_names(data, names, signature, "inputs", defaults)
        left_out = [name for name in names if name not in data]
        if left_out:
            lengths = {name: len(value) for name, value in data.items() if isinstance(value, list)}
            if len(set(lengths.values())) != 1:
                given = ", ".join(f"{name} {size} long" for name, size in sorted(lengths.items()))
                raise RequestError(f"inputs: {left_out[0]!r} is left out, so its default fills a batch; give the "
                                   f"other inputs as lists of one length ({given or 'none is a list'})")
            (length,) = set(lengths.values())
            data = dict(data, **{name: [defaults[name]] * length for name in left_out})
        return dict(data)
    if len(names) != 1:
        raise RequestError(f"inputs: signature {signature!r} has inputs {', '.join(names)}; "
                           "send an object naming them")
    return {names[0]: data}


def to_arrays(request: Request, specs: dict[str, InputSpec], defaults: dict | None = None) -> dict[str, np.ndarray]:
    """The request's values as one array per input of the signature; an input left out
    takes its value in `defaults` (a feature model's optional fields), if it has one."""
    if request.columnar:
        values = _columnar(request.data, specs, request.signature_name, defaults or {})
    else:
        values = _row_columns(request.data, specs, request.signature_name, defaults or {})
    return {name: to_array(value, specs[name]) for name, value in values.items()}


BYTES_SUFFIX = "_bytes"  # TF Serving (and Cloud ML before it): a string output so named is binary, always b64


def _jsonable(array: np.ndarray, name: str) -> Any:
    if array.dtype == np.dtype(object) or array.dtype.kind == "S":
        return _text(array.tolist(), name.endswith(BYTES_SUFFIX))
    return array.tolist()


def _text(value: Any, binary: bool) -> Any:
    """Strings as JSON: {"b64": ...} when `binary` (or not UTF-8), else the text."""
    if isinstance(value, list):
        return [_text(item, binary) for item in value]
    if isinstance(value, bytes):
        if not binary:
            try:
                return value.decode()
            except UnicodeDecodeError:
                pass
        return {"b64": base64.b64encode(value).decode()}
    return value


def to_response(outputs: dict[str, np.ndarray], columnar: bool) -> dict:
    """The signature's outputs in the format of the request."""
    names = sorted(outputs)
    if columnar:
        if len(names) == 1:
            return {"outputs": _jsonable(outputs[names[0]], names[0])}
        return {"outputs": {name: _jsonable(outputs[name], name) for name in names}}
    batch = {name: (outputs[name].shape[0] if outputs[name].ndim else None) for name in names}
    sizes = set(batch.values())
    if None in sizes or len(sizes) != 1:
        raise RequestError("the outputs do not share a batch dimension "
                           f"({', '.join(f'{n}: {s}' for n, s in batch.items())}); use the columnar "
                           'format ("inputs")')
    if len(names) == 1:
        return {"predictions": _jsonable(outputs[names[0]], names[0])}
    columns = {name: _jsonable(outputs[name], name) for name in names}
    return {"predictions": [{name: columns[name][row] for name in names} for row in range(sizes.pop())]}
