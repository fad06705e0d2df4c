"""Bad input is refused with one `error: <field>: <problem>; <fix>` line, exit 2, nothing on
stdout and nothing applied; hostile strings that are legal values are escaped, proven by
parsing the output and comparing the value."""
from __future__ import annotations

import pytest

from tests.support.fakes.backend import FakeBackend

pytestmark = pytest.mark.usefixtures("cli_env")  # the packaged TFJob CRD, a per-session schema cache

INJECT = "x\nkind: Pod\nmetadata: {name: evil}\n---\napiVersion: v1"

REFUSED = [
    (["--volume", "data:/usr"], "--volume"),  # would hide Python
    (["--volume", "data:/dev/shm"], "--volume"),  # under the runtime's /dev
    (["--volume", "data:/mnt/../etc"], "--volume"),
    # two flags giving the same thing differently: refused, not one silently dropped
    (["--worker-accelerator", "type=nvidia-tesla-t4,count=1", "--gpus-per-worker", "2"], "--gpus-per-worker"),
    (["--accelerator", "nvidia-l4", "--gpus-per-worker", "1",
      "--node-selector", "worker:cloud.google.com/gke-accelerator=nvidia-tesla-t4"], "--node-selector"),
    (["--workers", "-1"], "--workers"),
    (["--ps", "-2"], "--ps"),
    (["--chief", "2"], "--chief"),
    (["--evaluator", "2"], "--evaluator"),
    (["--workers", "abc"], "--workers"),
    (["--workers", "1.5"], "--workers"),
    (["--workers", "0", "--ps", "0"], "--workers"),
    (["--ps", "1", "--chief", "0"], "--chief"),
    (["--name", "My_Job"], "--name"),
    (["--name", "1job"], "--name"),
    (["--name", "job-"], "--name"),
    (["--name", "job\nkind: Pod"], "--name"),
    (["--name", "job: {x: 1}"], "--name"),
    (["--name", "a" * 60], "--name"),
    (["--name", ""], "--name"),
    (["--gpus-per-ps", "1"], "--gpus-per-ps"),
    (["--gpus-per-worker", "-1"], "--gpus-per-worker"),
    (["--accelerator", "nvidia-tesla-t4"], "--accelerator"),
    (["--gpus-per-worker", "1", "--accelerator", "t4\nkind: Pod"], "--accelerator"),
    (["--label", "team=a\nkind: Pod"], "--label"),
    (["--label", "team=x: y"], "--label"),
    (["--label", "bad key=v"], "--label"),
    (["--label", "/team=a"], "--label"),  # an empty prefix: Kubernetes and the chart refuse it
    (["--node-selector", "/pool=a"], "--node-selector"),
    (["--label", "novalue"], "--label"),
    (["--label", "team=" + "a" * 64], "--label"),
    (["--env", "1A=x"], "--env"),
    (["--env", "TF_CONFIG={}"], "--env"),
    (["--env", "A\nkind: Pod=x"], "--env"),
    (["--env", "noequals"], "--env"),
    (["--node-selector", "pool=gpu\n"], "--node-selector"),
    (["--cpu", "worker=2cores"], "--cpu worker="),
    (["--memory", "ps=lots"], "--memory ps="),
    (["--cpu", "master=1"], "--cpu"),
    (["--restart-policy", "Sometimes"], "--restart-policy"),
    (["--clean-pod-policy", "Some"], "--clean-pod-policy"),
    (["--ttl-seconds", "-5"], "--ttl-seconds"),
    (["--backoff-limit", "-1"], "--backoff-limit"),
    (["--active-deadline-seconds", "soon"], "--active-deadline-seconds"),
    (["--job-dir", "s3://bucket/x"], "--job-dir"),
    (["--job-dir", "gs://B/x"], "--job-dir"),
    (["--job-dir", "/tmp/out\nkind: Pod"], "--job-dir"),
    (["--job-dir", " "], "--job-dir"),  # blank: the trainer would have put checkpoints/ at /
    (["--image", "repo/img:1 --privileged"], "--image"),
    (["--image", ""], "--image"),
    (["--service-account", "Admin SA"], "--service-account"),
    (["-n", "kube system"], "--namespace"),
    (["-n", "ns\n"], "--namespace"),
    (["-n", "a" * 64], "--namespace"),  # a DNS-1123 label: 63 at most
    (["--config", "/nonexistent/config.yaml"], "--config"),
    (["--backend", "cloud"], "--backend"),
    (["-o", "xml"], "--output"),
    (["--workers", "0", "--ps", "1"], "--workers"),
    (["--queue-name", "Team A"], "--queue-name"),
    (["--queue-name", "q", "--label", "kueue.x-k8s.io/queue-name=other"], "--label"),
    (["--priority-class", "High Priority"], "--priority-class"),
    (["--success-policy", "AllChiefs"], "--success-policy"),
    (["--gang-timeout-seconds", "60"], "--gang-timeout-seconds"),
    (["--gang", "--gang-timeout-seconds", "0"], "--gang-timeout-seconds"),
    (["--gang-queue", "research"], "--gang-queue"),
    (["--gang", "--gang-queue", "Research Team"], "--gang-queue"),
    (["--gang", "--gang-queue", "q\nkind: Pod"], "--gang-queue"),
    (["--gang-min-available", "2"], "--gang-min-available"),
    (["--gang", "--gang-min-available", "0"], "--gang-min-available"),
    (["--gang", "--gang-min-available", "5"], "--gang-min-available"),
    (["--gang", "--gang-min-available", "-1"], "--gang-min-available"),
    (["--gpus-per-worker", "1", "--accelerator", "nvidia-tesla-t1000"], "--accelerator"),
    (["--node-selector", "cloud.google.com/gke-accelerator=nvidia-tesla-t4", "--gpus-per-worker", "1"],
     "--node-selector"),
    (["--node-selector", "ps:cloud.google.com/gke-accelerator=nvidia-l4"], "--node-selector"),
    (["--node-selector", "master:pool=a"], "--node-selector"),
    (["--node-selector", "worker:pool"], "--node-selector"),
    (["--gpus-per-chief", "1", "--ps", "0"], "--gpus-per-chief"),
    (["--gpus-per-evaluator", "1"], "--gpus-per-evaluator"),
    (["--active-deadline-seconds", "0"], "--active-deadline-seconds"),
    (["--label", "app.kubernetes.io/instance=other"], "--label"),
    (["--label", "app.kubernetes.io/managed-by=helm"], "--label"),
    (["--label", "training.kubeflow.org/job-role=master"], "--label"),  # on every pod, not the master's alone
    (["--labels", "training.kubeflow.org/replica-type=worker"], "--label"),  # the operator's own, per pod
    (["--cpu", "lots"], "--cpu"),
    (["--memory", "ps=1Gi", "--memory", "4 GB"], "--memory"),
    (["--volume", "Data:/mnt/data"], "--volume"),
    (["--volume", "data"], "--volume"),
    (["--volume", "data:mnt/data"], "--volume"),
    (["--volume", ":/mnt/data"], "--volume"),
    (["--volume", "data:/mnt/data:rx"], "--volume"),
    (["--volume", "data:/mnt/data:ro:x"], "--volume"),  # not its first two parts, the rest dropped
    (["--volume", "data:/mnt/a/../b"], "--volume"),
    (["--volume", "data:/mnt/data\nkind: Pod"], "--volume"),
    (["--volume", "data:/"], "--volume"),
    (["--volume", "a" * 254 + ":/mnt/data"], "--volume"),
    (["--volume", "data:/mnt/a", "--volume", "data:/mnt/b"], "--volume"),
    (["--volume", "a:/mnt/data", "--volume", "b:/mnt/data/"], "--volume"),
    (["--volume", "a:/mnt/data", "--volume", "b:/mnt//data"], "--volume"),  # one mount, spelled twice
    (["--module-name", "trainer-task"], "--module-name"),
    (["--module-name", "trainer.task\nkind: Pod"], "--module-name"),
    (["--package-path", "/mnt/code/trainer"], "--package-path"),
    (["--module-name", "other.task", "--package-path", "/mnt/code/trainer", "--volume", "c:/mnt/code"],
     "--package-path"),
    (["--module-name", "trainer.task", "--package-path", "/mnt/code/trainer"], "--package-path"),
    (["--module-name", "trainer.task", "--package-path", "/mnt/code:x/trainer", "--volume", "c:/mnt/code"],
     "--package-path"),
    (["--module-name", "trainer.task", "--package-path", "/mnt/code/trainer", "--volume", "c:/mnt/code",
      "--env", "PYTHONPATH=/x"], "--env"),
    (["--job-dir", "gs://BUCKET/runs/x"], "--job-dir"),
    (["--job-dir", "gs://goog-runs/x"], "--job-dir"),
    (["--image", 'x"y'], "--image"),
    (["--image", "a/b:c:d"], "--image"),
    (["--image", "UPPER/img:1"], "--image"),
    (["--image", "img@sha256:short"], "--image"),
    (["--workers", "99999999999999999999"], "--workers"),
    (["--workers", "0x2"], "--workers"),  # decimal, as gcloud's: not Python's 0x, 0o, 0b
    (["--ps", "2147483648"], "--ps"),
    (["--backoff-limit", "2147483648"], "--backoff-limit"),
    (["--ttl-seconds", "2147483648"], "--ttl-seconds"),
    (["--cpu", "1.2.3"], "--cpu"),
    (["--cpu", "."], "--cpu"),
    # gcloud ai-platform jobs submit training's flags
    (["--worker-count", "abc"], "--worker-count"),  # named as typed, though --help lists it under --workers
    (["--worker-count", "-1"], "--worker-count"),  # the JobSpec's check too
    (["--worker-count=-1"], "--worker-count"),
    (["--parameter-server-count", "-2"], "--parameter-server-count"),
    (["--master-image-uri", "UPPER/img:1"], "--master-image-uri"),
    (["--worker-count", "2", "--workers", "3"], "--workers"),  # by two names: refused, not the last one kept
    (["--image", "gcr.io/p/a:1", "--master-image-uri", "gcr.io/p/b:1"], "--master-image-uri"),
    (["-n", "a", "--namespace", "b"], "--namespace"),
    (["--worker-image-uri", "gcr.io/p/w:1"], "--worker-image-uri"),
    (["--parameter-server-accelerator", "type=nvidia-tesla-t4,count=1"], "--parameter-server-accelerator"),
    (["--use-chief-in-tf-config", "maybe"], "--use-chief-in-tf-config"),
    (["--labels", "team=a,kind"], "--labels"),
    (["--labels", "team=a\nkind: Pod"], "--label"),
    (["--service-account", "sa@p.iam.gserviceaccount.com"], "--service-account"),
    (["--cpu", "worker=1.2.3"], "--cpu worker="),
    (["--env", "JOB_DIR=gs://b/runs/x"], "--env"),  # the trainer's job dir, which the launcher reads from args
    # a value for a replica type the job does not have: refused, not dropped
    (["--ps", "0", "--cpu", "ps=4"], "--cpu ps="),
    (["--memory", "evaluator=8Gi"], "--memory evaluator="),
    (["--node-selector", "evaluator:pool=a"], "--node-selector evaluator:"),
    (["--ps", "0", "--parameter-server-machine-type", "n1-highmem-8"], "--parameter-server-machine-type"),
    # an instance-type selector for another machine than the machine type's: pods that never fit
    (["--worker-machine-type", "n1-highmem-16", "--node-selector",
      "worker:node.kubernetes.io/instance-type=n1-standard-4"], "--worker-machine-type"),
    (["--worker-machine-type", "n1-highmem-16", "--node-selector", "node.kubernetes.io/instance-type=n1-standard-4"],
     "--worker-machine-type"),
    (["--memory", "ps=4Gi.5"], "--memory ps="),
]


@pytest.mark.parametrize("argv, field", REFUSED, ids=[f"{i}:{f}" for i, (_, f) in enumerate(REFUSED)])
def test_render_refuses(cli, argv, field):
    result = cli("render", "--name", "ok", *argv) if "--name" not in argv else cli("render", *argv)
    assert result.code == 2
    assert result.out == ""
    lines = result.err.splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith(f"error: {field}: "), lines[0]
    assert ";" in lines[0]  # the problem, then the fix


@pytest.mark.parametrize("argv, field", REFUSED[:12] + REFUSED[16:20])
def test_submit_refuses_and_applies_nothing(cli, argv, field):
    backend = FakeBackend(name="k8s")
    argv = argv if "--name" in argv else ["--name", "ok", *argv]
    result = cli("submit", "--backend", "k8s", *argv, backend=backend)
    assert (result.code, result.out) == (2, "")
    assert backend.submitted == [] and backend.dry_runs == []


def test_notes_on_ignored_flags_wait_until_the_input_passed_every_check(cli):
    """gcloud's --region is noted as ignored, but not beside a refusal: bad input is one line."""
    backend = FakeBackend(name="k8s")
    result = cli("submit", "--backend", "k8s", "--name", "ok", "--region", "us-central1", "--", "--train-steps",
                 "abc", backend=backend)
    result.refused("trainer arguments (after --)")
    assert backend.submitted == [] and backend.dry_runs == []
    done = cli("submit", "--backend", "k8s", "--name", "ok", "--region", "us-central1", "--detach", backend=backend)
    assert done.code == 0 and done.err.startswith("note: --region is a Cloud ML setting with no TFJob equivalent")


@pytest.mark.parametrize("argv, line", [
    (["--job-dir", "gs://BUCKET/runs/x"],
     "error: --job-dir: bucket 'BUCKET' of 'gs://BUCKET/runs/x' is not a Cloud Storage bucket name; bucket names are 3-63 "
     "lowercase letters, digits, '-', '_' and '.' (up to 222 with dots, 63 between dots), starting and ending with "
     "a letter or digit, e.g. gs://bucket/runs/x"),
    (["--workers", "99999999999999999999"],
     "error: --workers: replica count 99999999999999999999 is too large; use at most 2147483647"),
    (["--cpu", "1.2.3"],
     "error: --cpu: '1.2.3' is not a Kubernetes quantity; use digits with at most one '.' and an optional suffix "
     "n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei or e<N> (e.g. 500m, 1.5, 4Gi)"),
    (["--image", "img@sha256:short"],
     "error: --image: digest 'sha256:short' of 'img@sha256:short' is invalid; use sha256: and 64 lowercase hex "
     "digits, or drop the @ part to pull by tag"),
    (["--label", "training.kubeflow.org/job-role=master"],
     "error: --label: training.kubeflow.org/job-role is the training-operator's: it sets its own on each pod (job "
     "name, replica type and index, the master's role); use another key"),
])
def test_refusals_name_the_flag_and_the_rule(cli, argv, line):
    """Refused by the JobSpec, naming the flag, not by the CRD schema check with a manifest path."""
    backend = FakeBackend(name="k8s")
    result = cli("submit", "--backend", "k8s", "--name", "ok", *argv, backend=backend)
    assert (result.code, result.out, result.err) == (2, "", line + "\n")
    assert backend.submitted == [] and backend.dry_runs == []


def test_unknown_flag_is_one_line(cli):
    result = cli("render", "--wrokers", "2")
    assert (result.code, result.out) == (2, "")
    assert result.err.count("\n") == 1 and result.err.startswith("error: ") and "--wrokers" in result.err


@pytest.mark.parametrize("argv, line", [
    # flags are taken whole, as kubectl and gcloud take them: a prefix is not its flag
    (["list", "--all"], "error: --all: unknown flag of python -m launcher list; did you mean --all-namespaces? "
                        "see python -m launcher list --help"),
    (["submit", "--backend", "k8s", "--name", "a", "--worker", "2"],
     "error: --worker: unknown flag of python -m launcher submit; did you mean --workers, --worker-machine-type "
     "or --worker-accelerator? "
     "see python -m launcher submit --help"),
    (["logs", "a", "--foll"], "error: --foll: unknown flag of python -m launcher logs; did you mean --follow? "
                              "see python -m launcher logs --help"),
    (["render", "--wrokers=2"], "error: --wrokers: unknown flag of python -m launcher render; did you mean "
                                "--workers? see python -m launcher render --help"),
    (["models", "list", "--all"], "error: --all: unknown flag of python -m launcher models list; did you mean "
                                  "--all-namespaces? see python -m launcher models list --help"),
    (["delete", "a", "--zzzzzz"], "error: --zzzzzz: unknown flag of python -m launcher delete; "
                                  "see python -m launcher delete --help"),
    (["list", "--a\nkind: Pod"], "error: '--a\\nkind: Pod': unknown flag of python -m launcher list; "
                                   "see python -m launcher list --help"),
    (["status", "a", "b"], "error: python -m launcher status: unexpected argument 'b'; "
                           "see python -m launcher status --help"),
    # a trainer flag before the -- that would have passed it on
    (["submit", "--backend", "k8s", "--name", "a", "--train-steps", "200"],
     "error: --train-steps: a flag of the trainer, which goes after --: python -m launcher submit [flags] -- "
     "--train-steps ...; see python -m trainer.task --help"),
    (["render", "--model_dir=x"], "error: --model_dir: a flag of the trainer, which goes after --: python -m launcher "
                                  "render [flags] -- --model_dir ...; see python -m trainer.task --help"),
])
def test_a_flag_prefix_or_typo_is_refused_with_the_flag_it_resembles(cli, argv, line):
    backend = FakeBackend(name="k8s")
    result = cli(*argv, backend=backend)
    assert (result.code, result.out, result.err) == (2, "", line + "\n")
    assert backend.submitted == [] and backend.dry_runs == []


def test_submit_and_render_help_say_where_trainer_arguments_go(capsys):
    from launcher.cli import build_parser

    for command in ("submit", "render"):
        with pytest.raises(SystemExit):
            build_parser().parse_args([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert text.startswith(f"usage: python -m launcher {command} [JOB] [flags] [-- TRAINER_ARGS ...]")
        assert "Trainer arguments go after --" in text and "python -m trainer.task --help" in text


def test_missing_command_prints_help_and_exits_2(cli):
    result = cli()
    assert result.code == 2 and result.out == "" and "submit" in result.err


def test_trainer_args_only_for_submit_and_render(cli):
    result = cli("status", "job", "--", "--train-steps", "1", backend=FakeBackend(existing=("job",)))
    assert result.code == 2 and result.err.startswith("error: --: ")


HOSTILE = [INJECT, "'; rm -rf / #", '"quoted" \\ backslash', "{{ 7 * 7 }}", "{% raw %}", "&anchor *alias",
           "!!python/object/apply:os.system ['id']", "- item", "key: value", "#comment", "</script>", "",
           " leading and trailing ", "tab\tand\rcarriage", "unicode ✓ ünïcödé", "null", "true", "0x10", "1e3"]


@pytest.mark.parametrize("value", HOSTILE)
def test_env_values_round_trip(cli, value):
    result = cli("render", "--name", "ok", "--env", f"VALUE={value}")
    assert result.code == 0, result.err
    for replica in result.manifest()["spec"]["tfReplicaSpecs"].values():
        assert replica["template"]["spec"]["containers"][0]["env"] == [{"name": "VALUE", "value": value}]


OWN_PROGRAM = ("--image", "registry.example/own-program:1")  # its arguments are passed on unchecked


def test_trainer_args_round_trip(cli):
    result = cli("render", "--name", "ok", *OWN_PROGRAM, "--job-dir", "/tmp/out dir: {x}", "--", *HOSTILE)
    assert result.code == 0, result.err
    manifest = result.manifest()
    assert manifest["kind"] == "TFJob" and manifest["metadata"]["name"] == "ok"
    for replica in manifest["spec"]["tfReplicaSpecs"].values():
        assert replica["template"]["spec"]["containers"][0]["args"] == ["--job-dir", "/tmp/out dir: {x}", *HOSTILE]


def test_json_output_round_trips_hostile_values(cli):
    import json

    result = cli("render", "-o", "json", "--name", "ok", *OWN_PROGRAM, "--env", f"VALUE={INJECT}", "--", INJECT)
    container = json.loads(result.out)["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert container["env"] == [{"name": "VALUE", "value": INJECT}]
    assert container["args"] == [INJECT]


def test_the_trainers_own_module_gets_its_arguments_checked(cli):
    """--module-name trainer.task runs the default image's trainer as its ENTRYPOINT does: an
    argument it refuses is refused here, before every replica would exit 2 on it."""
    result = cli("render", "--name", "ok", "--module-name", "trainer.task", "--", "--train-steps", "abc")
    assert (result.code, result.out) == (2, "")
    assert result.err.startswith("error: trainer arguments (after --): argument --train-steps: ") and \
        result.err.count("\n") == 1, result.err


def test_a_refused_trainer_argument_is_quoted_on_one_line(cli):
    result = cli("render", "--name", "ok", "--", *HOSTILE)  # the default image's trainer would refuse them
    assert (result.code, result.out) == (2, "") and result.err.count("\n") == 1, result.err
    assert result.err.startswith("error: trainer arguments (after --): unrecognized arguments: x\\nkind: Pod\\n")


@pytest.mark.parametrize("command", ["render", "submit"])
def test_volume_on_the_local_backend_is_refused(cli, command):
    backend = FakeBackend(name="local")
    result = cli(command, "--name", "ok", "--backend", "local", "--volume", "data:/mnt/data", backend=backend)
    assert (result.code, result.out) == (2, "")
    assert result.err.startswith("error: --volume: PersistentVolumeClaims exist only on a cluster")
    assert result.err.count("\n") == 1 and backend.submitted == []


def test_an_output_that_cannot_be_written_is_one_line_not_a_traceback():
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    with open("/dev/full", "w") as full:  # every write: ENOSPC, as a full disk
        done = subprocess.run([sys.executable, "-m", "launcher", "render", "--name", "a"], cwd=root, stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (1, "error: cannot write the output: No space left on device\n")


def _subcommands(parser):
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield name, sub
                yield from ((f"{name} {inner}", deeper) for inner, deeper in _subcommands(sub))


def test_every_command_explains_itself_and_its_arguments_in_help():
    from launcher.cli import build_parser

    missing = []
    for name, sub in _subcommands(build_parser()):
        missing += [] if sub.description else [f"{name}: description"]
        missing += [f"{name}: {action.dest}" for action in sub._actions if not action.help]
    assert missing == []


def test_the_examples_in_help_are_commands_the_launcher_and_trainer_take():
    import shlex

    from launcher.cli import EXAMPLES, build_parser, split_trainer_args
    from launcher.cli.args import build_spec
    from trainer import flags

    for command, text in EXAMPLES.items():
        for example in text.replace("\\\n", " ").splitlines():
            argv = shlex.split(example.split(" > ")[0])  # less the shell's redirection
            assert argv[:4] == ["python", "-m", "launcher", command], example
            ours, trainer_args = split_trainer_args(argv[3:])
            args = build_parser().parse_args(ours)  # a UsageError would name the flag
            flags.check(list(trainer_args))
            if command in ("submit", "render") and args.config is None:  # the JobSpec takes its values too
                build_spec(args, trainer_args)  # (placeholders in capitals were refused: gs://BUCKET)
