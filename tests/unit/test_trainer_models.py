"""trainer.models: the registry's models build, with stable, distinct variable paths."""
from __future__ import annotations

import numpy as np
import pytest

from trainer import models


@pytest.mark.parametrize("name, parameters, dense", [
    ("mnist", 824_458, (3136, 256)),
    ("mnist-cloudml", 3_274_634, (3136, 1024)),
])
def test_model_builds_with_its_shape(name, parameters, dense):
    model = models.build(name)
    assert model.count_params() == parameters
    assert tuple(model.get_layer("dense").kernel.shape) == dense
    logits = model(np.zeros((2, 28, 28, 1), np.float32), training=False)
    assert tuple(logits.shape) == (2, 10)


def test_default_model_standardises_its_input():
    layer = models.build("mnist").get_layer("standardize")
    mean_image = np.full((1, 28, 28, 1), 0.1307, np.float32)
    np.testing.assert_allclose(np.asarray(layer(mean_image)), 0.0, atol=1e-6)


def test_variable_paths_differ_between_models():
    paths = {name: {v.path for v in models.build(name).weights} for name in models.MODELS}
    assert "mnist/conv1/kernel" in paths["mnist"]
    assert not paths["mnist"] & paths["mnist-cloudml"]
