"""trainer.serve.v2: the Open Inference Protocol's REST inference with its binary data
extension <-> numpy (no TensorFlow). The request bytes are written here by hand, as the
protocol describes them (a JSON header, then little-endian row-major tensors; a BYTES
element is a 4-byte little-endian length and its bytes)."""
from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from trainer.serve.codec import InputSpec, RequestError
from trainer.serve.v2 import check_inputs, parse, response

KEYED = {"image": InputSpec("image", np.dtype(np.float32), None), "key": InputSpec("key", np.dtype(np.int64), (None,))}
TAXI = {"fare": InputSpec("fare", np.dtype(np.float32), (None,)),
        "company": InputSpec("company", np.dtype(object), (None,))}


def binary(header: dict, *tails: bytes) -> tuple[bytes, dict[str, str]]:
    head = json.dumps(header).encode()
    return head + b"".join(tails), {"inference-header-content-length": str(len(head))}


def test_binary_tensors_follow_the_json_header_in_input_order():
    image = struct.pack("<6f", 0.0, 0.5, 1.0, 0.25, 0.75, 1.5)  # [2, 3] row-major
    key = struct.pack("<2q", 7, -9)
    body, headers = binary({"id": "r1", "inputs": [
        {"name": "image", "datatype": "FP32", "shape": [2, 3], "parameters": {"binary_data_size": 24}},
        {"name": "key", "datatype": "INT64", "shape": [2], "parameters": {"binary_data_size": 16}}]}, image, key)
    request = parse(body, headers)
    assert request.id == "r1" and request.signature_name == "serving_default"
    assert request.arrays["image"].dtype == np.float32 and request.arrays["image"].shape == (2, 3)
    assert request.arrays["image"].tolist() == [[0.0, 0.5, 1.0], [0.25, 0.75, 1.5]]
    assert request.arrays["key"].tolist() == [7, -9]
    assert check_inputs(request.arrays, KEYED, "serving_default")["key"].dtype == np.int64


def test_json_data_flat_or_nested_and_bytes_elements_with_their_lengths():
    body, headers = binary({"parameters": {"signature_name": "taxi"}, "inputs": [
        {"name": "fare", "datatype": "FP32", "shape": [2], "data": [3, 4.5]},
        {"name": "company", "datatype": "BYTES", "shape": [2], "parameters": {"binary_data_size": 4 + 3 + 4 + 0}}]},
        struct.pack("<I", 3) + b"Flash"[:3] + struct.pack("<I", 0))
    request = parse(body, headers)
    assert request.signature_name == "taxi"
    assert request.arrays["fare"].dtype == np.float32 and request.arrays["fare"].tolist() == [3.0, 4.5]
    assert request.arrays["company"].tolist() == [b"Fla", b""]
    nested = parse(json.dumps({"inputs": [{"name": "image", "datatype": "FP32", "shape": [2, 2],
                                           "data": [[1, 2], [3, 4]]}]}).encode(), {})
    flat = parse(json.dumps({"inputs": [{"name": "image", "datatype": "FP32", "shape": [2, 2],
                                         "data": [1, 2, 3, 4]}]}).encode(), {})
    assert nested.arrays["image"].tolist() == flat.arrays["image"].tolist() == [[1.0, 2.0], [3.0, 4.0]]


def test_a_left_out_input_with_a_default_is_filled_for_the_batch():
    request = parse(json.dumps({"inputs": [{"name": "fare", "datatype": "FP32", "shape": [3],
                                            "data": [1, 2, 3]}]}).encode(), {})
    filled = check_inputs(request.arrays, TAXI, "serving_default", {"company": b""})
    assert filled["company"].tolist() == [b"", b"", b""]
    with pytest.raises(RequestError, match="inputs: input 'company' of signature 'serving_default' is missing"):
        check_inputs(request.arrays, TAXI, "serving_default")
    specs = dict(TAXI, hour=InputSpec("hour", np.dtype(np.int64), (None,)))
    uneven = parse(json.dumps({"inputs": [{"name": "fare", "datatype": "FP32", "shape": [3], "data": [1, 2, 3]},
                                          {"name": "hour", "datatype": "INT64", "shape": [2], "data": [7, 8]}]}
                              ).encode(), {})
    with pytest.raises(RequestError) as refused:  # the shapes that differ are said, not only what was left out
        check_inputs(uneven.arrays, specs, "serving_default", {"company": b""})
    assert str(refused.value) == ("input 'company' is left out, so its default fills a batch; give the other inputs "
                                  "one batch dimension (shapes: fare [3], hour [2])")


@pytest.mark.parametrize("header, tail, headers, message", [
    ({"inputs": [{"name": "image", "datatype": "FP32", "shape": [2], "parameters": {"binary_data_size": 8}}]},
     b"\0" * 4, None, "binary_data_size 8 runs past the 4 bytes left"),
    ({"inputs": [{"name": "image", "datatype": "FP32", "shape": [3], "parameters": {"binary_data_size": 8}}]},
     b"\0" * 8, None, "binary_data_size 8 != 3 values of FP32 (12 bytes)"),
    ({"inputs": [{"name": "image", "datatype": "FP32", "shape": [1], "parameters": {"binary_data_size": 4}}]},
     b"\0" * 6, None, "2 bytes after the JSON that no input's binary_data_size accounts for"),
    ({"inputs": [{"name": "image", "datatype": "FP32", "shape": [1], "parameters": {"binary_data_size": 4}}]},
     b"", {}, "binary_data_size without binary data"),
    ({"inputs": [{"name": "image", "datatype": "FP128", "shape": [1], "data": [1]}]}, b"", None,
     "datatype 'FP128' is not one of"),
    ({"inputs": [{"name": "image", "datatype": "FP32", "shape": [2, 2], "data": [1, 2, 3]}]}, b"", None,
     '"data" holds 3 values, shape [2, 2] needs 4'),
    ({"inputs": [{"name": "key", "datatype": "INT64", "shape": [1], "data": [1.5]}]}, b"", None,
     "datatype INT64 needs JSON integers"),
    ({"inputs": [{"name": "key", "datatype": "UINT8", "shape": [1], "data": [300]}]}, b"", None,
     "out of the range of UINT8"),
    ({"inputs": [{"name": "image", "datatype": "FP32", "shape": [1], "data": ["0.5"]}]}, b"", None,
     "datatype FP32 needs JSON numbers"),
    ({"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "parameters": {"binary_data_size": 6}}]},
     struct.pack("<I", 5) + b"ab", None, "an element's length (5) runs past the binary data"),
    ({"inputs": []}, b"", None, '"inputs" must be a non-empty list'),
    ({"inputs": [{"name": "image", "datatype": "FP32", "shape": [-1], "data": []}]}, b"", None,
     '"shape" must be a list of non-negative integers'),
    ({"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "parameters": {"binary_data_size": 9}}]},
     struct.pack("<I", 3) + b"abcxy", None, "binary_data_size holds 2 bytes beyond the 1 elements"),
    ({"inputs": [{"name": "text", "datatype": "BYTES", "shape": [2], "data": ["a", 1]}]}, b"", None,
     "BYTES data in JSON must be a rectangular list of strings"),
    ({"inputs": [{"name": "image", "datatype": "FP32", "shape": [1], "data": [1.0],
                  "parameters": {"binary_data_size": 4}}]}, b"\0" * 4, None,
     'give "data" or parameters.binary_data_size, not both'),
    ({"inputs": [{"name": "key", "datatype": "INT64", "shape": [1], "data": [1]},
                 {"name": "key", "datatype": "INT64", "shape": [1], "data": [2]}]}, b"", None,
     "input 'key' is given twice"),
    # numpy's int64 product of the shape wraps to 0 (a ValueError, HTTP 500, at the reshape); Python's does not
    ({"inputs": [{"name": "image", "datatype": "FP32", "shape": [2 ** 32, 2 ** 32], "data": []}]}, b"", None,
     '"data" holds 0 values, shape [4294967296, 4294967296] needs 18446744073709551616'),
    ({"inputs": [{"name": "image", "datatype": "FP32", "shape": [2 ** 32, 2 ** 32],
                  "parameters": {"binary_data_size": 4}}]}, b"\0" * 4, None,
     "binary_data_size 4 != 18446744073709551616 values of FP32"),
    ({"inputs": [{"name": "image", "datatype": "FP32", "shape": [0, 2 ** 63], "data": []}]}, b"", None,
     '"shape" [0, 9223372036854775808] is larger than any array can be'),
])
def test_a_malformed_request_is_one_clear_error(header, tail, headers, message):
    body, given = binary(header, tail)
    with pytest.raises(RequestError, match=message.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")
                       .replace(")", r"\)")):
        parse(body, given if headers is None else headers)


def test_a_header_length_beyond_the_body_or_not_json_is_refused():
    with pytest.raises(RequestError, match="Inference-Header-Content-Length: '99' is not a length within"):
        parse(b'{"inputs": []}', {"inference-header-content-length": "99"})
    for length in ("-1", "abc"):  # not a ValueError out of int() (a 500), nor a slice from the end
        with pytest.raises(RequestError, match=f"Inference-Header-Content-Length: '{length}' is not a length within"):
            parse(b'{"inputs": []}', {"inference-header-content-length": length})
    with pytest.raises(RequestError, match="the request is not JSON"):
        parse(b"image=0.5", {})


def test_inputs_that_do_not_fit_the_signature_name_the_input_and_what_it_takes():
    image = np.zeros((1, 4), np.float64)
    with pytest.raises(RequestError, match="input 'image': datatype FP64 given, signature 's' takes FP32"):
        check_inputs({"image": image, "key": np.zeros(1, np.int64)}, KEYED, "s")
    with pytest.raises(RequestError, match=r"input 'key': shape \[1, 1\] does not match the signature's \[-1\]"):
        check_inputs({"image": image.astype(np.float32), "key": np.zeros((1, 1), np.int64)}, KEYED, "s")
    with pytest.raises(RequestError, match="inputs: 'label' is not an input of signature 's'"):
        check_inputs({"label": image}, KEYED, "s")


def test_the_answer_puts_binary_outputs_after_its_json_and_says_where_they_start():
    body, headers = binary({"id": 5, "parameters": {"binary_data_output": True}, "inputs": [
        {"name": "key", "datatype": "INT64", "shape": [1], "data": [1]}],
        "outputs": [{"name": "classes"}, {"name": "probabilities", "parameters": {"binary_data": False}}]})
    request = parse(body, headers)
    outputs = {"classes": np.array([3, 1], np.int64), "probabilities": np.array([[0.25, 0.75]], np.float32),
               "names": np.array([b"a"], object)}
    answer, answer_headers = response(request, "mnist", "7", outputs)
    length = int(answer_headers["inference-header-content-length"])
    head = json.loads(answer[:length])
    assert head["id"] == "5" and head["model_name"] == "mnist" and head["model_version"] == "7"
    assert [o["name"] for o in head["outputs"]] == ["classes", "probabilities"]  # the ones asked for, in order
    assert head["outputs"][0] == {"name": "classes", "datatype": "INT64", "shape": [2],
                                  "parameters": {"binary_data_size": 16}}
    assert head["outputs"][1] == {"name": "probabilities", "datatype": "FP32", "shape": [1, 2], "data": [0.25, 0.75]}
    assert struct.unpack("<2q", answer[length:]) == (3, 1)
    plain, plain_headers = response(parse(json.dumps({"inputs": [{"name": "k", "datatype": "INT64", "shape": [1],
                                                                  "data": [1]}]}).encode(), {}), "m", "1", outputs)
    assert "inference-header-content-length" not in plain_headers
    assert json.loads(plain)["outputs"][1] == {"name": "names", "datatype": "BYTES", "shape": [1], "data": ["a"]}


def test_an_output_not_in_the_signature_is_refused():
    request = parse(json.dumps({"inputs": [{"name": "k", "datatype": "INT64", "shape": [1], "data": [1]}],
                                "outputs": [{"name": "logits"}]}).encode(), {})
    with pytest.raises(RequestError, match="output 'logits' is not an output of signature 'serving_default'"):
        response(request, "m", "1", {"classes": np.zeros(1, np.int64)})
