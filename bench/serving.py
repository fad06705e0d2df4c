"""Online prediction latency and throughput: the model server (`python -m trainer.serve`,
kserve's model server over HTTP on 127.0.0.1) against calling the same SavedModel
in-process, for batches of 1 and 64 real MNIST test images, in one run, in both request
formats it speaks: TF Serving's REST JSON (v1) and the Open Inference Protocol (v2) with
its binary data extension.

In-process: `signatures["unkeyed"](image=tensor)` (the image-only signature; serving_default
also takes a key) on a float32 array already in memory. Server: one client on one
keep-alive connection, each request a pre-encoded JSON body `{"instances": [[784 floats],
...], "signature_name": "unkeyed"}` (the images `trainer.make_request --no-keys` writes), the
answer read and JSON-decoded; v2: the same images as one FP32 tensor after a small JSON
header (`Inference-Header-Content-Length`), the classes asked for as binary INT64 and
read with numpy. Requests are sequential, so requests/s = 1 / mean latency.
Each is measured after --warmup calls, one in-process call and one request in turn, in
--rounds, so that load from other work on the machine hits both alike. Each line also
gives what the server spends on the body before TensorFlow runs (JSON parsing and the
float32 conversion of trainer.serve.codec, timed here in-process). Targets (issue 19): server p99 at batch 1 under 20 ms; server throughput at
batch 64 at least 0.7x in-process; both are judged for each format.

    .venv/bin/python bench/serving.py [--model-dir JOB_DIR/export] [--requests 200] [--rounds 3]

Without --model-dir a short real training run (single process, 200 steps) makes the export.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import DATA_DIR, ROOT, cpu, ensure_data, machine, non_negative_int, positive_int, require

try:
    import numpy as np
except ImportError:  # comes with TensorFlow: main() says what is missing
    np = None

from tests.support.polling import wait_for  # noqa: E402
from tests.support.ports import free_port  # noqa: E402
from tests.support.trainer_cluster import reap, trainer_env  # noqa: E402

BATCHES = (1, 64)
FORMATS = ("v1 JSON", "v2 binary")
TARGET_P99_MS, TARGET_RATIO = 20.0, 0.7


def train_export(workdir: Path) -> Path:
    job = workdir / "job"
    subprocess.run([sys.executable, "-m", "trainer.task", "--job-dir", str(job), "--data-dir", str(DATA_DIR),
                    "--train-steps", "200", "--eval-every-steps", "0", "--checkpoint-every-steps", "0"],
                   cwd=ROOT, env=trainer_env({"TRAINER_THREADS": "0"}), check=True, timeout=1800,
                   stdout=subprocess.DEVNULL)
    return job / "export"


def images(count: int) -> list[list[float]]:
    from trainer.make_request import instances

    rows, _ = instances(str(DATA_DIR), count, keys=False)
    return [row["image"] for row in rows]


def decode_ms(rows: list[list[float]]) -> dict[int, float]:
    """Median ms of what the server does to a request body before TensorFlow runs: JSON
    parsing and the conversion to a float32 array (trainer.serve.codec), per batch size."""
    import orjson

    from trainer.serve.codec import InputSpec, parse_body, to_arrays

    specs = {"image": InputSpec("image", np.dtype(np.float32), None)}
    result = {}
    for batch in BATCHES:
        body = json.dumps({"instances": rows[:batch]}).encode()
        samples = []
        for _ in range(50):
            start = time.perf_counter()
            to_arrays(parse_body(orjson.loads(body)), specs)
            samples.append(time.perf_counter() - start)
        result[batch] = statistics.median(samples) * 1000
    return result


def percentiles(latencies: list[float]) -> dict:
    ms = np.asarray(latencies) * 1000
    return {"p50": float(np.percentile(ms, 50)), "p99": float(np.percentile(ms, 99)),
            "rps": len(ms) / (ms.sum() / 1000)}


def time_pairs(first, second, count: int, warmup: int) -> tuple[list[float], list[float]]:
    """Latencies of `first` and `second` called in turn (a b a b ...), so that load from
    other work on the machine falls on both alike."""
    for _ in range(warmup):
        first()
        second()
    a, b = [], []
    for _ in range(count):
        for call, into in ((first, a), (second, b)):
            start = time.perf_counter()
            call()
            into.append(time.perf_counter() - start)
    return a, b


class Server:
    def __init__(self, model_dir: Path, workdir: Path):
        self.port = free_port()
        self.log = workdir / "server.log"
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "trainer.serve", "--model-dir", str(model_dir),
                                          "--name", "mnist", "--port", str(self.port)], cwd=ROOT,
                                         env=trainer_env({"TRAINER_THREADS": "0"}), stdout=out,
                                         stderr=subprocess.STDOUT)
        self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        wait_for(self.ready, self.log.read_text, 600,
                 check=lambda: self.proc.poll() is None or sys.exit(f"server exited:\n{self.log.read_text()}"))

    def ready(self) -> bool:
        try:
            return self.get("/v1/models/mnist").get("ready") is True
        except OSError:
            self.connection.close()
            return False

    def get(self, path: str) -> dict:
        self.connection.request("GET", path)
        return json.loads(self.connection.getresponse().read())

    def infer(self, body: bytes, header_length: int) -> np.ndarray:
        """An Open Inference Protocol request with binary data; the classes it answers."""
        self.connection.request("POST", "/v2/models/mnist/infer", body=body,
                                headers={"Content-Type": "application/octet-stream",
                                         "Inference-Header-Content-Length": str(header_length)})
        response = self.connection.getresponse()
        answer = response.read()
        if response.status != 200:
            raise RuntimeError(answer)
        length = int(response.getheader("Inference-Header-Content-Length"))
        return np.frombuffer(answer[length:], np.int64)

    def predict(self, body: bytes) -> dict:
        self.connection.request("POST", "/v1/models/mnist:predict", body=body,
                                headers={"Content-Type": "application/json"})
        response = self.connection.getresponse()
        answer = json.loads(response.read())
        if response.status != 200:
            raise RuntimeError(answer)
        return answer

    def close(self) -> None:
        self.connection.close()
        reap(self.proc, grace=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", help="export base or SavedModel dir (default: train one, 200 steps)")
    parser.add_argument("--requests", type=positive_int, default=200,
                        help="timed calls per format and batch size per round (and as many in-process calls)")
    parser.add_argument("--rounds", type=positive_int, default=3, help="times the formats and batch sizes are gone "
                                                                       "through in turn")
    parser.add_argument("--warmup", type=non_negative_int, default=20,
                        help="untimed calls before each format and batch size's timed calls, per round")
    args = parser.parse_args()
    require("tensorflow", "kserve")
    if args.model_dir:  # a wrong one is said before anything runs
        from trainer.serve.model import ModelDirError, resolve

        try:
            resolve(args.model_dir)
        except ModelDirError as exc:
            parser.error(str(exc))
    ensure_data(str(DATA_DIR))
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with tempfile.TemporaryDirectory(prefix="bench-serving-") as tmp:
        workdir = Path(tmp)
        model_dir = Path(args.model_dir) if args.model_dir else train_export(workdir)
        import tensorflow as tf

        from trainer.serve.model import resolve

        loaded = tf.saved_model.load(resolve(str(model_dir))[0])
        signature = loaded.signatures["unkeyed"]
        rows = images(max(BATCHES))
        server = Server(model_dir, workdir)
        try:
            cases = [(fmt, batch) for fmt in FORMATS for batch in BATCHES]
            local = {case: [] for case in cases}
            remote = {case: [] for case in cases}
            for _ in range(args.rounds):
                for fmt, batch in cases:
                    array = np.asarray(rows[:batch], np.float32)
                    tensor = tf.constant(array)
                    expected = signature(image=tensor)["classes"].numpy().tolist()
                    if fmt == "v1 JSON":
                        body = json.dumps({"instances": rows[:batch], "signature_name": "unkeyed"}).encode()
                        request = lambda body=body: server.predict(body)  # noqa: E731
                        got = [p["classes"] for p in request()["predictions"]]
                    else:
                        head = json.dumps({"parameters": {"signature_name": "unkeyed"},
                                           "inputs": [{"name": "image", "datatype": "FP32", "shape": list(array.shape),
                                                       "parameters": {"binary_data_size": array.nbytes}}],
                                           "outputs": [{"name": "classes", "parameters": {"binary_data": True}}]})
                        body = head.encode() + array.tobytes()
                        request = lambda body=body, length=len(head): server.infer(body, length)  # noqa: E731
                        got = request().tolist()
                    assert got == expected, f"the server ({fmt}) and the SavedModel disagree"
                    here, there = time_pairs(lambda: signature(image=tensor), request, args.requests, args.warmup)
                    local[fmt, batch] += here
                    remote[fmt, batch] += there
        finally:
            server.close()
    codec_ms = decode_ms(rows)
    figures, verdicts = [], []
    for fmt in FORMATS:
        results = {}
        for batch in BATCHES:
            here, there = percentiles(local[fmt, batch]), percentiles(remote[fmt, batch])
            results[batch] = (here, there)
            parse = f" | JSON parse + array {codec_ms[batch]:.2f} ms" if fmt == "v1 JSON" else ""
            print(f"{fmt:>9} batch {batch:>2}: in-process {here['rps']:8.1f} calls/s p50 {here['p50']:6.2f} ms "
                  f"p99 {here['p99']:6.2f} ms | server {there['rps']:8.1f} requests/s p50 {there['p50']:6.2f} ms "
                  f"p99 {there['p99']:6.2f} ms | server/in-process {there['rps'] / here['rps']:.2f}x{parse}")
            figures.append(f"{fmt} batch {batch}: server {there['rps']:.0f} req/s ({there['rps'] * batch:.0f} "
                           f"images/s), p50 {there['p50']:.1f} ms, p99 {there['p99']:.1f} ms, "
                           f"{there['rps'] / here['rps']:.2f}x in-process")
        p99_ok = results[1][1]["p99"] < TARGET_P99_MS
        ratio = results[64][1]["rps"] / results[64][0]["rps"]
        verdicts.append(f"{fmt}: p99(batch 1) < {TARGET_P99_MS:g} ms {'met' if p99_ok else 'MISSED'}, "
                        f"throughput(batch 64) >= {TARGET_RATIO}x in-process {'met' if ratio >= TARGET_RATIO else 'MISSED'}")
    print(f"serving: {'; '.join(figures)} — targets {'; '.join(verdicts)}; {args.rounds}x{args.requests} timed "
          f"calls each; {cpu()}, {machine()}")


if __name__ == "__main__":
    main()
