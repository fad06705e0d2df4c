"""The model server: a SavedModel export served over TensorFlow Serving's REST API,
built on the kserve package's model server (run `python -m trainer.serve --help`).

`codec` (request/response JSON, no TensorFlow), `model` (the kserve Model over a
SavedModel's signatures, TF Serving's extra routes), `__main__` (flags, socket, start).
"""
