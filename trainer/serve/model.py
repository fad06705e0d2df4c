"""A SavedModel behind kserve's model server, speaking TensorFlow Serving's REST API.

Model-generic: everything comes from the SavedModel's signatures (their input names,
dtypes and shapes); nothing here knows MNIST. A feature model's export that carries
`instance_defaults()` (taxi) has its optional fields filled in when a request leaves them
out, as `trainer.predict` does (TF Serving itself fills in nothing).

    MODEL_BASE/                       what TF Serving and KServe's storageUri expect
      1700000000/saved_model.pb       numeric version dirs; the highest is served
      1700000300/saved_model.pb

kserve 0.21 gives `GET /v1/models/NAME` (ready) and its error handlers; `add_routes` adds
`POST /v1/models/NAME[/versions/V]:predict` (its own, as TF Serving reads JSON: with NaN,
Infinity and -Infinity, which kserve's handler refuses, and writes them back, where kserve
would write null), and what TF Serving also has: the versioned paths and `GET
/v1/models/NAME[/versions/V]/metadata` (each signature's inputs and outputs). It also
answers the Open Inference Protocol's `POST /v2/models/NAME[/versions/V]/infer` (KServe's
v2, `trainer.serve.v2`) in place of kserve's own handler, which turns a binary tensor into
a Python list and back: here a binary batch goes from the request body to TensorFlow
without a copy in Python. kserve's `GET /v2/models/NAME` (metadata) describes
serving_default.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Callable

import kserve
import numpy as np
import tensorflow as tf
from fastapi import Request, Response
from fastapi.responses import JSONResponse
from kserve.errors import InvalidInput, ModelNotFound, ModelNotReady
from starlette.exceptions import HTTPException
from tensorflow.core.framework import types_pb2

from trainer.predict import (RequestError as LoadError, absent_export_bucket, instance_defaults, load, saved_versions,
                             unreadable)
from trainer.serve import v2
from trainer.serve.codec import (DEFAULT_SIGNATURE, InputSpec, RequestError, dumps, input_spec, parse_body,
                                 to_arrays, to_response)


class ModelDirError(ValueError):
    """--model-dir holds no SavedModel."""


def resolve(model_dir: str) -> tuple[str, str]:
    """(SavedModel path, version) of `model_dir`: a base of numeric version dirs (the
    highest wins) or a SavedModel dir itself (its version: its name if numeric, else 1)."""
    model_dir = model_dir.rstrip("/")
    try:
        if tf.io.gfile.exists(f"{model_dir}/saved_model.pb"):
            name = model_dir.rsplit("/", 1)[-1]
            return model_dir, (name if name.isdigit() else "1")
        versions = saved_versions(model_dir)
    except tf.errors.OpError as error:  # permission denied, s3:// (no filesystem for it here), ...
        raise ModelDirError(unreadable("--model-dir", model_dir, error, "give the server read access to the export")
                            ) from None
    if not versions:
        if line := absent_export_bucket(model_dir):
            raise ModelDirError(line)
        raise ModelDirError(f"--model-dir: no SavedModel in {model_dir}; pass the export base "
                            "(JOB_DIR/export, with numeric version dirs) or one version dir")
    return f"{model_dir}/{versions[0]}", str(versions[0])


@dataclass(frozen=True)
class Signature:
    function: Callable[..., dict]
    inputs: dict[str, InputSpec]
    outputs: dict[str, tf.TensorSpec]
    tensor_inputs: dict[str, tf.TensorSpec]


def signatures(loaded) -> dict[str, Signature]:
    found = {}
    for key, function in loaded.signatures.items():
        _, kwargs = function.structured_input_signature
        found[key] = Signature(function, {name: input_spec(name, spec) for name, spec in kwargs.items()},
                               dict(function.structured_outputs), dict(kwargs))
    return found


def _tensor_info(spec: tf.TensorSpec) -> dict:
    info: dict[str, Any] = {"dtype": types_pb2.DataType.Name(spec.dtype.as_datatype_enum), "name": spec.name or ""}
    if spec.shape.rank is None:
        info["tensor_shape"] = {"dim": [], "unknown_rank": True}
    else:
        info["tensor_shape"] = {"dim": [{"size": str(-1 if d is None else d), "name": ""}
                                        for d in spec.shape.as_list()], "unknown_rank": False}
    return info


def tf_message(text: str) -> str:
    """The line of a TensorFlow error that says what is wrong (the one before the op
    location `[[{{node ...}}]]`, else the last one)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    for before, line in zip(lines, lines[1:]):
        if line.startswith("[["):
            return before
    return lines[-1] if lines else "invalid argument"


class SavedModel(kserve.Model):
    """One SavedModel served under `name`."""

    def __init__(self, name: str, model_dir: str):
        super().__init__(name)
        self.model_dir = model_dir
        self.path, self.version = resolve(model_dir)
        self.signatures: dict[str, Signature] = {}
        self.defaults: dict[str, Any] = {}

    def load(self) -> bool:
        """ModelDirError when the SavedModel cannot be loaded (a cut-off or corrupt export, an
        op this TensorFlow lacks)."""
        try:
            self._loaded = load(self.path)
        except LoadError as error:
            raise ModelDirError(str(error)) from None
        self.signatures = signatures(self._loaded)
        self.defaults = instance_defaults(self._loaded)  # a feature model's optional fields
        self.ready = True
        return self.ready

    def metadata(self) -> dict:
        """TF Serving's GetModelMetadata answer (signature_def) as JSON."""
        defs = {key: {"inputs": {n: _tensor_info(s) for n, s in sig.tensor_inputs.items()},
                      "outputs": {n: _tensor_info(s) for n, s in sig.outputs.items()},
                      "method_name": "tensorflow/serving/predict"}
                for key, sig in self.signatures.items()}
        return {"model_spec": {"name": self.name, "signature_name": "", "version": self.version},
                "metadata": {"signature_def": {"signature_def": defs}}}

    def signature(self, name: str) -> Signature:
        signature = self.signatures.get(name)
        if signature is None:
            raise RequestError(f"Serving signature name: {name!r} not found in signature def "
                               f"(signatures: {', '.join(sorted(self.signatures))})")
        return signature

    @staticmethod
    def call(signature: Signature, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        try:
            outputs = signature.function(**{name: tf.constant(value) for name, value in arrays.items()})
        except (tf.errors.InvalidArgumentError, ValueError, TypeError) as error:
            raise RequestError(tf_message(getattr(error, "message", None) or str(error))) from None
        return {name: value.numpy() for name, value in outputs.items()}

    def run(self, body: bytes) -> bytes:
        """One predict request, body to the answer's JSON (raises RequestError for a bad request)."""
        request = parse_body(body)
        signature = self.signature(request.signature_name)
        outputs = self.call(signature, to_arrays(request, signature.inputs, self.defaults))
        return dumps(to_response(outputs, request.columnar), outputs)

    def infer(self, body: bytes, headers: dict[str, str]) -> tuple[bytes, dict[str, str]]:
        """One Open Inference Protocol request: (answer body, its headers)."""
        request = v2.parse(body, headers)
        signature = self.signature(request.signature_name)
        arrays = v2.check_inputs(request.arrays, signature.inputs, request.signature_name, self.defaults)
        return v2.response(request, self.name, self.version, self.call(signature, arrays))

    @staticmethod
    def _types(specs: dict[str, tf.TensorSpec]) -> list[dict]:
        described = [input_spec(name, spec) for name, spec in sorted(specs.items())]
        return [{"name": spec.name, "datatype": v2.datatype(spec.dtype),
                 "shape": [-1] if spec.shape is None else [-1 if d is None else d for d in spec.shape]}
                for spec in described]

    def get_input_types(self) -> list[dict]:
        """serving_default's inputs, for the v2 metadata (`GET /v2/models/NAME`)."""
        signature = self.signatures.get(DEFAULT_SIGNATURE)
        return self._types(signature.tensor_inputs) if signature else []

    def get_output_types(self) -> list[dict]:
        signature = self.signatures.get(DEFAULT_SIGNATURE)
        return self._types(signature.outputs) if signature else []


async def _off_loop(function: Callable, *args):
    """`function(*args)` in a thread: TensorFlow releases the GIL, so health checks and other
    requests are answered while a batch computes. A RequestError is kserve's InvalidInput (400)."""
    try:
        return await asyncio.get_running_loop().run_in_executor(None, function, *args)
    except RequestError as error:
        raise InvalidInput(str(error)) from None


def add_routes(app, model: SavedModel) -> None:
    """TF Serving's predict (the body read here, not by kserve, whose JSON parser refuses
    NaN and Infinity), versioned and metadata paths beside kserve's V1 routes of `app`."""

    def check(name: str, version: str | None) -> None:
        if name != model.name:
            raise ModelNotFound(name)
        if version is not None and version != model.version:
            raise ModelNotFound(f"{name} version {version} (serving version {model.version})")

    async def version_status(model_name: str, version: str):
        check(model_name, version)
        return {"model_version_status": [{"version": model.version, "state": "AVAILABLE" if model.ready
                                          else "LOADING", "status": {"error_code": "OK", "error_message": ""}}]}

    async def predict(model_name: str, request: Request, version: str | None = None) -> Response:
        check(model_name, version)
        if not model.ready:
            raise ModelNotReady(model_name)
        answer = await _off_loop(model.run, await request.body())
        return Response(answer, media_type="application/json")

    async def versioned_predict(model_name: str, version: str, request: Request) -> Response:
        return await predict(model_name, request, version)

    async def metadata(model_name: str):
        check(model_name, None)
        return model.metadata()

    async def versioned_metadata(model_name: str, version: str):
        check(model_name, version)
        return model.metadata()

    async def infer(model_name: str, request: Request, version: str | None = None) -> Response:
        check(model_name, version)
        if not model.ready:
            raise ModelNotReady(model_name)
        answer, headers = await _off_loop(model.infer, await request.body(), dict(request.headers))
        return Response(answer, headers=headers)

    async def versioned_infer(model_name: str, version: str, request: Request) -> Response:
        return await infer(model_name, request, version)

    async def no_route(request: Request, error: HTTPException) -> Response:
        """TF Serving answers every error with {"error": ...}; FastAPI's 404 and 405 say {"detail": ...}."""
        return JSONResponse({"error": f"{error.detail}: {request.method} {request.url.path}"},
                            status_code=error.status_code, headers=error.headers)

    app.add_exception_handler(HTTPException, no_route)
    app.add_api_route("/v1/models/{model_name}/versions/{version}", version_status, methods=["GET"])
    app.add_api_route("/v1/models/{model_name}:predict", predict, methods=["POST"], response_model=None)
    app.add_api_route("/v1/models/{model_name}/versions/{version}:predict", versioned_predict,
                      methods=["POST"], response_model=None)
    app.add_api_route("/v1/models/{model_name}/metadata", metadata, methods=["GET"])
    app.add_api_route("/v1/models/{model_name}/versions/{version}/metadata", versioned_metadata, methods=["GET"])
    kserve_infer = {"/v2/models/{model_name}/infer", "/v2/models/{model_name}/versions/{model_version}/infer"}
    app.router.routes[:] = [route for route in app.router.routes if getattr(route, "path", None) not in kserve_infer]
    app.add_api_route("/v2/models/{model_name}/infer", infer, methods=["POST"], response_model=None)
    app.add_api_route("/v2/models/{model_name}/versions/{version}/infer", versioned_infer, methods=["POST"],
                      response_model=None)


__all__ = ["ModelDirError", "SavedModel", "add_routes", "resolve"]
