# pytest configuration for the ladder module's tests: the module comes from PYTHONPATH (the build
# tree's python/ folder, set by tests/python.cmake); fail with the fix if it is not there.
import pytest

try:
    import ladder  # noqa: F401
except ImportError as e:  # pragma: no cover - a setup error, reported once
    raise pytest.UsageError(f"cannot import ladder ({e}); run with PYTHONPATH=<build>/python")


@pytest.fixture
def rng():
    import numpy as np
    return np.random.default_rng(20240611)
