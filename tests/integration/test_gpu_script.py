"""The CPU-side dry run of tests/gpu/run-on-device.sh (DRY_RUN=1), so the
one-call device script cannot rot between GPU sessions: the probe runs for
real (nvcc, cuBLAS, gcc, no GPU here), the build is planned with `make -n`
(nothing compiled), the SDPA baseline script checks itself, and every step
that needs a GPU is listed, in the documented order, with the command it
would run.

Checked: the step order; the plan links the GPU programs with the cuBLAS the
probe found and hands nvcc no --Werror (NVWERROR emptied); the fallback to
the versioned library name when a folder has no libcublas.so; the exit
status."""
import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "gpu" / "run-on-device.sh"
ORDER = ["probe", "build", "plan", "quick", "memcheck", "check", "bench", "sdpa", "model", "e2e", "model8b"]
GPU_STEPS = {"quick", "memcheck", "check", "bench", "model", "e2e", "model8b"}
HAVE_NVCC = shutil.which("nvcc") is not None or os.path.exists("/usr/local/cuda/bin/nvcc")


def dry_run(tmp_path, **env):
    e = dict(os.environ, DRY_RUN="1", BUILD=str(tmp_path / "build"), CUDA_VISIBLE_DEVICES="")
    e.update(env)
    p = subprocess.run([str(SCRIPT), str(tmp_path / "logs")], cwd=ROOT, env=e, capture_output=True, text=True,
                       timeout=120)
    table = p.stdout.split("step      status")[-1].strip().splitlines()[1:] if "step      status" in p.stdout else []
    steps = {}
    for line in table:
        name, status = line.split()[:2]
        steps[name] = (status, line)
    return p, [line.split()[0] for line in table], steps


@pytest.mark.skipif(not HAVE_NVCC, reason="no CUDA toolkit: the probe fails the dry run by design")
def test_dry_run_plans_every_step_in_order(tmp_path):
    p, order, steps = dry_run(tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert order == ORDER, p.stdout
    assert steps["probe"][0] == "ok" and "cuBLAS libcublas.so" in steps["probe"][1], steps["probe"]
    assert steps["plan"][0] == "ok", steps["plan"]
    for name in GPU_STEPS:
        assert steps[name][0] == "dry", (name, steps[name])
    assert "CUDA_LAUNCH_BLOCKING=1" in steps["quick"][1] and "--quick check" in steps["quick"][1]
    assert "compute-sanitizer --tool memcheck" in steps["memcheck"][1]
    assert steps["sdpa"][0] == "ok"
    plan = (tmp_path / "logs" / "build.log").read_text()
    assert "nvcc" in plan and "--Werror" not in plan
    assert plan.count("-lcublas") >= 3  # gpu_check, model_check, engine_bench


@pytest.mark.skipif(not HAVE_NVCC, reason="no CUDA toolkit")
def test_dry_run_falls_back_to_the_versioned_cublas(tmp_path):
    libdir = tmp_path / "lib"
    libdir.mkdir()
    for name in ["libcublas.so.12", "libcublas.so.13", "libcublas.so.13.1.0", "libcublasLt.so.13"]:
        (libdir / name).touch()
    p, order, steps = dry_run(tmp_path, CUBLAS_DIRS=f"{tmp_path / 'none'} {libdir}")
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"cuBLAS libcublas.so.13 ({libdir})" in steps["probe"][1], steps["probe"]
    plan = (tmp_path / "logs" / "build.log").read_text()
    assert plan.count(f"-L{libdir} -Xlinker -l:libcublas.so.13") >= 3


@pytest.mark.skipif(not HAVE_NVCC, reason="no CUDA toolkit")
def test_dry_run_fails_without_cublas(tmp_path):
    p, order, steps = dry_run(tmp_path, CUBLAS_DIRS=str(tmp_path / "empty"))
    assert p.returncode == 1
    assert steps["probe"][0] == "FAIL" and "cuBLAS MISSING" in steps["probe"][1]
    assert steps["build"][0] == "skipped"
