"""Write a prediction request of the first N evaluation examples, one JSON instance per
line (the `--json-instances` format of Cloud ML Engine / `gcloud ai-platform predict`);
the model's `request_instances()` makes them. MNIST test images:

    {"image": [784 floats in [0, 1]], "key": 0}

`--model taxi`: raw trip fields of eval trips, e.g. {"trip_miles": 3.1, "payment_type": "Cash", ...}.

    python -m trainer.make_request [--model taxi --data-dir data/taxi] --count 3 --out request.json
"""
from __future__ import annotations

import argparse
import functools
import json
import sys

from trainer.outputs import require_tensorflow

require_tensorflow(__name__, "trainer.make_request")  # before numpy: one line without the [trainer] extra
from trainer import data, lazy, models, outputs
from trainer.flags import Parser, location, positive_int
from trainer.models import MODELS, default_data_dir

tf = lazy.module("tensorflow")  # --help and flag errors without TensorFlow's import

LABELS_SHOWN = 5000  # labels printed in full up to this many (scripts read them: the whole taxi eval split is 3,000)
LABELS_CUT = 20      # beyond: the first this many, then "... of N"


def instances(data_dir: str, count: int, keys: bool, model: str = models.DEFAULT) -> tuple[list[dict], list[int]]:
    """(instances, true labels) of the first `count` evaluation examples."""
    return models.get(model).request_instances(data_dir, count, keys)


def label_text(labels: list[int]) -> str:
    """The true labels, space-separated; past LABELS_SHOWN only the first LABELS_CUT."""
    if len(labels) <= LABELS_SHOWN:
        return " ".join(map(str, labels))
    return " ".join(map(str, labels[:LABELS_CUT])) + f" ... of {len(labels)}"


@outputs.command("trainer.make_request")  # Ctrl-C: `Interrupted.`, exit 130
def main(argv: list[str] | None = None) -> int:
    lazy.quiet_tensorflow()
    parser = Parser(prog="python -m trainer.make_request", description=__doc__, label="trainer.make_request",
                    formatter_class=argparse.RawDescriptionHelpFormatter)  # one-line errors, as those below
    parser.add_argument("--model", default=models.DEFAULT, choices=sorted(MODELS),
                        help=f"model the request is for (default: {models.DEFAULT})")
    parser.add_argument("--data-dir", default=None, type=location, help="dir or gs:// URL with the evaluation "
                        "records (default: the model's, as trainer.task's --data-dir)")
    parser.add_argument("--count", default=3, type=positive_int, metavar="N",
                        help="number of evaluation examples (test images), an integer > 0 (default: 3)")
    parser.add_argument("--out", default="request.json", help="file to write, local or gs:// (- for stdout; default: "
                        "request.json)",
                        type=functools.partial(location, what="a local file, a gs:// URL or - for stdout"))
    parser.add_argument("--no-keys", dest="keys", action="store_false", help="leave out the `key` field (MNIST's: such "
                        "lines go to the `unkeyed` signature; taxi lines have none, its serving signature takes none)")
    args = parser.parse_args(argv)
    args.data_dir = args.data_dir or default_data_dir(args.model)
    if problem := outputs.unwritable_file(args.out, "request.json"):  # before any reading: a traceback after it, it was
        print(f"trainer.make_request: --out: {problem}", file=sys.stderr)
        return 2
    try:
        rows, labels = instances(args.data_dir, args.count, args.keys, args.model)
    except data.DataError as error:
        print(f"trainer.make_request: {error}", file=sys.stderr)
        return 2
    except (tf.errors.OpError, StopIteration) as error:  # not TFRecords, none readable, or another layout
        why = f" ({error.message.splitlines()[0]})" if isinstance(error, tf.errors.OpError) else ""
        print(f"trainer.make_request: --data-dir: cannot read the {models.get(args.model).EVAL_SPLIT} records in "
              f"{args.data_dir} as {args.model} records{why}; give the dir `python -m trainer.data` wrote for "
              f"--model {args.model}", file=sys.stderr)
        return 2
    short = "" if len(rows) == args.count else (f", not the {args.count} asked: only {len(rows)} "
                                                f"{models.get(args.model).EVAL_SPLIT} examples in {args.data_dir}")
    text = "".join(json.dumps(row) + "\n" for row in rows)
    if args.out == "-":
        sys.stdout.write(text)
        if short:
            print(f"trainer.make_request: wrote {len(rows)} instances{short}", file=sys.stderr)
    else:
        with outputs.writing("--out", args.out):  # a full disk: one line, exit 1
            outputs.write_text(args.out, text)  # whole or not at all: an earlier file stays whole
        print(f"Wrote {len(rows)} instances to {args.out}{short} (true labels: {label_text(labels)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
