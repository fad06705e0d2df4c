"""A cluster that answers badly, against the real kube-apiserver and training-operator: a
TFJob no training-operator takes up (the real operator leaves one with runPolicy.managedBy
set to Kueue's MultiKueue alone, as it would a job it does not watch): a note instead of a
silent wait."""
from __future__ import annotations

import threading

import pytest

from tests.support.k8s_backend import Collector, manifest
from tests.support.polling import wait_for

WAIT_S = 60.0


@pytest.fixture
def backend(control_plane):
    from launcher.backends.k8s import KubernetesBackend

    with control_plane.in_process():
        made = []

        def make(kubeconfig=control_plane.kubeconfig):
            made.append(KubernetesBackend(kubeconfig=str(kubeconfig), note=notes.append))
            return made[-1]

        notes: list[str] = []
        make.notes = notes
        try:
            yield make
        finally:
            for one in made:
                one.close()


def test_a_tfjob_no_operator_takes_up_is_noted_while_followed(control_plane, backend):
    cp = control_plane
    k8s = backend()
    k8s.unclaimed_seconds = 2.0
    with cp.namespace("unclaimed", wait=False) as ns:
        job = manifest(namespace=ns, workers=1)
        job["spec"]["runPolicy"]["managedBy"] = "kueue.x-k8s.io/multikueue"  # training-operator leaves it alone
        k8s.submit(job)
        stop = threading.Event()
        events = Collector(k8s.events("mnist", ns, stop))
        try:
            note = wait_for(lambda: backend.notes, "a note on the TFJob nobody took up", WAIT_S)
        finally:
            stop.set()
        assert events.wait_done(timeout=WAIT_S) == []
        assert note == [f"note: tfjob mnist has no status after 2 s: no training-operator has taken it up; check "
                        f"that the Kubeflow training-operator runs (kubectl get pods -n kubeflow), watches namespace "
                        f"{ns} and has tfjob among its --enable-scheme"]
        assert not cp.kubectl_json("get", "tfjob", "mnist", "-n", ns).get("status")
