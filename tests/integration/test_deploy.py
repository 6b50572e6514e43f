"""deploy/: the systemd units pass `systemd-analyze verify`, say what the
deployment docs promise, and start tram with a command line tram accepts;
the example config is valid; `make install` / `make uninstall` install and
remove exactly the expected files."""
import json
import os
import pathlib
import re
import shutil
import subprocess

import pytest

INSTALLED_BIN = "/usr/local/bin/tram"  # the path written in deploy/tram.service


def unit_settings(path):
    """{key: [values]} of a unit file (comments and sections ignored)."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";", "[")):
            continue
        k, v = line.split("=", 1)
        out.setdefault(k.strip(), []).append(v.strip())
    return out


def verify(units_dir, *names):
    r = subprocess.run(["systemd-analyze", "verify", *[f"./{n}" for n in names]], cwd=units_dir,
                       capture_output=True, text=True, timeout=60)
    # verify warns about bad keys with exit status 0: read its messages too.
    ours = [l for l in (r.stdout + r.stderr).splitlines() if "tram" in l]
    return r.returncode, ours


@pytest.fixture
def units(root, tram_bin, tmp_path):
    """Copies of the units with ExecStart pointing at the built tram (verify
    checks that the program exists)."""
    if shutil.which("systemd-analyze") is None:
        pytest.fail("systemd-analyze is missing: scripts/setup.sh installs the systemd package")
    for name in ("tram.service", "tram.socket"):
        text = (root / "deploy" / name).read_text().replace(INSTALLED_BIN, str(tram_bin))
        (tmp_path / name).write_text(text)
    return tmp_path


def test_units_pass_systemd_analyze_verify(units):
    rc, msgs = verify(units, "tram.socket", "tram.service")
    assert rc == 0 and msgs == [], msgs


def test_verify_catches_a_broken_unit(units):
    # The check above can fail: a misspelt key and a bad value are reported.
    p = units / "tram.service"
    p.write_text(p.read_text().replace("Type=notify", "Typ=notify")
                 .replace("ProtectSystem=strict", "ProtectSystem=strictest"))
    rc, msgs = verify(units, "tram.service")
    assert any("Typ" in m for m in msgs) and any("strictest" in m for m in msgs)


def test_service_is_hardened_as_documented(root, tram_bin, model_path):
    s = unit_settings(root / "deploy" / "tram.service")
    want = {"Type": "notify", "DynamicUser": "yes", "ProtectSystem": "strict", "PrivateTmp": "yes",
            "NoNewPrivileges": "yes", "Restart": "on-failure", "ProtectHome": "yes",
            "RestartPreventExitStatus": "2"}
    for k, v in want.items():
        assert s.get(k) == [v], k
    assert any("/srv/tram/models" in v for v in s["ReadOnlyPaths"])
    assert re.fullmatch(r"\d+s", s["WatchdogSec"][0])
    assert s["ExecStart"] == [f"{INSTALLED_BIN} serve --config /etc/tram/tram.json"]
    # systemd's stop timeout leaves room for tram's drain.
    r = subprocess.run([str(tram_bin), "serve", "--check-config", "-m", str(model_path)],
                       capture_output=True, text=True, env={}, timeout=30)
    conf = json.loads(r.stdout)
    # the grace, the drain timeout, then 5 s for slow readers (SRV_CLOSE_GRACE_MS)
    drain = conf["drain_grace"]["value"] + conf["drain_timeout"]["value"] + 5
    assert int(s["TimeoutStopSec"][0].rstrip("s")) > drain
    sock = unit_settings(root / "deploy" / "tram.socket")
    assert sock["ListenStream"] == ["127.0.0.1:8080"]


def test_execstart_and_example_config_are_valid(root, tram_bin, model_path, tmp_path):
    # The example with the model where this checkout has it, run with the
    # unit's own arguments.
    conf = json.loads((root / "deploy" / "tram.json").read_text())
    assert conf["model"].startswith("/srv/tram/models/")
    conf["model"] = str(model_path)
    path = tmp_path / "tram.json"
    path.write_text(json.dumps(conf))
    s = unit_settings(root / "deploy" / "tram.service")
    argv = s["ExecStart"][0].split()
    argv = [str(tram_bin)] + [str(path) if a == "/etc/tram/tram.json" else a for a in argv[1:]]
    r = subprocess.run(argv + ["--check-config"], capture_output=True, text=True, env={}, timeout=30)
    assert r.returncode == 0, r.stderr
    resolved = json.loads(r.stdout)
    for key in conf:
        assert resolved[key]["source"] == f"config file {path}", key
    # The example listens where the socket unit does.
    listen = unit_settings(root / "deploy" / "tram.socket")["ListenStream"][0]
    assert f'{resolved["host"]["value"]}:{resolved["port"]["value"]}' == listen


def files_under(d):
    return sorted(str(p.relative_to(d)) for p in d.rglob("*") if not p.is_dir())


def make(root, build_dir, *args):
    build = os.path.relpath(build_dir, root) if build_dir.is_relative_to(root) else str(build_dir)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    r = subprocess.run(["make", "--no-print-directory", "-C", str(root), f"BUILD={build}", *args],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("prefix", ["/usr/local", "/opt/tram"])
def test_make_install_and_uninstall(root, build_dir, tram_bin, tmp_path, prefix):
    dest = tmp_path / "dest"
    p = prefix.lstrip("/")
    make(root, build_dir, "install", f"DESTDIR={dest}", f"PREFIX={prefix}")
    assert files_under(dest) == sorted([
        f"{p}/bin/tram",
        f"{p}/lib/systemd/system/tram.service",
        f"{p}/lib/systemd/system/tram.socket",
        f"{p}/share/doc/tram/configuration.md",
        f"{p}/share/doc/tram/deployment.md",
        f"{p}/share/doc/tram/tram.json",
    ])
    installed = dest / p
    assert (installed / "bin/tram").read_bytes() == tram_bin.read_bytes()
    assert os.access(installed / "bin/tram", os.X_OK)
    unit = unit_settings(installed / "lib/systemd/system/tram.service")
    assert unit["ExecStart"] == [f"{prefix}/bin/tram serve --config /etc/tram/tram.json"]
    assert unit["Documentation"] == [f"file:{prefix}/share/doc/tram/deployment.md"]
    assert (installed / "lib/systemd/system/tram.service").stat().st_mode & 0o777 == 0o644
    for doc in ("configuration.md", "deployment.md"):
        assert (installed / "share/doc/tram" / doc).read_text() == (root / "docs" / doc).read_text()
    # uninstall removes exactly what install put there.
    foreign = installed / "bin" / "other-program"
    foreign.write_text("not ours")
    make(root, build_dir, "uninstall", f"DESTDIR={dest}", f"PREFIX={prefix}")
    assert files_under(dest) == [f"{p}/bin/other-program"]
    assert not (installed / "share/doc/tram").exists()
