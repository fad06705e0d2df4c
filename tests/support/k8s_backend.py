"""Helpers for the k8s backend tests (the `k8s_backend` fixture is in apiserver.py): a
rendered TFJob, and `Collector`, which consumes a backend iterator (events, logs -f) in a
thread so the test can drive the fake operator and wait, bounded, for what came out."""
from __future__ import annotations

import threading
from typing import Callable, Iterator

from launcher.render import render
from launcher.spec import JobSpec, ReplicaSpec
from tests.support.polling import wait_for

WAIT = 10.0  # seconds any single expectation may take


def manifest(name: str = "mnist", workers: int = 2, ps: int = 1, chief: int = 1, namespace: str = "default",
             gpus_per_worker: int = 0, **spec) -> dict:
    replicas = {"Chief": ReplicaSpec(chief), "PS": ReplicaSpec(ps), "Worker": ReplicaSpec(workers,
                                     gpus=gpus_per_worker)}
    return render(JobSpec(name=name, namespace=namespace, replicas=replicas, **spec))


class Collector:
    """Runs `iterator` to its end in a daemon thread, keeping what it yields."""

    def __init__(self, iterator: Iterator):
        self.items: list = []
        self.error: BaseException | None = None
        self.done = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, args=(iterator,), daemon=True)
        self._thread.start()

    def _run(self, iterator: Iterator) -> None:
        try:
            for item in iterator:
                with self._cond:
                    self.items.append(item)
                    self._cond.notify_all()
        except BaseException as exc:  # handed to the test by wait_*
            self.error = exc
        finally:
            with self._cond:
                self.done = True
                self._cond.notify_all()

    def wait_for(self, predicate: Callable[[list], bool], what: str, timeout: float = WAIT) -> list:
        """Wait until `predicate(items)` holds; fail naming `what` and what came so far."""
        with self._cond:
            self._cond.wait_for(lambda: predicate(self.items) or self.done, timeout)
            if predicate(self.items):
                return list(self.items)
        raise AssertionError(f"waited for {what}; got {self.items!r} (done={self.done}, error={self.error!r})")

    def wait_done(self, timeout: float = WAIT) -> list:
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise AssertionError(f"the iterator did not end; got {self.items!r}")
        if self.error is not None:
            raise self.error
        return list(self.items)


def watches_open(server, job: str = "mnist") -> bool:
    """Both watches of `job` reached the FAKE API server (so its lists are done)."""
    return all(any(job in (w.query.get("labelSelector", "") + w.query.get("fieldSelector", ""))
                   for w in server.watches(resource)) for resource in ("pods", "tfjobs"))


def watch_lifecycle(backend, server, operator, replicas: int) -> tuple[int, int, list]:
    """Watch a job of `replicas` (1 chief, 1 ps, the rest workers) from submit to Succeeded,
    the fake operator running it; (requests the backend made, requests the server saw, events).
    Before the operator sets Succeeded, the backend has read every pod change so far: the job's
    end comes by the TFJob watch and closes the watches, and on a loaded machine the pod watch's
    thread could otherwise still be behind on its stream."""
    name = f"scale-{replicas}"
    backend.submit(manifest(name=name, workers=replicas - 2))
    backend.requests.reset()
    seen_before = server.count()
    events = Collector(backend.events(name, "default"))
    wait_for(lambda: watches_open(server, name), "the watches", WAIT)

    def pod_changes() -> int:
        return backend.api.received.snapshot().get("pod", {}).get("changes", 0)

    before = pod_changes()

    def pod_watch_caught_up() -> None:
        made = sum(1 for c in server.history
                   if c.resource == "pods" and c.object["metadata"]["name"].startswith(f"{name}-"))
        wait_for(lambda: pod_changes() - before >= made,
                 lambda: f"{made} pod changes read from the pod watch: {backend.api.received.snapshot()}", WAIT)

    operator.run_to_success(name, pod_watch_caught_up)
    items = events.wait_done(timeout=120)
    return backend.requests.total, server.count() - seen_before, items
