"""$(VAR) in a local job's command, args and env values, as the kubelet expands them
(launcher/backends/local/expansion.py; the whole path through a real job is in
tests/integration/test_local_backend.py)."""
from __future__ import annotations

import pytest

from launcher.backends.local.expansion import container_variables, expand


@pytest.mark.parametrize("text, expanded", [
    ("$(A)-$(B)", "1-2"), ("$$(A)", "$(A)"), ("$$$(A)", "$1"), ("$(NOPE)", "$(NOPE)"), ("$(A", "$(A"),
    ("cost $5 $", "cost $5 $"), ("$$", "$"), ("$()", "$()"),
])
def test_references_are_replaced_and_double_dollars_reduced(text, expanded):
    assert expand(text, {"A": "1", "B": "2"}) == expanded


def test_an_env_value_sees_only_the_entries_before_it_and_a_secrets_value_is_taken_as_is():
    """Kubernetes: an env value may refer to variables defined before it in the list; a
    value from a Secret is never expanded; a declared variable without a value here (the
    TF_CONFIG of a one-replica job) is no variable."""
    declared = [("FIRST", False), ("TOKEN", True), ("SECOND", False), ("TF_CONFIG", False)]
    env = {"FIRST": "a $(SECOND)", "TOKEN": "p$(FIRST)w", "SECOND": "b $(FIRST) $(TOKEN)", "HOME": "/root"}
    assert container_variables(declared, env) == {
        "FIRST": "a $(SECOND)", "TOKEN": "p$(FIRST)w", "SECOND": "b a $(SECOND) p$(FIRST)w"}
