"""A stand-in replica program (no tests here): the manifest's container command runs it.

The last argument is JSON {"replica-id": [action per attempt, ...], "*": [...]}; the attempt
number comes from a counter file in $STATE_DIR, so behaviour can change across restarts.
Actions: serve (mark ready, then block), exitN, wait-ready (exit 0 once every other
replica of the cluster is ready), wait-finish (exit 0 once $STATE_DIR/finish exists),
kill-self (SIGKILL itself: exit code 137).
"""
import json
import os
import signal
import sys
import time
from pathlib import Path

DEADLINE = 120.0


def wait_for(predicate) -> None:
    end = time.monotonic() + DEADLINE
    while not predicate():
        if time.monotonic() > end:
            print("timed out", flush=True)
            sys.exit(3)
        time.sleep(0.05)


def main() -> None:
    tf_config = json.loads(os.environ.get("TF_CONFIG", "{}"))
    task = tf_config.get("task", {"type": "worker", "index": 0})
    me = f"{task['type']}-{task['index']}"
    state = Path(os.environ["STATE_DIR"])
    counter = state / f"{me}.attempts"
    attempt = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(attempt + 1))
    (state / f"{me}.pid").write_text(str(os.getpid()))
    actions = json.loads(sys.argv[-1])
    script = actions.get(me, actions.get("*", ["serve"]))
    action = script[min(attempt, len(script) - 1)]
    print(f"hello from {me} attempt {attempt} action {action}", flush=True)
    print(f"tf_config {json.dumps(tf_config)}", flush=True)
    if action == "serve":
        (state / f"{me}.ready").touch()
        while True:
            time.sleep(3600)
    if action.startswith("exit"):
        print(f"{me} exiting with {action[4:]}", flush=True)
        sys.exit(int(action[4:]))
    if action == "kill-self":
        os.kill(os.getpid(), signal.SIGKILL)
    if action == "wait-ready":
        others = [f"{rtype}-{i}" for rtype, hosts in tf_config["cluster"].items()
                  for i in range(len(hosts)) if f"{rtype}-{i}" != me]
        wait_for(lambda: all((state / f"{o}.ready").exists() for o in others))
    if action == "wait-finish":
        wait_for(lambda: (state / "finish").exists())
    print(f"{me} done", flush=True)


if __name__ == "__main__":
    main()
