import pathlib
import sys

import pytest

# the reference model is a plain module next to its tests
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from llama_ref import LlamaRef  # noqa: E402


@pytest.fixture(scope="session")
def default_ref(model_path):
    """One LlamaRef of the default model for the whole session (loading and
    dequantizing it takes ~20 s; its weight cache is shared)."""
    return LlamaRef(model_path)
