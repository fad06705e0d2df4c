"""Training loops: asynchronous ParameterServerStrategy (ps.py), synchronous
MultiWorkerMirrored / one process (sync.py), and the per-step function both use (step.py)."""
