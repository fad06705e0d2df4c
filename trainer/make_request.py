"""Write a prediction request of N MNIST test images, one JSON instance per line (the
`--json-instances` format of Cloud ML Engine / `gcloud ai-platform predict`):

    {"image": [784 floats in [0, 1]], "key": 0}

    python -m trainer.make_request --count 3 --out request.json
"""
from __future__ import annotations

import argparse
import json
import sys

import tensorflow as tf

from trainer import data
from trainer.paths import default_data_dir


def instances(data_dir: str, count: int, keys: bool) -> tuple[list[dict], list[int]]:
    """(instances, true labels) of the first `count` test images."""
    images, labels = next(iter(data.dataset(data_dir, "test", count, training=False)))
    rows = []
    for index, image in enumerate(images.numpy().reshape(-1, 784)):
        row = {"image": [round(float(pixel), 4) for pixel in image]}
        if keys:
            row["key"] = index
        rows.append(row)
    return rows, [int(label) for label in labels.numpy()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer.make_request", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=default_data_dir(), help="dir or gs:// URL with test-*.tfrecord")
    parser.add_argument("--count", type=int, default=3, help="number of test images")
    parser.add_argument("--out", default="request.json", help="file to write, local or gs:// (- for stdout)")
    parser.add_argument("--no-keys", dest="keys", action="store_false", help="leave out the `key` field")
    args = parser.parse_args(argv)
    try:
        rows, labels = instances(args.data_dir, args.count, args.keys)
    except data.DataError as error:
        print(f"trainer.make_request: {error}", file=sys.stderr)
        return 2
    text = "".join(json.dumps(row) + "\n" for row in rows)
    if args.out == "-":
        sys.stdout.write(text)
    else:
        with tf.io.gfile.GFile(args.out, "w") as handle:  # a local path or gs://
            handle.write(text)
        print(f"Wrote {len(rows)} instances to {args.out} (true labels: {' '.join(map(str, labels))})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
