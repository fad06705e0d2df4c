"""`$(VAR)` in a container's command, args and env values, expanded as the kubelet expands
them, so that a job runs here as it would in its pods.

The rules (Kubernetes API reference, Container.args and EnvVar.value): a reference
`$(VAR_NAME)` is replaced by the variable's value: for an env value, a variable defined
before it in the container's env list; for the command and args, any variable of the
container's env (the training-operator adds TF_CONFIG to it). A reference to a variable
the container does not define is left as it is. `$$` is reduced to one `$`, so `$$(VAR)`
is the literal `$(VAR)`; any other `$` stays. The variables are the container's own, never
this machine's environment: a pod does not see the submitting shell's variables.
"""
from __future__ import annotations

from typing import Iterable, Mapping


def expand(text: str, variables: Mapping[str, str]) -> str:
    """`text` with its references to `variables` replaced and `$$` reduced to `$`."""
    out, i = [], 0
    while i < len(text):
        if text[i] != "$" or i + 1 == len(text):
            out.append(text[i])
            i += 1
            continue
        following = text[i + 1]
        if following == "$":  # escaped
            out.append("$")
            i += 2
        elif following == "(" and (close := text.find(")", i + 2)) != -1:
            name = text[i + 2:close]
            out.append(variables[name] if name in variables else f"$({name})")
            i = close + 1
        else:  # no reference: the `$` and the character after it as they are
            out.append(text[i:i + 2])
            i += 2
    return "".join(out)


def container_variables(declared: Iterable[tuple[str, bool]], env: Mapping[str, str]) -> dict[str, str]:
    """The container's variables in the order it declares them (`declared`: each name and
    whether its value comes from a Secret), their values taken from `env` (a Secret's as
    resolved here), each literal value expanded against the variables before it."""
    variables: dict[str, str] = {}
    for name, from_secret in declared:
        if name in env:
            variables[name] = env[name] if from_secret else expand(env[name], variables)
    return variables
