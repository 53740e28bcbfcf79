"""quantgym.models: the built-in models are registered by class path, and a path builds them."""

from __future__ import annotations

import pytest

from quantgym.models import BUILTIN_MODELS, ImportableModel, build_model, load_model


@pytest.mark.parametrize("task,kind", [(t, k) for t, kinds in BUILTIN_MODELS.items() for k in kinds])
def test_every_builtin_model_path_builds_the_default_model(task, kind):
    path = BUILTIN_MODELS[task][kind]
    obj = load_model(path)
    cls = type(obj)
    assert f"{cls.__module__}:{cls.__qualname__}" == path and obj == cls()
    assert isinstance(build_model(ImportableModel(path), cls, "fill" if kind == "impact" else "order_fee"), cls)
    assert obj.describe() and "\n" not in obj.describe()  # one line of rule text for the prompt
    assert ImportableModel.from_dict(ImportableModel(path, {}).to_dict()) == ImportableModel(path)
