"""Serving the taxi model for real: the export of a one-process `--model taxi` training on
the real trips (`taxi_job`), served by `launcher serve --backend local` (kserve's model
server with TensorFlow), asked about raw trip instances by `launcher predict
--json-instances` and by plain HTTP in TensorFlow Serving's format. Both answer what
`trainer.predict` answers on the same trips, and so does the Open Inference Protocol
(KServe v2) with a string field as binary BYTES; a bad instance is HTTP 400 naming the
field, and the server keeps serving."""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.launcher_process import run_launcher
from tests.support.serving import COMMAND_TIMEOUT, TrainedJob, get, launcher_env, post, post_raw, served_model
from tests.support.trainer_cluster import run_module

pytestmark = pytest.mark.slow
COUNT = 200  # eval trips asked about
ROUNDING = 0.00005 + 1e-7  # trainer.predict prints 4 decimals


@dataclass(frozen=True)
class Trips:
    path: Path           # one raw trip per line, as trainer.make_request writes them
    rows: list[dict]
    logistic: list[float]  # trainer.predict's answers on the same export
    classes: list[int]


@dataclass(frozen=True)
class Served:
    job: TrainedJob
    model: str  # http://127.0.0.1:PORT/v1/models/taxi


@pytest.fixture(scope="module")
def served(taxi_job, tmp_path_factory) -> Served:  # noqa: F811
    job = TrainedJob("taxi-one-process", taxi_job.export, launcher_env(tmp_path_factory.mktemp("serving") / "runs"))
    with served_model(job, "taxi") as base:
        yield Served(job, f"{base}/v1/models/taxi")


@pytest.fixture(scope="module")
def trips(taxi_job, taxi_dir, tmp_path_factory) -> Trips:  # noqa: F811
    path = tmp_path_factory.mktemp("trips") / "trips.json"
    made = run_module("trainer.make_request", ["--model", "taxi", "--data-dir", taxi_dir, "--count", str(COUNT),
                                               "--out", str(path)])
    assert made.returncode == 0, made.stderr[-2000:]
    done = run_module("trainer.predict", ["--model-dir", str(taxi_job.export), "--json-instances", str(path)])
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["CLASSES", "LOGISTIC", "PROBABILITIES"], lines[0]
    cells = [line.split(maxsplit=2) for line in lines[1:]]
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(rows) == len(cells) == COUNT
    return Trips(path, rows, [float(c[1]) for c in cells], [int(c[0]) for c in cells])


def test_launcher_predict_answers_raw_trips_as_trainer_predict_does(served, trips):
    done = run_launcher(served.job.env, "predict", "taxi", "--json-instances", str(trips.path), "--backend", "local",
                        timeout=COMMAND_TIMEOUT)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0].split() == ["CLASSES", "LOGISTIC", "PROBABILITIES"], lines[0]
    cells = [line.split(None, 2) for line in lines[1:]]
    assert len(cells) == COUNT
    classes = [int(c[0]) for c in cells]
    logistic = [json.loads(c[1])[0] for c in cells]
    probabilities = [json.loads(c[2]) for c in cells]
    assert classes == trips.classes and 0 < sum(classes) < COUNT  # both classes occur
    assert all(abs(got - want) <= ROUNDING for got, want in zip(logistic, trips.logistic)), (logistic, trips.logistic)
    assert all(abs(p[0] + p[1] - 1) < 1e-6 and p[1] == q for p, q in zip(probabilities, logistic))


def test_plain_http_takes_raw_trips_in_tf_serving_format(served, trips):
    status, answer = get(f"{served.model}/metadata")
    inputs = answer["metadata"]["signature_def"]["signature_def"]["serving_default"]["inputs"]
    assert status == 200 and sorted(inputs) == sorted(trips.rows[0])  # one input per raw field
    assert (inputs["trip_miles"]["dtype"], inputs["payment_type"]["dtype"], inputs["trip_start_hour"]["dtype"]) == \
        ("DT_FLOAT", "DT_STRING", "DT_INT64")
    # as `curl -d @body.json URL` sends it (no JSON content type), in the row format
    status, answer = post(f"{served.model}:predict", json.dumps({"instances": trips.rows[:3]}).encode(),
                          content_type="application/x-www-form-urlencoded")
    assert status == 200, answer
    predictions = answer["predictions"]
    assert [p["classes"] for p in predictions] == trips.classes[:3]
    assert all(abs(p["logistic"][0] - want) <= ROUNDING for p, want in zip(predictions, trips.logistic))
    # the columnar format: one list per field
    columns = {name: [row[name] for row in trips.rows[:3]] for name in trips.rows[0]}
    status, answer = post(f"{served.model}:predict", json.dumps({"inputs": columns}).encode())
    assert status == 200 and answer["outputs"]["classes"] == trips.classes[:3], answer


REQUIRED = ("trip_miles", "trip_seconds", "fare", "payment_type")  # the sample's; the rest have defaults


@pytest.fixture(scope="module")
def short_trips(served, trips, tmp_path_factory) -> tuple[list[dict], list[float]]:
    """20 trips with the required fields only, and trainer.predict's logistic on them."""
    short = [{name: row[name] for name in REQUIRED} for row in trips.rows[:20]]
    path = tmp_path_factory.mktemp("short") / "short.json"
    path.write_text("".join(json.dumps(row) + "\n" for row in short))
    done = run_module("trainer.predict", ["--model-dir", str(served.job.export), "--json-instances", str(path)])
    assert done.returncode == 0, done.stderr[-2000:]
    want = [float(line.split()[1]) for line in done.stdout.splitlines()[1:]]
    assert len(want) == len(short) and want != trips.logistic[:len(short)]  # the defaults change the answers
    return short, want


def test_optional_fields_left_out_take_the_models_defaults_as_in_trainer_predict(served, short_trips):
    short, want = short_trips
    status, answer = post(f"{served.model}:predict", json.dumps({"instances": short}).encode())
    assert status == 200, answer
    got = [p["logistic"][0] for p in answer["predictions"]]
    assert all(abs(g - w) <= ROUNDING for g, w in zip(got, want)), (got, want)
    columns = {name: [row[name] for row in short] for name in REQUIRED}
    status, answer = post(f"{served.model}:predict", json.dumps({"inputs": columns}).encode())
    assert status == 200 and [round(x[0], 4) for x in answer["outputs"]["logistic"]] == \
        [round(g, 4) for g in got], answer


def test_open_inference_protocol_takes_trips_with_strings_as_binary_bytes_and_fills_defaults(served, short_trips):
    """The required fields only, as v2 tensors (payment_type as binary BYTES: each value a
    4-byte little-endian length and its bytes), the rest from the model's defaults: the
    answers of `trainer.predict` on the same short trips."""
    short, want = short_trips
    base = served.model.removesuffix("/v1/models/taxi")
    status, metadata = get(f"{base}/v2/models/taxi")
    assert status == 200, metadata
    types = {i["name"]: i["datatype"] for i in metadata["inputs"]}
    assert (types["trip_miles"], types["payment_type"], types["trip_start_hour"]) == ("FP32", "BYTES", "INT64")
    inputs = [{"name": name, "datatype": types[name], "shape": [len(short)], "data": [row[name] for row in short]}
              for name in REQUIRED if name != "payment_type"]
    strings = b"".join(struct.pack("<I", len(v)) + v for v in (row["payment_type"].encode() for row in short))
    inputs.append({"name": "payment_type", "datatype": "BYTES", "shape": [len(short)],
                   "parameters": {"binary_data_size": len(strings)}})
    head = json.dumps({"inputs": inputs, "outputs": [{"name": "logistic"}, {"name": "classes"}]}).encode()
    status, _, answer = post_raw(f"{base}/v2/models/taxi/infer", head + strings,
                                 {"Inference-Header-Content-Length": str(len(head))})
    assert status == 200, answer[:500]
    logistic, classes = json.loads(answer)["outputs"]
    assert logistic["shape"] == [len(short), 1] and classes["shape"] == [len(short)]
    assert all(abs(g - w) <= ROUNDING for g, w in zip(logistic["data"], want)), (logistic["data"], want)
    inputs[0]["datatype"] = "FP64"  # trip_miles is float32 in the signature
    payment = {"name": "payment_type", "datatype": "BYTES", "shape": [len(short)],
               "data": [row["payment_type"] for row in short]}  # JSON strings this time
    status, answer = post(f"{base}/v2/models/taxi/infer", json.dumps({"inputs": inputs[:-1] + [payment]}).encode())
    assert status == 400 and answer["error"] == "input 'trip_miles': datatype FP64 given, signature " \
        "'serving_default' takes FP32", answer


def test_a_bad_trip_is_a_400_naming_the_field_and_the_server_keeps_serving(served, trips):
    trip = trips.rows[0]
    bad = {  # field: the instance (TensorFlow Serving refuses each of them too)
        "trip_miles": dict(trip, trip_miles="3.1"),  # a string for a number
        "fare": {name: value for name, value in trip.items() if name != "fare"},  # missing
        "tips": dict(trip, tips=2.5),  # not a field of the model
        "payment_type": dict(trip, payment_type=1),  # a number for a string
        "trip_start_hour": dict(trip, trip_start_hour=19.5),  # a fraction for an integer
        "trip_seconds": dict(trip, trip_seconds=None),  # null
    }
    for field, instance in bad.items():
        status, answer = post(f"{served.model}:predict", json.dumps({"instances": [trip, instance]}).encode())
        assert status == 400 and f"'{field}'" in answer["error"], (field, status, answer)
    status, answer = post(f"{served.model}:predict", json.dumps({"instances": [trip]}).encode())
    assert status == 200 and answer["predictions"][0]["classes"] == trips.classes[0]


def test_launcher_predict_of_a_bad_trip_is_one_line_naming_the_field(served, trips, tmp_path):
    request = tmp_path / "bad.json"
    request.write_text(json.dumps(trips.rows[0]) + "\n" + json.dumps(dict(trips.rows[1], trip_miles="3.1")) + "\n")
    done = run_launcher(served.job.env, "predict", "taxi", "--json-instances", str(request), "--backend", "local",
                        timeout=COMMAND_TIMEOUT)
    assert done.returncode != 0 and done.stdout == "", done.stdout
    assert done.stderr.strip().splitlines() == [
        f"error: {served.model}:predict: HTTP 400: input 'trip_miles': expects JSON numbers (float32), got strings "
        f"(the first instance refused on its own: {request} line 2)"]

    # batch prediction: the failed batch's line in the errors file names it too
    request.write_text("".join(json.dumps(row) + "\n" for row in trips.rows[:3])
                       + json.dumps(dict(trips.rows[3], trip_miles="3.1")) + "\n")
    out = tmp_path / "out"
    done = run_launcher(served.job.env, "predict", "taxi", "--input-paths", str(request), "--output-path", str(out),
                        "--batch-size", "4", "--backend", "local", timeout=COMMAND_TIMEOUT)
    assert done.returncode == 1, done.stderr
    errors = [json.loads(line) for line in (out / "prediction.errors_stats-00000-of-00001").read_text().splitlines()]
    assert errors == [{"batch": 0, "instances": 4, "error": f"{served.model}:predict: HTTP 400: input 'trip_miles': "
                       f"expects JSON numbers (float32), got strings (the first instance refused on its own: "
                       f"{request} line 4)"}]
