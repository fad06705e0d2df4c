"""trainer.serve.codec: TensorFlow Serving's REST predict format <-> numpy (no TensorFlow)."""
from __future__ import annotations

import base64
import json

import numpy as np
import pytest

from trainer.serve.codec import InputSpec, RequestError, dumps, parse_body, to_arrays, to_response

IMAGE = {"image": InputSpec("image", np.dtype(np.float32), None)}
KEYED = {"image": InputSpec("image", np.dtype(np.float32), None), "key": InputSpec("key", np.dtype(np.int64), (None,))}
TEXT = {"text": InputSpec("text", np.dtype(object), (None,))}


def arrays(body, specs):
    return to_arrays(parse_body(body), specs)


def test_row_format_of_a_single_input_takes_bare_values_or_named_objects():
    bare = arrays(json.dumps({"instances": [[0.5, 1.0], [0.0, 0.25]]}).encode(), IMAGE)
    named = arrays({"instances": [{"image": [0.5, 1.0]}, {"image": [0.0, 0.25]}]}, IMAGE)
    for got in (bare, named):
        assert got["image"].dtype == np.float32
        np.testing.assert_array_equal(got["image"], [[0.5, 1.0], [0.0, 0.25]])


def test_row_format_of_several_inputs_stacks_each_input():
    got = arrays({"instances": [{"image": [1.0], "key": 7}, {"image": [2.0], "key": 9}]}, KEYED)
    assert got["key"].dtype == np.int64 and got["key"].tolist() == [7, 9]
    assert got["image"].tolist() == [[1.0], [2.0]]


def test_a_float_input_takes_json_integers_and_numbers_alike():
    got = arrays({"instances": [[1, 2.5], [3, 4]]}, IMAGE)["image"]
    assert got.dtype == np.float32 and got.tolist() == [[1.0, 2.5], [3.0, 4.0]]


def test_a_float_input_takes_json_integers_beyond_64_bits_as_numbers():
    """10**20 is a float32 (TF Serving reads JSON numbers as doubles); numpy reads it as an
    object, which was refused as out of float32's range. Beyond float32 it is refused."""
    got = arrays({"instances": [[10 ** 20, 1], [-1, 2 ** 63]]}, IMAGE)["image"]
    assert got.dtype == np.float32 and got.tolist() == [[np.float32(1e20), 1.0], [-1.0, np.float32(2.0 ** 63)]]
    with pytest.raises(RequestError, match="input 'image': a value is out of the range of float32"):
        arrays({"instances": [[10 ** 39, 1]]}, IMAGE)


def test_columnar_format_takes_one_value_per_input():
    got = arrays({"inputs": {"image": [[1.0], [2.0]], "key": [3, 4]}}, KEYED)
    assert got["key"].tolist() == [3, 4]
    assert arrays({"inputs": [[1.0, 2.0]]}, IMAGE)["image"].shape == (1, 2)


TRIP = {"miles": InputSpec("miles", np.dtype(np.float32), (None,)),
        "company": InputSpec("company", np.dtype(object), (None,)),
        "hour": InputSpec("hour", np.dtype(np.int64), (None,))}


def test_inputs_left_out_take_the_models_defaults_and_the_others_stay_required():
    defaults = {"company": "", "hour": 0}
    rows = to_arrays(parse_body({"instances": [{"miles": 1.5}, {"miles": 2.0, "company": "Flash Cab", "hour": 7}]}),
                     TRIP, defaults)
    assert rows["miles"].tolist() == [1.5, 2.0] and rows["company"].tolist() == [b"", b"Flash Cab"]
    assert rows["hour"].dtype == np.int64 and rows["hour"].tolist() == [0, 7]
    columns = to_arrays(parse_body({"inputs": {"miles": [1.5, 2.0]}}), TRIP, defaults)  # two inputs left out
    assert columns["company"].tolist() == [b"", b""] and columns["hour"].tolist() == [0, 0]
    for body in ({"instances": [{"company": "Flash Cab"}]}, {"inputs": {"company": ["Flash Cab"]}}):
        with pytest.raises(RequestError, match="input 'miles' of signature 'serving_default' is missing"):
            to_arrays(parse_body(body), TRIP, defaults)
    with pytest.raises(RequestError, match="'company' is left out, so its default fills a batch"):
        to_arrays(parse_body({"inputs": {"miles": 1.5}}), TRIP, defaults)
    with pytest.raises(RequestError) as uneven:  # the lengths that differ are said, not only what was left out
        to_arrays(parse_body({"inputs": {"miles": [1.5, 2.0], "hour": [7]}}), TRIP, defaults)
    assert str(uneven.value) == ("inputs: 'company' is left out, so its default fills a batch; give the other inputs "
                                 "as lists of one length (hour 1 long, miles 2 long)")
    with pytest.raises(RequestError, match="input 'company' of signature 'serving_default' is missing"):
        to_arrays(parse_body({"instances": [{"miles": 1.5}]}), TRIP)  # no defaults: every input is required


def test_b64_values_become_bytes_for_string_inputs_and_plain_strings_too():
    raw = bytes([0, 255, 10])
    got = arrays({"instances": [{"b64": base64.b64encode(raw).decode()}, "plain"]}, TEXT)
    assert got["text"].tolist() == [raw, b"plain"]


@pytest.mark.parametrize("body, fragment", [
    (b"not json", "not JSON"),
    (b"[1, 2]", "JSON object"),
    ({"instances": [[1.0]], "inputs": [[1.0]]}, 'both "instances" and "inputs"'),
    ({"signature_name": "serving_default"}, 'neither "instances" nor "inputs"'),
    ({"instances": []}, "non-empty list"),
    ({"instances": [[1.0]], "signature_name": 3}, "signature_name"),
])
def test_malformed_bodies_are_request_errors(body, fragment):
    with pytest.raises(RequestError, match=fragment.replace("(", r"\(")):
        arrays(body, IMAGE)


@pytest.mark.parametrize("body, specs, fragment", [
    ({"instances": [[1.0, 2.0], [3.0]]}, IMAGE, "not a rectangular array"),
    ({"instances": [["a", "b"]]}, IMAGE, "input 'image': expects JSON numbers (float32), got strings"),
    ({"instances": [{"image": [1.0], "key": 1, "extra": 2}]}, KEYED, "'extra' is not an input"),
    ({"instances": [{"image": [1.0]}]}, KEYED, "input 'key' of signature 'serving_default' is missing"),
    ({"instances": [[1.0]]}, KEYED, "send each instance as an object"),
    ({"instances": [{"image": [1.0], "key": [1, 2]}]}, KEYED, "shape [1, 2] does not match the signature's [-1]"),
    ({"instances": [{"b64": "AAAA"}]}, IMAGE, "b64 values are only for string inputs"),
    ({"instances": [[1.0, {"b64": "AAAA"}]]}, IMAGE, "b64 values are only for string inputs"),
    ({"instances": [[1.0, "x"]]}, IMAGE, "input 'image': expects JSON numbers (float32), got strings"),
    ({"instances": [{"b64": "***"}]}, TEXT, "not valid base64"),
    ({"inputs": {"image": [[1.0]]}}, KEYED, "input 'key' of signature 'serving_default' is missing"),
    ({"inputs": [[1.0]]}, KEYED, "inputs: signature 'serving_default' has inputs image, key; send an object naming them"),
    ({"instances": [{"image": [1.0], "key": "7"}]}, KEYED, "input 'key': expects JSON integers (int64), got strings"),
    ({"instances": [{"image": [1.0], "key": 7.5}]}, KEYED, "input 'key': expects JSON integers (int64), got numbers"),
    ({"inputs": {"image": [[1.0]], "key": [True]}}, KEYED, "input 'key': expects JSON integers (int64), got booleans"),
    # TensorFlow Serving takes JSON numbers only for a float input (numpy would read all three)
    ({"instances": [{"image": ["3.1"], "key": 1}]}, KEYED, "input 'image': expects JSON numbers (float32), got strings"),
    ({"instances": [[True, False]]}, IMAGE, "input 'image': expects JSON numbers (float32), got booleans"),
    ({"instances": [[None, 1.0]]}, IMAGE, "input 'image': expects JSON numbers (float32), got null"),
    ({"instances": [{"image": [1.0], "key": 2 ** 64}]}, KEYED, "input 'key': a value is out of the range of int64"),
    # beyond 64 bits (numpy reads it as an object): was "got null or values of mixed types"
    ({"instances": [{"image": [1.0], "key": 99999999999999999999}]}, KEYED,
     "input 'key': a value is out of the range of int64"),
    # int64's and uint64's mixed (numpy reads them as floats): was "got numbers with a fraction"
    ({"instances": [{"image": [1.0], "key": -1}, {"image": [1.0], "key": 2 ** 63}]}, KEYED,
     "input 'key': a value is out of the range of int64"),
    # beyond float32: was a numpy RuntimeWarning on the server, then a prediction on inf
    ({"instances": [[1e39, 1.0]]}, IMAGE, "input 'image': a value is out of the range of float32"),
    ({"instances": [{"image": [1.0], "key": 7.0}]}, KEYED, "got numbers with a fraction or a decimal point (7.0)"),
    # a string input: what came instead, as the request wrote it (was the bare "expects strings")
    # booleans among numbers: numpy read [true, 1] as [1, 1] ([true, false] alone was refused)
    ({"instances": [{"image": [1.0], "key": True}, {"image": [1.0], "key": 1}]}, KEYED,
     "input 'key': expects JSON integers (int64), got booleans"),
    ({"instances": [[True, 1.0]]}, IMAGE, "input 'image': expects JSON numbers (float32), got booleans"),
    ({"instances": [{"image": [1.0], "key": []}]}, KEYED, "input 'key': shape [1, 0] does not match"),
    ({"instances": [None]}, TEXT, 'input \'text\': expects strings (or {"b64": ...} values), got null'),
    ({"instances": ["a", 1]}, TEXT, 'input \'text\': expects strings (or {"b64": ...} values), got 1'),
    # a boolean in a later row of a matrix, not only in the first (numpy reads [[1, 2], [true, 3]] as integers)
    ({"instances": [[1, 2], [True, 3]]}, {"m": InputSpec("m", np.dtype(np.int64), (None, 2))},
     "input 'm': expects JSON integers (int64), got booleans"),
    # a narrower integer dtype than numpy's int64: out of its range is refused, not wrapped around
    ({"instances": [2 ** 40]}, {"n": InputSpec("n", np.dtype(np.int32), (None,))},
     "input 'n': a value is out of the range of int32"),
    ({"instances": [-1]}, {"n": InputSpec("n", np.dtype(np.uint8), (None,))},
     "input 'n': a value is out of the range of uint8"),
    # a known dimension of the wrong size, not only a wrong rank
    ({"instances": [[1.0, 2.0]]}, {"x": InputSpec("x", np.dtype(np.float32), (None, 3))},
     "input 'x': shape [1, 2] does not match the signature's [-1, 3]"),
])
def test_requests_that_do_not_fit_the_signature_are_request_errors(body, specs, fragment):
    with pytest.raises(RequestError) as error:
        arrays(body, specs)
    assert fragment in str(error.value)


def test_row_response_has_one_object_per_example_and_columnar_one_value_per_output():
    outputs = {"classes": np.array([7, 2]), "probabilities": np.array([[0.25, 0.75], [0.5, 0.5]], np.float32)}
    rows = to_response(outputs, columnar=False)
    assert rows == {"predictions": [{"classes": 7, "probabilities": [0.25, 0.75]},
                                    {"classes": 2, "probabilities": [0.5, 0.5]}]}
    assert to_response(outputs, columnar=True) == {"outputs": {"classes": [7, 2],
                                                               "probabilities": [[0.25, 0.75], [0.5, 0.5]]}}
    assert to_response({"y": np.array([1.5])}, columnar=False) == {"predictions": [1.5]}


def test_nan_and_infinities_go_in_and_out_as_tf_serving_writes_them():
    """TF Serving's REST API takes and writes the tokens NaN, Infinity and -Infinity for
    float values (api_rest.md, "JSON conformance"); orjson alone refuses them and writes null."""
    got = arrays(b'{"instances": [[NaN, 1.5], [Infinity, -Infinity]]}', IMAGE)["image"]
    assert np.isnan(got[0, 0]) and got[0, 1] == 1.5 and got[1].tolist() == [np.inf, -np.inf]
    outputs = {"y": np.array([np.nan, np.inf, -np.inf, 2.0], np.float32), "k": np.array([1, 2, 3, 4])}
    assert dumps(to_response(outputs, columnar=True), outputs) == \
        b'{"outputs": {"k": [1, 2, 3, 4], "y": [NaN, Infinity, -Infinity, 2.0]}}'
    finite = {"y": np.array([0.5], np.float32)}
    assert json.loads(dumps(to_response(finite, columnar=False), finite)) == {"predictions": [0.5]}
    with pytest.raises(RequestError, match="not JSON"):
        parse_body(b'{"instances": [Nan]}')


def test_float32_outputs_keep_full_precision():
    value = np.float32(1 / 3)
    assert to_response({"p": np.array([value])}, columnar=False)["predictions"][0] == float(value)


def test_binary_outputs_are_text_when_utf8_else_b64():
    got = to_response({"s": np.array([b"seven", b"\xff\x00"], dtype=object)}, columnar=False)
    assert got == {"predictions": ["seven", {"b64": base64.b64encode(b"\xff\x00").decode()}]}


def test_a_string_output_named_bytes_is_always_b64_as_tf_serving_writes_it():
    """TF Serving b64-encodes every value of a string output whose name ends in _bytes,
    UTF-8 or not: its clients decode them."""
    outputs = {"image_bytes": np.array([b"PNG", b"\xff"], dtype=object),
               "label": np.array([b"cat", b"dog"], dtype=object)}
    b64 = {"b64": base64.b64encode(b"PNG").decode()}, {"b64": base64.b64encode(b"\xff").decode()}
    assert to_response(outputs, columnar=False) == {"predictions": [{"image_bytes": b64[0], "label": "cat"},
                                                                    {"image_bytes": b64[1], "label": "dog"}]}
    assert to_response(outputs, columnar=True) == {"outputs": {"image_bytes": list(b64), "label": ["cat", "dog"]}}
    assert to_response({"x_bytes": outputs["image_bytes"]}, columnar=False) == {"predictions": list(b64)}


def test_row_response_needs_a_shared_batch_dimension():
    with pytest.raises(RequestError, match="batch dimension"):
        to_response({"a": np.array([1, 2]), "b": np.array([1, 2, 3])}, columnar=False)
