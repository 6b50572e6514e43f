"""Shared fixtures for the pytest suites.

Environment (set by `make test` / scripts/run-tests.sh):
  TRAM_BUILD   the build folder (default build); test tools are in TRAM_BUILD/tests/tools
  TRAM_BIN     the tram binary under test (default build/tram)
  TRAM_MODEL   the default model (default models/SmolLM2-135M-Instruct.Q4_1.gguf)
  TRAM_GEMMA3  Gemma 3 270M Q4_K_M, a real Gemma with a 262,144-token vocabulary
               (default models/gemma-3-270m-q4_k_m.gguf; `make model-gemma3`)
"""
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def root():
    return ROOT


@pytest.fixture(scope="session")
def tram_bin():
    path = pathlib.Path(os.environ.get("TRAM_BIN", ROOT / "build" / "tram"))
    if not path.is_absolute():
        path = ROOT / path
    assert path.exists(), f"{path} is missing: run `make` first"
    return path


@pytest.fixture(scope="session")
def model_path():
    path = pathlib.Path(os.environ.get("TRAM_MODEL", ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    if not path.is_absolute():
        path = ROOT / path
    assert path.exists(), f"{path} is missing: run `make model` first"
    return path


@pytest.fixture(scope="session")
def build_dir():
    path = pathlib.Path(os.environ.get("TRAM_BUILD", ROOT / "build"))
    return path if path.is_absolute() else ROOT / path


@pytest.fixture(scope="session")
def tool(build_dir):
    """tool("name") -> path of build/tests/tools/name (built by `make`)."""

    def find(name):
        path = build_dir / "tests" / "tools" / name
        assert path.exists(), f"{path} is missing: run `make`"
        return path

    return find


def pytest_configure(config):
    # `make test` runs `-m "not long"`; `make test-long` (CI runs it after
    # make test) runs the sweeps marked long: the same checks at full size.
    config.addinivalue_line("markers", "long: a sweep too long for make test; run by make test-long and CI")
