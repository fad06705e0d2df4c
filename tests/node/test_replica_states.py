"""Replica states as the real kubelet and training-operator make them, shown by the launcher
(the API-server double's tests write the same states by hand; these hold them to the real
thing). The trainer image refuses `--train-steps -5` with one line and exit code 2:

- under `--restart-policy ExitCode` that code is permanent: the operator fails the TFJob,
  `submit` exits 1 after showing chief-0 Failed with exit code 2 and the trainer's line;
- under `OnFailure` the kubelet restarts the container with back-off: `status -o wide`
  shows chief-0 in CrashLoopBackOff with the last exit code 2, and `logs -p` prints the
  trainer's line. Once a restarted container exited, the kubelet has removed the one before
  and until the back-off ends its status still names that one as the last state (every
  `previous` answer is "unable to retrieve container logs"): `logs -p` prints the last
  container's line with a note saying so.

An image the node does not have (`localhost/tfjob-missing:0`, pull policy IfNotPresent:
containerd tries a registry on 127.0.0.1 inside the node's network namespace, refused, so
nothing leaves the machine): the live view and `status` show the kubelet's ErrImagePull /
ImagePullBackOff with its message, plain `status` the reason in its REASON column.
"""
from __future__ import annotations

import json
import re

from tests.support.launcher_process import launcher_process, run_launcher
from tests.support.node.jobs import training_namespace
from tests.support.polling import wait_for

RUN_TIMEOUT_S = 300.0
REFUSED = ("--train-steps", "-5")
REFUSAL = "must be > 0, got -5"
PREVIOUS_GONE = ("note: chief-0: the kubelet no longer has the previous container (it keeps the last exited one only); "
                 "this is the log of the last container, which exited with code 2")


def test_a_chief_exiting_2_under_exit_code_fails_the_job_and_submit_says_why(node_cluster, trainer_image):
    job = "bad-exitcode"
    with training_namespace(node_cluster, "node-failed") as ns:
        args = ns.submit_args(job, trainer_image, "--chief", "1", "--workers", "0", "--ps", "0", "--restart-policy", "ExitCode",
                              trainer=REFUSED)
        with launcher_process(node_cluster, *args) as submit:
            code = submit.wait(RUN_TIMEOUT_S)
        assert code == 1, submit.output
        assert re.search(r"^\[chief-0\] Failed \(.*exit code 2", submit.output, re.M), submit.output
        assert REFUSAL in submit.output, submit.output  # the trainer's own line, from the chief's log
        assert re.search(rf"^{job}: Failed \(", submit.output, re.M), submit.output
        assert "Failed" in ns.tfjob_conditions(job)


def test_a_chief_exiting_2_under_on_failure_crash_loops_and_status_shows_it(node_cluster, trainer_image):
    job = "bad-onfailure"
    with training_namespace(node_cluster, "node-crashloop") as ns:
        args = ns.submit_args(job, trainer_image, "--chief", "1", "--workers", "0", "--ps", "0", "--restart-policy", "OnFailure",
                              trainer=REFUSED)
        submitted = run_launcher(node_cluster, *args[:args.index("--")], "--detach", *args[args.index("--"):])
        assert submitted.returncode == 0, submitted.stdout + submitted.stderr

        def crash_looping() -> dict | None:
            shown = run_launcher(node_cluster, "status", job, "--backend", "k8s", "-n", ns.name, "-o", "json")
            chief = next((r for r in json.loads(shown.stdout or "{}").get("replicas", []) if r["replica"] == "chief-0"),
                         {})
            return chief if (chief.get("message") or "").startswith("CrashLoopBackOff") else None

        chief = wait_for(crash_looping, "chief-0 in CrashLoopBackOff in `status -o json`", RUN_TIMEOUT_S, interval=2.0)
        assert chief["exit_code"] == 2 and chief["restarts"] >= 1, chief

        def wide_row() -> str | None:  # EXIT CODE then MESSAGE (the container may be between restarts: wait)
            wide = run_launcher(node_cluster, "status", job, "--backend", "k8s", "-n", ns.name, "-o", "wide").stdout
            row = next((line for line in wide.splitlines() if line.startswith("chief-0")), "")
            return row if re.search(r"\s2\s+CrashLoopBackOff", row) else None

        wait_for(wide_row, "chief-0's row in `status -o wide` with exit code 2 and CrashLoopBackOff", RUN_TIMEOUT_S,
                 interval=2.0)

        def exited_in_back_off() -> str | None:  # the kubelet removed the container before this one as it exited
            status = ns.pod(f"{job}-chief-0")["status"]["containerStatuses"][0]
            ended = (status.get("state") or {}).get("terminated") or {}
            before = ((status.get("lastState") or {}).get("terminated") or {}).get("containerID")
            return ended.get("containerID") if before and ended.get("containerID") not in (None, before) else None

        ended = wait_for(exited_in_back_off, "chief-0 exited again, before its next back-off ends", RUN_TIMEOUT_S,
                         interval=1.0)
        previous = run_launcher(node_cluster, "logs", job, "--backend", "k8s", "-n", ns.name, "--replica", "chief-0",
                                "-p")
        assert previous.returncode == 0 and REFUSAL in previous.stdout, previous.stdout + previous.stderr
        if exited_in_back_off() == ended:  # the same back-off throughout: the previous container was gone
            assert PREVIOUS_GONE in previous.stderr, previous.stderr
        deleted = run_launcher(node_cluster, "delete", job, "--backend", "k8s", "-n", ns.name, "--wait")
        assert deleted.returncode == 0, deleted.stderr


MISSING_IMAGE = "localhost/tfjob-missing:0"
PULL_LINE = re.compile(r"\[chief-0\] Pending \(node \S+, (ErrImagePull|ImagePullBackOff): ")


def test_an_image_the_node_cannot_pull_shows_the_kubelets_reason_and_message(node_cluster):
    job = "no-image"
    with training_namespace(node_cluster, "node-pull") as ns:
        args = ns.submit_args(job, MISSING_IMAGE, "--chief", "1", "--workers", "0", "--ps", "0")
        with launcher_process(node_cluster, *args) as submit:  # ErrImagePull, then ImagePullBackOff, and again
            line = wait_for(lambda: next((line for line in submit.lines if PULL_LINE.match(line)), None),
                            lambda: f"no [chief-0] line with the kubelet's pull error; output:\n{submit.output}",
                            RUN_TIMEOUT_S)
        assert "tfjob-missing" in line, line  # the kubelet's message names the image

        def shown() -> tuple[dict, str] | None:
            as_json = run_launcher(node_cluster, "status", job, "--backend", "k8s", "-n", ns.name, "-o", "json")
            chief = next((r for r in json.loads(as_json.stdout or "{}").get("replicas", [])
                          if r["replica"] == "chief-0"), {})
            plain = run_launcher(node_cluster, "status", job, "--backend", "k8s", "-n", ns.name).stdout
            row = next((line for line in plain.splitlines() if line.startswith("chief-0")), "")
            reason = (chief.get("message") or "").split(":")[0]
            return (chief, row) if reason in ("ErrImagePull", "ImagePullBackOff") and reason in row.split() else None

        chief, row = wait_for(shown, "chief-0 with the kubelet's pull error in `status -o json` and plain `status`",
                              RUN_TIMEOUT_S, interval=2.0)
        assert chief["phase"] == "Pending" and chief["exit_code"] is None, chief
        assert MISSING_IMAGE in chief["message"], chief  # the kubelet's message names the image
        assert row.split()[1] == "Pending", row
        pod = ns.pod(f"{job}-chief-0")
        waiting = pod["status"]["containerStatuses"][0]["state"]["waiting"]
        assert waiting["reason"] in ("ErrImagePull", "ImagePullBackOff"), waiting
        deleted = run_launcher(node_cluster, "delete", job, "--backend", "k8s", "-n", ns.name, "--wait")
        assert deleted.returncode == 0, deleted.stderr
