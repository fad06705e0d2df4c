"""Online and batch prediction: `serve`, `models list|delete`, `predict` (see cli.py).

    local: a model server process on this machine (`python -m trainer.serve`, kserve's
           model server, TensorFlow Serving's REST API); state in the runs directory.
    k8s:   a KServe v1beta1 InferenceService.

The launcher never imports TensorFlow: it starts the server as a process and talks HTTP.
"""
