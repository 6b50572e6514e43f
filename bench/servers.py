"""The servers a comparison runs: how to start each one, find it ready, name
its version, and stop it.

  tram      build/tram serve -m MODEL --host 127.0.0.1 --port P --threads T
            --max-seqs N --kv-cache-bytes B [extra args]
  llamacpp  .bench-peer/bin/llama-server -m MODEL --host 127.0.0.1 --port P
            -t T -tb T -np N -c N*CTX --no-webui [extra args]
            (built by scripts/build-llamacpp.sh from the llama-cpp-python sdist)

Both are started fresh for each (workload, concurrency) run, with N (running
sequences / parallel slots) equal to the concurrency and the same thread
count, so each run starts from the same state and sizes its caches for that
run alone. Logs go to LOGDIR/<server>-<tag>.log.
"""
from __future__ import annotations

import asyncio
import dataclasses
import os
import pathlib
import shlex
import signal
import socket
import subprocess

import loadgen

ROOT = pathlib.Path(__file__).resolve().parents[1]
PEER_DIR = ROOT / ".bench-peer"
KV_BYTES_PER_TOKEN_F16 = 2 * 2 * 192 * 30    # K and V, f16, 3 KV heads x 64, 30 layers (docs/model.md)
KV_BYTES_PER_TOKEN_F32 = 2 * KV_BYTES_PER_TOKEN_F16  # tram's CPU cache holds f32
MIB = 1 << 20


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclasses.dataclass
class ServerKind:
    """One kind of server: name, binary, how to build its command line."""

    name: str            # tram | llamacpp
    label: str           # for tables and plots
    binary: pathlib.Path
    extra_args: list[str]

    def command(self, model: str, port: int, threads: int, slots: int, slot_ctx: int) -> list[str]:
        """The exact command line for one run."""
        if self.name == "tram":
            kv = max(512 * MIB, slots * slot_ctx * KV_BYTES_PER_TOKEN_F32)
            kv = (kv + MIB - 1) // MIB
            return [str(self.binary), "serve", "-m", model, "--host", "127.0.0.1", "--port", str(port),
                    "--threads", str(threads), "--max-seqs", str(slots),
                    "--kv-cache-bytes", f"{kv}M", *self.extra_args]
        return [str(self.binary), "-m", model, "--host", "127.0.0.1", "--port", str(port),
                "-t", str(threads), "-tb", str(threads), "-np", str(slots), "-c", str(slots * slot_ctx),
                "--no-webui", *self.extra_args]

    def version(self) -> str:
        """A one-line version of the binary under test."""
        if self.name == "tram":
            try:
                head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"],
                                      capture_output=True, text=True, timeout=10).stdout.strip()
                dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "-uno"],
                                       capture_output=True, text=True, timeout=10).stdout.strip()
            except (OSError, subprocess.SubprocessError):
                return "tram (git unavailable)"
            return f"tram git {head}{' (uncommitted changes)' if dirty else ''}"
        stamp = self.binary.parent.parent / "VERSION"
        lines = stamp.read_text().splitlines() if stamp.exists() else []
        pkg = next((ln for ln in lines if ln.startswith("llama-cpp-python")), "")
        commit = next((ln.split()[-1] for ln in lines if ln.startswith("llama.cpp commit")), "?")
        ver = next((ln for ln in lines if ln.startswith("version:")), "")
        return f"llama.cpp {commit} ({ver or 'version unknown'}; from the {pkg} sdist)"

    def missing(self) -> str:
        """Why this server cannot run, or '' when its binary is there."""
        if self.binary.is_file() and os.access(self.binary, os.X_OK):
            return ""
        how = "make" if self.name == "tram" else "scripts/build-llamacpp.sh"
        return f"{self.binary} is missing: run `{how}`"


def kinds(tram_bin: str, peer_bin: str, tram_args: str = "", peer_args: str = "") -> dict[str, ServerKind]:
    return {
        "tram": ServerKind("tram", "tram", pathlib.Path(tram_bin), shlex.split(tram_args)),
        "llamacpp": ServerKind("llamacpp", "llama.cpp", pathlib.Path(peer_bin), shlex.split(peer_args)),
    }


class Running:
    """A started server: its process, base URL, served model id and log."""

    def __init__(self, kind: ServerKind, cmd: list[str], log: pathlib.Path, port: int):
        self.kind, self.cmd, self.log, self.port = kind, cmd, log, port
        self.base_url = f"http://127.0.0.1:{port}"
        self.model_id = ""
        log.parent.mkdir(parents=True, exist_ok=True)
        self._logf = open(log, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self._logf, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)

    def wait_ready(self, timeout_s: float) -> None:
        try:
            self.model_id = asyncio.run(loadgen.wait_ready(self.base_url, timeout_s, self.proc))
        except RuntimeError as e:
            self.stop()
            tail = self.log.read_text(errors="replace").strip().splitlines()[-8:]
            raise RuntimeError(f"{self.kind.label} did not come up: {e}\n  command: {shlex.join(self.cmd)}\n"
                               f"  last log lines ({self.log}):\n    " + "\n    ".join(tail)) from None

    def stop(self) -> None:
        """SIGTERM (then SIGKILL after 10 s) to this server's own process."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._logf.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def start(kind: ServerKind, model: str, threads: int, slots: int, slot_ctx: int,
          logdir: pathlib.Path, tag: str, ready_timeout_s: float = 120.0) -> Running:
    """Starts one server for one run and waits until it answers /v1/models."""
    port = free_port()
    cmd = kind.command(model, port, threads, slots, slot_ctx)
    srv = Running(kind, cmd, logdir / f"{kind.name}-{tag}.log", port)
    srv.wait_ready(ready_timeout_s)
    return srv

