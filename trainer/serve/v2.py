"""The Open Inference Protocol's REST inference (KServe's "v2" protocol, also Triton's and
MLServer's) <-> numpy arrays, with its binary data extension. Pure data handling, no
TensorFlow; every problem with a request is a `RequestError` (HTTP 400 `{"error": ...}`).

https://kserve.github.io/website/docs/concepts/architecture/data-plane/v2-protocol

    POST /v2/models/NAME[/versions/V]/infer
    {"id": "...",                                   optional, echoed
     "parameters": {"signature_name": "...",        optional, default serving_default
                    "binary_data_output": true},    optional: every output as binary
     "inputs": [{"name": "image", "datatype": "FP32", "shape": [64, 784],
                 "data": [...]}                     row-major, flat or nested
                | {..., "parameters": {"binary_data_size": 200704}}],
     "outputs": [{"name": "classes", "parameters": {"binary_data": true}}]}   optional

Binary data extension: with the header `Inference-Header-Content-Length: N` the body's
first N bytes are the JSON above and the rest the raw tensors of the inputs that give
`binary_data_size`, in their order (little-endian, row-major; a BYTES element is a 4-byte
little-endian length and its bytes). An image batch then costs no JSON parsing at all:
this is the format for throughput. Binary outputs follow the JSON of the answer the same
way, and the answer carries the same header.
"""
from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from trainer.serve.codec import DEFAULT_SIGNATURE, InputSpec, RequestError, check_names, check_shape, loads

HEADER_LENGTH = "inference-header-content-length"

# the protocol's tensor datatypes (BF16 has no numpy dtype and is not offered)
DTYPES = {"BOOL": np.dtype(np.bool_), "UINT8": np.dtype(np.uint8), "UINT16": np.dtype(np.uint16),
          "UINT32": np.dtype(np.uint32), "UINT64": np.dtype(np.uint64), "INT8": np.dtype(np.int8),
          "INT16": np.dtype(np.int16), "INT32": np.dtype(np.int32), "INT64": np.dtype(np.int64),
          "FP16": np.dtype(np.float16), "FP32": np.dtype(np.float32), "FP64": np.dtype(np.float64),
          "BYTES": np.dtype(object)}
NAMES = {dtype: name for name, dtype in DTYPES.items()}


def datatype(dtype: np.dtype) -> str:
    """The protocol's name of a numpy dtype (strings, bytes and objects are BYTES)."""
    if dtype.kind in "OSU":
        return "BYTES"
    try:
        return NAMES[np.dtype(dtype).newbyteorder("=")]
    except KeyError:
        raise RequestError(f"an output of dtype {dtype} has no Open Inference Protocol datatype") from None


@dataclass(frozen=True)
class InferRequest:
    id: str | None
    signature_name: str
    arrays: dict[str, np.ndarray]
    outputs: tuple[str, ...] | None       # the outputs asked for (None: all)
    binary: dict[str, bool]               # per output asked for: binary or JSON
    binary_default: bool


def _json(header: bytes) -> dict:
    try:
        body = loads(header)
    except ValueError as error:  # json.JSONDecodeError and orjson.JSONDecodeError
        raise RequestError(f"the request is not JSON ({error}); send the Open Inference Protocol's "
                           'object with "inputs"') from None
    if not isinstance(body, dict):
        raise RequestError(f'the request must be a JSON object with "inputs", not {type(body).__name__}')
    return body


def _split(body: bytes, headers: dict[str, str]) -> tuple[bytes, memoryview]:
    """(JSON header, binary tail) of a request body."""
    length = headers.get(HEADER_LENGTH)
    if length is None:
        return body, memoryview(b"")
    if not length.isdigit() or int(length) > len(body):
        raise RequestError(f"Inference-Header-Content-Length: {length!r} is not a length within the body's "
                           f"{len(body)} bytes; give the byte length of the JSON that starts the body")
    return body[:int(length)], memoryview(body)[int(length):]


def _bytes_elements(raw: memoryview, count: int, where: str) -> np.ndarray:
    values, offset = [], 0
    for _ in range(count):
        if offset + 4 > len(raw):
            raise RequestError(f"{where}: the binary data ends inside an element's 4-byte length")
        (size,) = struct.unpack_from("<I", raw, offset)
        offset += 4
        if offset + size > len(raw):
            raise RequestError(f"{where}: an element's length ({size}) runs past the binary data")
        values.append(bytes(raw[offset:offset + size]))
        offset += size
    if offset != len(raw):
        raise RequestError(f"{where}: binary_data_size holds {len(raw) - offset} bytes beyond the {count} elements")
    return np.array(values, dtype=object)


def _reshaped(array: np.ndarray, shape: tuple[int, ...], where: str) -> np.ndarray:
    try:
        return array.reshape(shape)
    except ValueError:  # dimensions no array can have, even without values ([0, 2**63])
        raise RequestError(f'{where}: "shape" {list(shape)} is larger than any array can be') from None


def _shape(value: Any, where: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                              for d in value):
        raise RequestError(f'{where}: "shape" must be a list of non-negative integers')
    return tuple(value)


def _from_json(data: Any, dtype: np.dtype, shape: tuple[int, ...], where: str) -> np.ndarray:
    if dtype == np.dtype(object):
        try:
            flat = np.asarray(data, dtype=object).reshape(-1) if isinstance(data, list) else None
        except ValueError:  # ragged
            flat = None
        if flat is None or any(not isinstance(item, str) for item in flat):
            raise RequestError(f"{where}: BYTES data in JSON must be a rectangular list of strings")
        array = np.array([item.encode() for item in flat], dtype=object)
    else:
        try:
            array = np.asarray(data)
        except (TypeError, ValueError, OverflowError):
            raise RequestError(f"{where}: \"data\" is not a rectangular array of numbers") from None
        kinds = {"b": "b", "i": "iu", "u": "iu"}.get(dtype.kind, "iuf")
        if array.dtype.kind not in kinds:
            want = {"b": "booleans", "iu": "integers"}.get(kinds, "numbers")
            raise RequestError(f"{where}: datatype {NAMES[dtype]} needs JSON {want} in \"data\"")
        try:  # integers one by one: a value out of the dtype's range is an error, not wrapped
            array = np.asarray(data, dtype=dtype) if kinds == "iu" else array.astype(dtype)
        except OverflowError:
            raise RequestError(f"{where}: a value is out of the range of {NAMES[dtype]}") from None
    needed = math.prod(shape)  # a Python int: numpy's int64 product wraps ([2**32, 2**32] needed 0)
    if array.size != needed:
        raise RequestError(f"{where}: \"data\" holds {array.size} values, shape {list(shape)} needs {needed}")
    return _reshaped(array, shape, where)


def _input(item: Any, number: int, tail: memoryview, offset: int) -> tuple[str, np.ndarray, int]:
    where = f"inputs[{number}]"
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        raise RequestError(f'{where}: each input is an object with a "name", "datatype" and "shape"')
    where = f"input {item['name']!r}"
    name = item["name"]
    kind = item.get("datatype")
    if kind not in DTYPES:
        raise RequestError(f"{where}: datatype {kind!r} is not one of {', '.join(DTYPES)}")
    dtype, shape = DTYPES[kind], _shape(item.get("shape"), where)
    parameters = item.get("parameters") or {}
    if not isinstance(parameters, dict):
        raise RequestError(f'{where}: "parameters" must be an object')
    size = parameters.get("binary_data_size")
    if size is not None:
        if "data" in item:
            raise RequestError(f'{where}: give "data" or parameters.binary_data_size, not both')
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise RequestError(f"{where}: binary_data_size must be a non-negative integer")
        if not len(tail):
            raise RequestError(f"{where}: binary_data_size without binary data; send the header "
                               "Inference-Header-Content-Length with the JSON's length, the tensors after it")
        if offset + size > len(tail):
            raise RequestError(f"{where}: binary_data_size {size} runs past the {len(tail) - offset} bytes left "
                               "in the body")
        raw = tail[offset:offset + size]
        count = math.prod(shape)  # a Python int: numpy's int64 product wraps
        if dtype == np.dtype(object):
            array = _reshaped(_bytes_elements(raw, count, where), shape, where)
        else:
            if size != count * dtype.itemsize:
                raise RequestError(f"{where}: binary_data_size {size} != {count} values of {kind} "
                                   f"({count * dtype.itemsize} bytes) for shape {list(shape)}")
            array = _reshaped(np.frombuffer(raw, dtype=dtype.newbyteorder("<")), shape, where)
        return name, array, offset + size
    if "data" not in item:
        raise RequestError(f'{where}: no "data" and no parameters.binary_data_size')
    return name, _from_json(item["data"], dtype, shape, where), offset


def parse(body: bytes, headers: dict[str, str]) -> InferRequest:
    """A request body (and its headers, lower-case names) as an `InferRequest`."""
    header, tail = _split(body, headers)
    request = _json(header)
    parameters = request.get("parameters") or {}
    if not isinstance(parameters, dict):
        raise RequestError('"parameters" must be an object')
    signature = parameters.get("signature_name", DEFAULT_SIGNATURE)
    if not isinstance(signature, str):
        raise RequestError("parameters.signature_name must be a string")
    inputs = request.get("inputs")
    if not isinstance(inputs, list) or not inputs:
        raise RequestError('"inputs" must be a non-empty list of tensors')
    arrays, offset = {}, 0
    for number, item in enumerate(inputs):
        name, array, offset = _input(item, number, tail, offset)
        if name in arrays:
            raise RequestError(f"input {name!r} is given twice")
        arrays[name] = array
    if offset != len(tail):
        raise RequestError(f"the body holds {len(tail) - offset} bytes after the JSON that no input's "
                           "binary_data_size accounts for")
    binary_default = parameters.get("binary_data_output", False) is True
    wanted, binary = None, {}
    if request.get("outputs") is not None:
        if not isinstance(request["outputs"], list) or not all(
                isinstance(o, dict) and isinstance(o.get("name"), str) for o in request["outputs"]):
            raise RequestError('"outputs" must be a list of objects with a "name"')
        wanted = tuple(o["name"] for o in request["outputs"])
        for o in request["outputs"]:
            flag = (o.get("parameters") or {}).get("binary_data", binary_default)
            binary[o["name"]] = flag is True
    ident = request.get("id")
    return InferRequest(None if ident is None else str(ident), signature, arrays, wanted, binary, binary_default)


def check_inputs(arrays: dict[str, np.ndarray], specs: dict[str, InputSpec], signature: str,
                 defaults: dict | None = None) -> dict[str, np.ndarray]:
    """The request's tensors, checked against the signature; an input left out that has a
    default (a feature model's optional field) is filled in for the batch."""
    names = sorted(specs)
    defaults = defaults or {}
    check_names(arrays, names, signature, "inputs", defaults)
    checked = {}
    for name, array in arrays.items():
        spec = specs[name]
        if datatype(array.dtype) != datatype(spec.dtype):
            raise RequestError(f"input {name!r}: datatype {datatype(array.dtype)} given, signature {signature!r} "
                               f"takes {datatype(spec.dtype)}")
        check_shape(array, spec, f"input {name!r}")
        checked[name] = array
    left_out = [name for name in names if name not in arrays]
    if left_out:
        batch = {array.shape[0] for array in arrays.values() if array.ndim}
        if len(batch) != 1:
            shapes = ", ".join(f"{name} {list(array.shape)}" for name, array in sorted(arrays.items()))
            raise RequestError(f"input {left_out[0]!r} is left out, so its default fills a batch; give the other "
                               f"inputs one batch dimension (shapes: {shapes})")
        (size,) = batch
        for name in left_out:
            checked[name] = np.asarray([defaults[name]] * size, dtype=specs[name].dtype)
    return checked


def _bytes_tensor(array: np.ndarray) -> bytes:
    parts = []
    for item in array.reshape(-1):
        value = item if isinstance(item, bytes) else str(item).encode()
        parts += [struct.pack("<I", len(value)), value]
    return b"".join(parts)


def response(request: InferRequest, model_name: str, version: str,
             outputs: dict[str, np.ndarray]) -> tuple[bytes, dict[str, str]]:
    """(body, headers) of the answer: the outputs asked for, binary where asked."""
    names = request.outputs if request.outputs is not None else tuple(sorted(outputs))
    unknown = [name for name in names if name not in outputs]
    if unknown:
        raise RequestError(f"output {unknown[0]!r} is not an output of signature {request.signature_name!r} "
                           f"(outputs: {', '.join(sorted(outputs))})")
    described, raws = [], []
    for name in names:
        array = np.asarray(outputs[name])
        entry: dict[str, Any] = {"name": name, "datatype": datatype(array.dtype), "shape": list(array.shape)}
        if request.binary.get(name, request.binary_default):
            raw = _bytes_tensor(array) if entry["datatype"] == "BYTES" else \
                np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
            entry["parameters"] = {"binary_data_size": len(raw)}
            raws.append(raw)
        elif entry["datatype"] == "BYTES":
            entry["data"] = [item.decode(errors="replace") if isinstance(item, bytes) else str(item)
                             for item in array.reshape(-1)]
        else:
            entry["data"] = array.reshape(-1).tolist()
        described.append(entry)
    answer = {"model_name": model_name, "model_version": version, "outputs": described}
    if request.id is not None:
        answer["id"] = request.id
    try:
        import orjson

        head = orjson.dumps(answer)
    except ImportError:
        head = json.dumps(answer).encode()
    if not raws:
        return head, {"content-type": "application/json"}
    return b"".join([head, *raws]), {"content-type": "application/octet-stream", HEADER_LENGTH: str(len(head))}


__all__ = ["DTYPES", "HEADER_LENGTH", "InferRequest", "check_inputs", "datatype", "parse", "response"]
