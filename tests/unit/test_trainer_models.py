"""trainer.models: the registry's models build, with stable, distinct variable paths."""
from __future__ import annotations

import ast
import re
from pathlib import Path

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


def test_mnist_request_instances_carry_a_key_only_when_asked(tmp_path):
    """make_request --no-keys: the `unkeyed` signature's instances, without `key`."""
    from trainer import data

    images = (np.arange(3 * 784) % 256).astype(np.uint8).reshape(3, 28, 28)
    data.write_split(str(tmp_path), "test", images, np.array([7, 1, 4], np.uint8))
    mnist = models.get("mnist")
    keyed, labels = mnist.request_instances(str(tmp_path), 3, keys=True)
    unkeyed, _ = mnist.request_instances(str(tmp_path), 3, keys=False)
    assert sorted(labels) == [1, 4, 7] and [row["key"] for row in keyed] == [0, 1, 2]
    assert [sorted(row) for row in unkeyed] == [["image"]] * 3 and len(unkeyed[0]["image"]) == 784


def test_default_model_standardises_its_input():
    layer = models.build("mnist").get_layer("standardize")
    mean_image = np.full((1, 28, 28, 1), 0.1307, np.float32)
    np.testing.assert_allclose(np.asarray(layer(mean_image)), 0.0, atol=1e-6)


def test_variable_paths_differ_between_models():
    paths = {name: {v.path for v in models.build(name).weights} for name in models.MODELS}
    assert "mnist/conv1/kernel" in paths["mnist"]
    assert not paths["mnist"] & paths["mnist-cloudml"]


GENERIC = ("trainer/train/*.py", "trainer/serve/*.py", "trainer/evaluate.py", "trainer/evaluator.py",
           "trainer/export.py", "trainer/predict.py", "trainer/session.py", "trainer/checkpoints.py",
           "trainer/task.py", "trainer/paths.py", "trainer/cluster.py", "trainer/runtime.py", "trainer/lifecycle.py",
           "trainer/failures.py", "trainer/progress.py", "trainer/variables.py", "trainer/outputs.py")
MODEL_WORDS = re.compile(r"mnist|taxi|\b784\b|\bimage|pixel|\btrip|\bfare\b", re.IGNORECASE)


def test_the_loops_evaluator_export_serving_and_predict_know_no_model():
    """A model is its folder under trainer/models/: the code that trains, evaluates, exports,
    serves and predicts names none (docstrings may name them as examples). trainer.predict
    read MNIST's "image" of 784 pixels and printed MNIST's columns; trainer.paths kept an
    unused default data dir of MNIST's (data/mnist, $MNIST_DATA_DIR) beside the models'."""
    root = Path(__file__).resolve().parents[2]
    found = []
    for path in sorted(p for pattern in GENERIC for p in root.glob(pattern)):
        tree = ast.parse(path.read_text())
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                      and node.body and isinstance(node.body[0], ast.Expr)
                      and isinstance(node.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            words = ([str(node.value)] if isinstance(node, ast.Constant) and id(node) not in docstrings else
                     [node.id] if isinstance(node, ast.Name) else [node.attr] if isinstance(node, ast.Attribute)
                     else [getattr(node, "module", None) or "", *(alias.name for alias in node.names)]
                     if isinstance(node, (ast.Import, ast.ImportFrom)) else [])
            found += [f"{path.relative_to(root)}:{node.lineno}: {word[:60]!r}" for word in words
                      if MODEL_WORDS.search(word)]
    assert found == []
