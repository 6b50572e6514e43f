"""The CPU-side dry run of tests/gpu/run-on-device.sh (DRY_RUN=1), so the
one-call device script cannot rot between GPU sessions: the probe runs for
real (nvcc, cuBLAS, gcc, no GPU here), the build is planned with `make -n`
(nothing compiled), the SDPA baseline script checks itself, and every step
that needs a GPU is listed, in the documented order, with the command it
would run.

Checked: the step order; the plan links the GPU programs with the cuBLAS the
probe found and hands nvcc no --Werror (NVWERROR emptied); the fallback to
the versioned library name when a folder has no libcublas.so; the exit
status. Then the run's own logic, with stand-in GPU programs (BUILT=1: the
programs already in BUILD, as on a rerun) on this CPU machine: one process
per check group (an abort costs one group), every step's row and the logs
in OUT_DIR as it ends, every later GPU step skipped after a hang; and the
Makefile's nvcc probe, which passes -allow-unsupported-compiler only to an
nvcc that rejects the host gcc without it."""
import os
import pathlib
import shutil
import subprocess
import tarfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "gpu" / "run-on-device.sh"
CHECK_GROUPS = ["ops", "weights", "attn", "sample", "graph", "families"]
ORDER = (["probe", "build", "plan"] + [f"quick-{g}" for g in CHECK_GROUPS] + [f"check-{g}" for g in CHECK_GROUPS]
         + ["bench", "sdpa", "model", "model-q35", "model-q35moe", "model-q3next", "e2e", "roofline", "e2e-nogr",
            "model8b", "memcheck"])
HYBRIDS = {"model-q35": "qwen35-tiny", "model-q35moe": "qwen35moe-tiny", "model-q3next": "qwen3next-tiny"}
GPU_STEPS = set(ORDER) - {"probe", "build", "plan", "sdpa"}
HEADER = "step          status"
HAVE_NVCC = shutil.which("nvcc") is not None or os.path.exists("/usr/local/cuda/bin/nvcc")


def parse_rows(lines):
    steps = {}
    for line in lines:
        name, status = line.split()[:2]
        steps[name] = (status, line)
    return [line.split()[0] for line in lines], steps


def dry_run(tmp_path, **env):
    e = dict(os.environ, DRY_RUN="1", BUILD=str(tmp_path / "build"), CUDA_VISIBLE_DEVICES="")
    e.update(env)
    p = subprocess.run([str(SCRIPT), str(tmp_path / "logs")], cwd=ROOT, env=e, capture_output=True, text=True,
                       timeout=120)
    table = p.stdout.split(HEADER)[-1].strip().splitlines()[1:] if HEADER in p.stdout else []
    order, steps = parse_rows(table)
    return p, order, steps


@pytest.mark.skipif(not HAVE_NVCC, reason="no CUDA toolkit: the probe fails the dry run by design")
def test_dry_run_plans_every_step_in_order(tmp_path):
    p, order, steps = dry_run(tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert order == ORDER, p.stdout
    assert steps["probe"][0] == "ok" and "cuBLAS libcublas.so" in steps["probe"][1], steps["probe"]
    assert steps["plan"][0] == "ok", steps["plan"]
    for name in GPU_STEPS:
        assert steps[name][0] == "dry", (name, steps[name])
    for g in CHECK_GROUPS:  # one process per group
        assert "CUDA_LAUNCH_BLOCKING=1" in steps[f"quick-{g}"][1]
        assert steps[f"quick-{g}"][1].rstrip().endswith(f"--quick check {g}"), steps[f"quick-{g}"]
        assert steps[f"check-{g}"][1].rstrip().endswith(f"gpu_check check {g}"), steps[f"check-{g}"]
    assert "compute-sanitizer --tool memcheck" in steps["memcheck"][1]
    assert "--no-graphs" in steps["e2e-nogr"][1] and "--no-graphs" not in steps["e2e"][1]
    assert steps["sdpa"][0] == "ok"
    for name, fixture in HYBRIDS.items():  # each hybrid fixture, as the GGUF file prepare-carry.sh writes
        assert steps[name][1].rstrip().endswith(f"model_check --dev cuda -m build/gpu-carry/{fixture}.gguf"), steps[name]
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


STANDIN = """#!/bin/sh
# a stand-in GPU program: logs its arguments; MODE picks what a group does
echo "$0 $*" >>"$CALLS"
for a in "$@"; do
  case "$a" in
    "$HANG") sleep 60 ;;
    "$ABORT") echo "FAIL $a: a planted abort"; kill -ABRT $$ ;;
  esac
done
echo "checks: 1 passed, 0 failed, 0 warnings"
"""


def fake_run(tmp_path, **env):
    """A non-dry run with stand-in programs in BUILD (BUILT=1) and no GPU:
    returns the process, the rows on stdout, the rows OUT_DIR holds and the
    stand-ins' calls."""
    bindir = tmp_path / "build" / "tests" / "gpu"
    bindir.mkdir(parents=True)
    for name in ["gpu_check", "model_check", "engine_bench"]:
        f = bindir / name
        f.write_text(STANDIN)
        f.chmod(0o755)
    (tmp_path / "carry").mkdir()
    for name in ["smollm2-10l"] + list(HYBRIDS.values()):
        (tmp_path / "carry" / f"{name}.gguf").write_text("stand-in")
    missing = env.pop("PREP_MISSING", None)
    if missing:
        (tmp_path / "carry" / f"{missing}.gguf").unlink()
    calls = tmp_path / "calls.txt"
    e = dict(os.environ, BUILD=str(tmp_path / "build"), BUILT="1", CUDA_VISIBLE_DEVICES="", LIMIT_CAP="3",
             OUT_DIR=str(tmp_path / "out"), CALLS=str(calls), HANG="-", ABORT="-", PYTHON="false",
             CARRY=str(tmp_path / "carry"))
    e.update(env)
    p = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "logs")], cwd=ROOT, env=e, capture_output=True,
                       text=True, timeout=300)
    table = p.stdout.split(HEADER)[-1].strip().splitlines()[1:] if HEADER in p.stdout else []
    shipped = (tmp_path / "out" / "steps.txt").read_text().splitlines()
    return p, parse_rows(table), parse_rows(shipped), calls.read_text().splitlines() if calls.exists() else []


def test_an_aborting_group_costs_only_itself(tmp_path):
    p, (order, steps), (s_order, _), calls = fake_run(tmp_path, ABORT="weights")
    assert p.returncode == 1, p.stdout + p.stderr
    assert steps["quick-weights"][0].startswith("FAIL(") and steps["check-weights"][0].startswith("FAIL(")
    for g in ["ops", "attn", "sample", "graph", "families"]:
        assert steps[f"quick-{g}"][0] == "ok" and steps[f"check-{g}"][0] == "ok", (g, p.stdout)
    # one process per group, each told its group alone
    group_calls = [c for c in calls if " check " in c and "--quick" in c]
    assert [c.split()[-1] for c in group_calls] == CHECK_GROUPS
    assert steps["build"][0] == "kept"
    assert s_order == order  # every row reached OUT_DIR
    with tarfile.open(tmp_path / "out" / "gpu-logs.tgz") as tf:
        names = {pathlib.PurePath(n).name for n in tf.getnames()}
    assert {"quick-weights.log", "check-graph.log", "steps.txt"} <= names
    assert order.index("memcheck") == len(order) - 1  # last
    assert steps["model"][0] == "ok" and any("model_check" in c for c in calls)
    for name, fixture in HYBRIDS.items():
        assert steps[name][0] == "ok" and any(c.endswith(f"/{fixture}.gguf") for c in calls), (name, calls)


def test_a_missing_hybrid_fixture_fails_the_run(tmp_path):
    """Without prepare-carry.sh's GGUF form of a hybrid fixture the run
    fails on that step (the hybrid forward would go unchecked) and the
    others still run."""
    p, (order, steps), _, calls = fake_run(tmp_path, PREP_MISSING="qwen3next-tiny")
    assert p.returncode == 1, p.stdout + p.stderr
    assert steps["model-q3next"][0] == "skipped" and "prepare-carry.sh" in steps["model-q3next"][1]
    assert steps["model-q35"][0] == "ok" and steps["model-q35moe"][0] == "ok"


def test_a_hang_skips_every_later_gpu_step(tmp_path):
    p, (order, steps), (s_order, s_steps), calls = fake_run(tmp_path, HANG="attn")
    assert p.returncode == 1, p.stdout + p.stderr
    assert steps["quick-ops"][0] == "ok" and steps["quick-weights"][0] == "ok"
    assert steps["quick-attn"][0] == "timeout"
    later = order[order.index("quick-attn") + 1:]
    gpu_later = [s for s in later if s in GPU_STEPS and s not in {"e2e", "roofline", "e2e-nogr", "model8b"}]
    assert gpu_later, order
    for s in gpu_later:
        assert steps[s][0] == "skipped" and "quick-attn hung" in steps[s][1], steps[s]
    assert not any(" check attn" in c and "--quick" not in c for c in calls)  # the hang is not repeated
    assert not any(c.split()[-1] in ("sample", "graph", "families") for c in calls)
    # the rows reached OUT_DIR as they ended, the timeout among them
    assert s_steps["quick-attn"][0] == "timeout" and s_order == order


def test_makefile_nvcc_probe_allows_an_unsupported_host_compiler(tmp_path):
    """A stand-in nvcc that rejects the host gcc unless given
    -allow-unsupported-compiler (as nvcc does, with an error): the Makefile
    passes the flag; to one that accepts it, not."""
    def plan(accepts):
        nvcc = tmp_path / ("ok" if accepts else "picky") / "nvcc"
        nvcc.parent.mkdir()
        nvcc.write_text("#!/bin/sh\n" + ("exit 0\n" if accepts else
                        'for a in "$@"; do [ "$a" = -allow-unsupported-compiler ] && exit 0; done\n'
                        'echo "#error -- unsupported GNU version!" >&2\nexit 1\n'))
        nvcc.chmod(0o755)
        e = {k: v for k, v in os.environ.items() if k != "NVCC_COMPAT"}
        p = subprocess.run(["make", "-n", "-B", "CUDA=1", f"NVCC={nvcc}", f"BUILD={tmp_path / 'b'}",
                            f"{tmp_path / 'b'}/obj/kernels/cuda/add.o"], cwd=ROOT, env=e, capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        return [line for line in p.stdout.splitlines() if str(nvcc) in line and "add.cu" in line]
    picky = plan(False)
    assert picky and all("-allow-unsupported-compiler" in line for line in picky), picky
    fine = plan(True)
    assert fine and not any("-allow-unsupported-compiler" in line for line in fine), fine
