"""Command-line flags of `python -m trainer.task` (the Cloud ML Engine trainer flags)."""
from __future__ import annotations

import argparse
import difflib
import functools
import math
import os
import re
import sys

from trainer import paths
from trainer.models import (DATA_DIRS, DATASETS, DEFAULT as DEFAULT_MODEL, IMAGE_FEATURE, METADATA_IN_DATA_DIR,
                            MODELS, TRAIN_STEPS, default_data_dir)


JOB_DIR_FLAGS = ("--job-dir", "--job_dir", "--output_path", "--model_dir")  # the Cloud ML samples' spellings too


def job_dir_given(argv) -> list[tuple[str, str]]:
    """(flag, value) of each job dir spelling in ARGV (`--job-dir X` and `--job-dir=X`), in
    order: argparse keeps the last."""
    argv = [str(arg) for arg in argv]
    found = []
    for index, arg in enumerate(argv):
        flag, equals, value = arg.partition("=")
        if flag in JOB_DIR_FLAGS:
            if equals:
                found.append((flag, value))
            elif index + 1 < len(argv):
                found.append((flag, argv[index + 1]))
    return found


class FlagError(ValueError):
    """A flag `python -m trainer.task` refuses, in argparse's words (check())."""


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Each flag's default at the end of its help, once: not for a flag without one
    (None), whose help says what it falls back to, nor one whose help says its default."""

    def _get_help_string(self, action):
        if action.default is None or "(default:" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error (exit 2) instead of usage + error; with `raising`,
    FlagError instead (check()). `label`: the line reads as the command's own errors do,
    `LABEL: --flag: message (see --help)` (trainer.predict's, serve's `error`), instead of
    `PROG: error: argument --flag: message (see --help)`. Flags are taken whole, as gcloud
    takes them (`--json-instance` is not --json-instances)."""

    raising = False

    def __init__(self, *args, label: str | None = None, meant: dict[str, str] | None = None, **kwargs):
        super().__init__(*args, **{"allow_abbrev": False, **kwargs})
        self.label = label
        self.meant = meant or {}  # another program's flag -> ours, offered before the near spellings

    def parse_known_args(self, args=None, namespace=None):
        argv = list(sys.argv[1:] if args is None else args)
        if twice := given_twice(self, argv):
            self.error(f"argument {twice[0]}: given twice, also as {twice[1]}; give it once")
        return super().parse_known_args(argv, namespace)

    def error(self, message: str):
        for action in self._actions:  # named as before the aliases came (_flag())
            if (named := getattr(action, "error_name", None)) is not None:
                message = message.replace(f"argument {'/'.join(action.option_strings)}:", f"argument {named}:", 1)
        unknown = re.match(r"unrecognized arguments: (--[^\s=]+)", message)
        if unknown and (hint := did_you_mean(unknown[1], self)):
            message += f" ({hint})"
        if self.raising:
            raise FlagError(message)
        line = (f"{self.label}: {message.removeprefix('argument ')}" if self.label is not None
                else f"{self.prog}: error: {message}")
        print(f"{line} (see --help)", file=sys.stderr)
        sys.exit(2)


def given_twice(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[str, str] | None:
    """(a flag, the other of its names given before it) when ARGV gives one flag by two of
    its names (`--job-dir A --model_dir B`, the launcher's `--workers 2 --worker-count 3`):
    argparse would keep the last and drop the other unseen (a job dir, training files)."""
    first: dict[str, str] = {}
    for token in argv:
        if token == "--":  # what follows is not this parser's
            break
        flag = token.split("=", 1)[0]
        action = parser._option_string_actions.get(flag) if flag.startswith("-") else None
        if action is None or len(action.option_strings) < 2 or isinstance(action, argparse._HelpAction):
            continue
        if first.setdefault(action.dest, flag) != flag:
            return flag, first[action.dest]
    return None


def closest(flag: str, parser: argparse.ArgumentParser, most: int = 3) -> list[str]:
    """The --flags of `parser` that an unknown `flag` may have meant, each by its first
    spelling: the near spellings (`--steps`: --train-steps), then those it is the start of
    (flags are taken whole: `--all` is not --all-namespaces, `--steps` not
    --steps-per-execution), after the flag the parser's `meant` names for it; at most `most`."""
    meant = [getattr(parser, "meant", {}).get(flag)] if flag in getattr(parser, "meant", {}) else []
    primary = {}
    for action in parser._actions:
        if action.help == argparse.SUPPRESS:  # accepted, not offered (the launcher's ignored gcloud flags)
            continue
        spellings = [option for option in action.option_strings if option.startswith("--") and option != "--help"]
        primary.update((option, spellings[0]) for option in spellings)
    near = difflib.get_close_matches(flag, list(primary), n=most, cutoff=0.69)
    starting = [option for option in primary if option.startswith(flag)]
    return list(dict.fromkeys(meant + [primary[option] for option in near + starting]))[:most]


def did_you_mean(flag: str, parser: argparse.ArgumentParser) -> str:
    """`did you mean --a?` / `did you mean --a or --b?` for closest(), or ''."""
    guesses = closest(flag, parser)
    if not guesses:
        return ""
    return "did you mean " + (guesses[0] if len(guesses) == 1 else ", ".join(guesses[:-1]) + " or " + guesses[-1]) + "?"


def _flag(p: argparse.ArgumentParser, *names: str, aliases: tuple[str, ...] = (), **kwargs) -> argparse.Action:
    """A flag spelled `names` and also `aliases` (the Cloud ML samples' spellings): all of
    them in its --help entry, its errors naming it by `names` alone (`argument --batch-size:
    must be > 0`, not every spelling)."""
    action = p.add_argument(*names, *aliases, **kwargs)
    action.error_name = "/".join(names)
    return action


def _number(text: str, cast, what: str):
    try:
        return cast(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None


def positive_int(text: str) -> int:
    value = _number(text, int, "an integer > 0")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value


def _positive_float(text: str) -> float:
    value = _number(text, float, "a number > 0")
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
    return value


def location(text: str, env: str | None = None, what: str = "a local directory or a gs:// URL") -> str:
    """A path flag's value (local or gs://), refused when blank: an unset shell variable
    (`--job-dir $JOB`) is not the default, and an empty job dir would put its checkpoints/,
    train/ and export/ at the filesystem's root (paths.join). `env`: the variable that gives
    the default, named in the error; `what`: the values the flag takes."""
    if not text.strip():
        given = f" (without the flag, env {env} when it is set)" if env else ""
        raise argparse.ArgumentTypeError(f"is empty; give {what}{given}")
    if problem := paths.url_problem(text):  # gs:/b/x and GS://b were local dirs, lost with the pod
        raise argparse.ArgumentTypeError(problem)
    return text


def _patterns(text: str) -> str:
    """A --train_data_paths / --eval_data_paths value (patterns, commas also separate),
    refused when it names none: an unset shell variable (`--train-files "$TRAIN"`) is not the
    default, and it read --data-dir's shards instead, unseen."""
    if not any(part.strip() for part in text.split(",")):
        raise argparse.ArgumentTypeError("is empty; give TFRecord files or patterns (local or gs://)")
    return text


def _non_negative(text: str) -> int:
    value = _number(text, int, "an integer >= 0")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _env(name: str, default, cast=int):
    """A default from the environment; a value `cast` refuses falls back to `default`."""
    try:
        return cast(os.environ.get(name, str(default)))
    except (ValueError, argparse.ArgumentTypeError):
        return default


def parser() -> Parser:
    p = Parser(
        prog="python -m trainer.task",
        description="Train a model (--model: the MNIST CNNs, or the Chicago taxi tips wide & deep). The role comes from TF_CONFIG as Kubeflow training-operator "
                    "writes it: chief = coordinator of parameter-server training, ps/worker = servers, "
                    "workers without ps = MultiWorkerMirrored, evaluator = side-car evaluation of checkpoints; "
                    "no TF_CONFIG = one process.",
        formatter_class=HelpFormatter)  # as gcloud: `--steps 200` is refused, not read as --steps-per-execution
    _flag(p, JOB_DIR_FLAGS[0], aliases=JOB_DIR_FLAGS[1:], dest="job_dir",
          type=functools.partial(location, env="JOB_DIR"),
          default=os.environ.get("JOB_DIR"),
          help="local dir or gs:// URL for checkpoints, TensorBoard events (train/, eval/) and "
               "export/<version>/; a restart resumes from its latest checkpoint (default: env JOB_DIR, "
               "else runs/<model>; the Cloud ML samples' spellings are accepted)")
    _flag(p, "--data-dir", aliases=("--data_dir",), dest="data_dir", default=None, type=location,
          help="dir or gs:// URL with the model's train-* and test-* (taxi: eval-*) .tfrecord (or "
          ".tfrecord.gz) files written by `python -m trainer.data [--dataset taxi] --out DIR` "
          "(default: env MNIST_DATA_DIR or data/mnist; taxi: env TAXI_DATA_DIR or data/taxi)")
    _flag(p, "--train_data_paths", "--train-data-paths", aliases=("--train-files",), dest="train_data_paths",
          nargs="+", metavar="PATTERN", type=_patterns, help="training TFRecord files or patterns (local or gs://; "
          ".gz/.gzip files read as GZIP) instead of --data-dir's train-* shards; commas also separate")
    _flag(p, "--eval_data_paths", "--eval-data-paths", aliases=("--eval-files",), dest="eval_data_paths",
          nargs="+", metavar="PATTERN", type=_patterns,
          help="test TFRecord files or patterns for evaluation, as --train_data_paths")
    _flag(p, "--image-feature", aliases=("--image_feature",), dest="image_feature", default="image",
          help="name of the tf.train.Example bytes feature with the 784 uint8 pixels; `image_raw` "
          "reads the train.tfrecords of the TensorFlow MNIST tutorials (labels: `label`)")
    p.add_argument("--prepare-data", action="store_true",
                   help="when --data-dir has no records, write the model's dataset there first (each replica that reads "
                        "data does it: for a pod's own disk, e.g. on kind, where no bucket is shared; replicas sharing a "
                        "data dir leave one whole copy)")
    p.add_argument("--model", default=DEFAULT_MODEL, choices=sorted(MODELS), help="model to train")
    _flag(p, "--train-steps", aliases=("--train_steps", "--max_steps", "--max-steps"), dest="train_steps",
          type=positive_int, default=None, help="global training steps in total (default: the model's: "
          + ", ".join(f"{name} {steps}" for name, steps in TRAIN_STEPS.items()) + ")")
    _flag(p, "--batch-size", aliases=("--batch_size", "--train_batch_size", "--train-batch-size"), dest="batch_size",
          type=positive_int, default=100, help="examples per worker per step")
    _flag(p, "--learning-rate", aliases=("--learning_rate",), dest="learning_rate", type=_positive_float,
          default=3e-3, help="Adam's peak learning rate, reached after --warmup-steps")
    p.add_argument("--learning-rate-decay", choices=("constant", "cosine"), default="cosine",
                   help="cosine: decay from --learning-rate to 1%% of it over the steps after the warm-up (the last "
                        "steps then refine, so plan --train-steps for the accuracy you want); constant: none")
    p.add_argument("--warmup-steps", type=_non_negative, default=100,
                   help="raise the learning rate linearly from 0 over the first N steps (at most a "
                        "quarter of --train-steps)")
    p.add_argument("--steps-per-execution", type=positive_int, default=10,
                   help="training steps per scheduled tf.function call (cuts coordinator overhead)")
    p.add_argument("--log-every-steps", type=positive_int, default=100, help="print a Train line every N steps")
    p.add_argument("--eval-every-steps", type=_non_negative, default=500,
                   help="evaluate on the test set every N steps (0: only at the end); a parameter-server chief "
                        "evaluates beside the training, and its Eval line, naming step N, comes when that is done")
    p.add_argument("--histogram-every-steps", type=_non_negative, default=500,
                   help="write weight histograms to TensorBoard (train/) every N steps (0: never); the "
                        "learning rate goes with every Train line, the model graph once")
    p.add_argument("--checkpoint-every-steps", type=_non_negative, default=500,
                   help="save a checkpoint every N steps (0: only at the end)")
    p.add_argument("--ps-min-shard-bytes", type=positive_int, default=256 << 10,
                   help="with ps: a variable is split across the ps tasks (MinSizePartitioner) into at most one "
                        "shard per ps, each at least this many bytes; a smaller value spreads smaller variables, "
                        "e.g. the taxi model's embedding tables, over the ps tasks")
    _flag(p, "--eval-batch-size", aliases=("--eval_batch_size",), dest="eval_batch_size", type=positive_int,
          default=500, help="batch size of evaluation")
    p.add_argument("--threads", type=_non_negative, default=_env("TRAINER_THREADS", 0, _non_negative),
                   help="intra-op threads of this process; 0: sized for the machine (replicas on one "
                        "machine share its cores, a container's CPU limit caps it, else TensorFlow "
                        "decides) (env TRAINER_THREADS)")
    p.add_argument("--poll-seconds", type=_positive_float, default=_env("TRAINER_POLL_SECONDS", 5.0, _positive_float),
                   help="ps, parameter-server workers and the evaluator: how often to look for the chief's done "
                        "marker in --job-dir (a chief waiting for the evaluator's last Eval: at most 1 s) "
                        "(env TRAINER_POLL_SECONDS)")
    p.add_argument("--orphan-seconds", type=_positive_float,
                   default=_env("TRAINER_ORPHAN_SECONDS", 900.0, _positive_float),
                   help="ps, parameter-server workers and the evaluator: exit when the chief has been unreachable "
                        "this long "
                        "(env TRAINER_ORPHAN_SECONDS)")
    return p


def _split(patterns: list[str] | None) -> list[str] | None:
    """`a,b c` -> [a, b, c]: the samples pass one comma-separated value or several."""
    if patterns is None:
        return None
    return [part for pattern in patterns for part in pattern.split(",") if part]


def check(argv: list[str]) -> None:
    """Raise FlagError if `python -m trainer.task ARGV` would refuse ARGV at its start (exit
    2), e.g. for a launcher about to run it; -h/--help are left out (not acted on here)."""
    p = parser()
    p.raising = True
    argv = [arg for arg in argv if arg not in ("-h", "--help")]
    _conflicts(p, p.parse_args(argv), given(argv))


def _conflicts(p: Parser, args: argparse.Namespace, typed: frozenset[str]) -> None:
    """Flags that parse one by one but not together (`typed`: given(argv))."""
    if args.prepare_data and args.train_data_paths and args.eval_data_paths:
        p.error("argument --prepare-data: writes --data-dir's records, and both --train_data_paths and "
                "--eval_data_paths are read instead; drop one of them")
    if args.model not in IMAGE_FEATURE and "image_feature" in typed:
        p.error(f"argument --image-feature: names the image feature of an image model's records, and --model "
                f"{args.model} reads no image; drop it")
    if args.model in METADATA_IN_DATA_DIR and (args.train_data_paths or args.eval_data_paths) \
            and args.data_dir is None and not os.environ.get(DATA_DIRS[DATASETS[args.model]][0]):
        flag = "--train_data_paths" if args.train_data_paths else "--eval_data_paths"
        p.error(f"argument {flag}: the {args.model} model takes its vocabularies and statistics from "
                "--data-dir's metadata.json, and none was given for these records; give --data-dir, the dir "
                "that holds theirs")


def given(argv: list[str]) -> frozenset[str]:
    """The flags (dests) ARGV sets itself, not a default or an environment variable: notes on
    a flag that does nothing in this process name only what was typed."""
    p = parser()
    for action in p._actions:
        action.default = argparse.SUPPRESS
    return frozenset(vars(p.parse_known_args(argv)[0]))


def warmup_steps(args: argparse.Namespace) -> int:
    """--warmup-steps, at most a quarter of --train-steps."""
    return min(args.warmup_steps, args.train_steps // 4)


def notes(args: argparse.Namespace, mode: str) -> list[str]:
    """What a training process (chief, worker, single; `mode` as cluster.Cluster's) says of its
    flags before it trains: intervals finer than --steps-per-execution (the loop acts between
    calls, so they come every call instead: a checkpoint every 100 steps, not 20, means more
    steps redone after a loss), flags typed that act in another mode only, a capped warm-up."""
    spe = args.steps_per_execution
    lines = [f"note: --{name}-every-steps {value} is finer than --steps-per-execution {spe}: every {spe} steps "
             f"instead (the loop acts between calls)"
             for name in ("log", "eval", "histogram", "checkpoint")
             if 0 < (value := getattr(args, f"{name}_every_steps")) < spe]
    typed = getattr(args, "given", frozenset())
    if "ps_min_shard_bytes" in typed and mode != "ps":
        lines.append("note: --ps-min-shard-bytes is not used: it splits variables over the ps tasks, and this job "
                     "has none")
    if mode == "single":
        lines += [f"note: --{name.replace('_', '-')} is not used: it paces the ps, workers and evaluator of a "
                  "job with a chief, and this process trains alone"
                  for name in ("poll_seconds", "orphan_seconds") if name in typed]
    if "warmup_steps" in typed and warmup_steps(args) < args.warmup_steps:
        lines.append(f"note: --warmup-steps {args.warmup_steps} is more than a quarter of --train-steps "
                     f"{args.train_steps}: {warmup_steps(args)} warm-up steps instead")
    return lines


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = p.parse_args(argv)
    args.given = given(argv)  # parsed once more, without defaults: for _conflicts and notes()
    _conflicts(p, args, args.given)
    args.train_data_paths, args.eval_data_paths = _split(args.train_data_paths), _split(args.eval_data_paths)
    args.data_dir = args.data_dir or default_data_dir(args.model)
    args.job_dir = args.job_dir or os.path.join("runs", args.model)
    args.train_steps = args.train_steps or TRAIN_STEPS[args.model]
    return args
