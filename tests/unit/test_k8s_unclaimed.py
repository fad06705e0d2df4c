"""Why a TFJob has no status (launcher/backends/k8s/events.py `unclaimed_note`): only the
training-operator's Warnings that end its reconcile before the status write are named by
`status` at once (FailedCreatePod, FailedCreateService); the ones it copies from a waiting
pod (`Error pod P condition message: ...`, pkg/core/job.go of v1.9.4) come beside a status
and are named only once the job has had none for `seconds`. The events are written here as
the operator records them; the API is a stand-in (named as such) answering the events call."""
from __future__ import annotations

from launcher.backends.k8s.events import unclaimed_note

TFJOB = {"metadata": {"name": "mnist", "namespace": "team", "uid": "u-1"}}
UNSCHEDULABLE = {"reason": "Unschedulable", "lastTimestamp": "2026-11-29T07:40:02Z",
                 "message": "Error pod mnist-ps-0 condition message: 0/3 nodes are available: 3 node(s) didn't "
                            "match Pod's node affinity/selector."}
REFUSED = {"reason": "FailedCreatePod", "lastTimestamp": "2026-11-29T07:40:01Z",
           "message": 'Error creating: pods "mnist-worker-0" is forbidden: exceeded quota: pods'}


class StandInApi:
    """Answers `warnings_of` with the events given (a test double of the API's events list)."""

    def __init__(self, *events: dict):
        self.events = list(events)

    def warnings_of(self, kind: str, uid: str, namespace: str) -> list[dict]:
        assert (kind, uid, namespace) == ("TFJob", "u-1", "team")
        return self.events


def test_a_waiting_pods_warning_is_no_reason_to_submit_again_until_the_job_has_had_no_status_long():
    assert unclaimed_note(StandInApi(UNSCHEDULABLE), TFJOB) is None
    late = unclaimed_note(StandInApi(UNSCHEDULABLE), TFJOB, seconds=30)
    assert late.startswith("note: tfjob mnist has no status after 30 s: the training-operator reports Unschedulable")


def test_a_refused_pod_is_named_at_once_even_when_a_later_warning_is_of_a_waiting_pod():
    note = unclaimed_note(StandInApi(REFUSED, UNSCHEDULABLE), TFJOB)
    assert note.startswith("note: tfjob mnist has no status: the training-operator reports FailedCreatePod: "
                           'Error creating: pods "mnist-worker-0" is forbidden'), note
    assert note.endswith("(kubectl describe tfjob mnist -n team lists its events)")


def test_without_warnings_only_a_long_wait_says_no_operator_took_it_up():
    assert unclaimed_note(StandInApi(), TFJOB) is None
    assert "no training-operator has taken it up" in unclaimed_note(StandInApi(), TFJOB, seconds=30)
