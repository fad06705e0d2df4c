"""The model server: a SavedModel export served over TensorFlow Serving's REST API,
built on the kserve package's model server (run `python -m trainer.serve --help`).

`codec` (request/response JSON, no TensorFlow), `model` (the kserve Model over a
SavedModel's signatures, TF Serving's extra routes), `__main__` (flags, socket, start).
"""


def body_key(value: object) -> str | None:
    """"instances" or "inputs" when a line of an instances file (--json-instances, one
    instance per line) holds a whole request body instead, as gcloud's --json-request file
    does; None for anything else. No model names an input so."""
    if isinstance(value, dict) and value.keys() & {"instances", "inputs"} \
            and value.keys() <= {"instances", "inputs", "signature_name"}:
        return "instances" if "instances" in value else "inputs"
    return None
