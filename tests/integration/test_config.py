"""tram's configuration and command line, driven through build/tram:
precedence (defaults < file < environment < flags) via `serve --check-config`,
every error path (exit status 2, a message naming key and source), --help,
--version, the generated reference in docs/configuration.md, and the log line
formats (text, JSON, journald, log file).

Run as a script (`.venv/bin/python tests/integration/test_config.py`) to
regenerate the settings reference in docs/configuration.md from build/tram.
"""
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

# The settings issue 8 asks for (plus the config file itself): each must be a
# flag, an environment variable and (but config) a config file key.
EXPECTED = [
    "config", "model", "served_model_name", "device", "threads", "precision", "quantize", "cuda_graphs",
    "max_model_len", "pooling", "pooling_normalize",
    "default_max_tokens", "generation_config", "chat_template", "tool_call_parser", "reasoning_parser",
    "reasoning_budget", "special_tokens_in_input",
    "host", "port", "unix_socket", "max_connections", "max_connections_per_client",
    "kv_cache_bytes", "kv_cache_blocks", "state_snapshot_bytes", "block_size", "max_batch_tokens", "max_seqs", "step_target_ms",
    "speculative", "num_speculative_tokens", "prompt_lookup_min", "prompt_lookup_max", "speculative_max_batch",
    "draft_model", "draft_kv_cache_bytes",
    "max_waiting", "max_body_size", "max_header_size",
    "request_timeout", "idle_timeout", "slow_client_timeout", "drain_timeout", "drain_grace",
    "api_keys", "api_key_file", "allowed_origins", "expose_model_path", "log_level", "log_format", "log_file", "metrics", "dashboard",
    "kv_events", "kv_events_topic",
    "grammar_max_size", "grammar_max_repeat", "grammar_max_depth", "grammar_max_literal", "grammar_max_stacks",
    "grammar_mask_fuel", "grammar_cache_bytes", "grammar_cache_bytes_per_grammar", "grammar_compile_timeout",
    "grammar_compile_threads", "grammar_compile_queue",
]

BEGIN = "<!-- BEGIN SETTINGS"
END = "<!-- END SETTINGS -->"
TS = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"


def run(tram, *args, env=None, **kw):
    """Runs tram with a clean environment (PATH plus `env`)."""
    e = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):
        if k in os.environ:
            e[k] = os.environ[k]
    e.update(env or {})
    return subprocess.run([str(tram), *map(str, args)], env=e, capture_output=True, text=True,
                          timeout=30, **kw)


def check(tram, *args, env=None):
    r = run(tram, "serve", "--check-config", *args, env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


# Independent readers of the value syntax (docs/configuration.md).
def size_bytes(text):
    m = re.fullmatch(r"(\d+)([KMGT]?)", text)
    assert m, text
    return int(m[1]) * 1024 ** " KMGT".index(m[2] or " ")


def duration_s(text):
    m = re.fullmatch(r"(\d+)(ms|s|m|h)?", text)
    assert m, text
    return int(m[1]) * {"ms": 0.001, "s": 1, None: 1, "m": 60, "h": 3600}[m[2]]


def help_entries(text):
    """{name: {"flag", "short", "default", "type", "env", "key"}} from --help."""
    entries, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"^  (?:-(\w), )?--([a-z-]+)(?: \S+|, --no-\2)$", line)
        if m:
            cur = {"short": m[1], "flag": "--" + m[2]}
            entries[m[2].replace("-", "_")] = cur
            continue
        m = re.match(r"^      default (\S+); (.+)$", line)
        if m and cur:
            cur["default"], cur["type"] = m[1], m[2]
        m = re.match(r'^      env (TRAM_\w+); (?:key "(\w+)"|not a config file key)$', line)
        if m and cur:
            cur["env"], cur["key"] = m[1], m[2]
    return entries


# --- help, version, commands ------------------------------------------------

def test_help_lists_every_setting_with_default_and_env(tram_bin, model_path):
    r = run(tram_bin, "--help")
    assert r.returncode == 0 and r.stderr == ""
    entries = help_entries(r.stdout)
    assert sorted(entries) == sorted(EXPECTED)
    defaults = check(tram_bin, "--model", model_path)
    for name, e in entries.items():
        assert e["flag"] == "--" + name.replace("_", "-")
        assert e["env"] == "TRAM_" + name.upper()
        assert e["key"] == (None if name == "config" else name)
        assert "default" in e, name
        # The default --help shows is the value tram resolves when nothing is set.
        got = defaults[name]
        if name == "model":
            continue
        assert got["source"] == "default", name
        value, shown = got["value"], e["default"]
        if shown == "none":
            assert value in (None, [], "SmolLM2-135M-Instruct.Q4_1"), (name, value)  # derived name
        elif e["type"].startswith("size"):
            assert value == size_bytes(shown), name
        elif e["type"].startswith("duration"):
            assert value == pytest.approx(duration_s(shown)), name
        elif e["type"] == "bool":
            assert value == (shown == "true"), name
        elif e["type"].startswith(("integer", "power of two")):
            assert value == int(shown), name
        else:
            assert value == shown, name
    assert entries["model"]["short"] == "m" and entries["port"]["short"] == "p"
    assert entries["config"]["short"] == "c"


def test_help_wins_over_bad_settings(tram_bin):
    r = run(tram_bin, "serve", "--port", "abc", "--help")
    assert r.returncode == 0 and "Usage:" in r.stdout


def test_version(tram_bin):
    for flag in ("--version", "-V"):
        r = run(tram_bin, flag)
        assert r.returncode == 0
        assert re.fullmatch(r"tram \d+\.\d+\.\d+ \(devices: [a-z, ]+\)\n", r.stdout)


def test_generate_needs_a_model(tram_bin):
    r = run(tram_bin, "generate", "--prompt", "hi")
    assert r.returncode == 2
    assert "no model file given" in r.stderr


def test_unknown_command(tram_bin):
    r = run(tram_bin, "srve")
    assert r.returncode == 2 and 'unknown command "srve"' in r.stderr


def test_serve_is_the_default_command(tram_bin, model_path):
    a = run(tram_bin, "--check-config", "-m", model_path)
    b = run(tram_bin, "serve", "--check-config", "-m", model_path)
    assert a.returncode == b.returncode == 0
    assert json.loads(a.stdout) == json.loads(b.stdout)


def test_docs_reference_matches_the_table(root, tram_bin):
    doc = (root / "docs" / "configuration.md").read_text()
    assert BEGIN in doc and END in doc
    section = doc.split(BEGIN, 1)[1].split("\n", 1)[1].split(END, 1)[0]
    generated = run(tram_bin, "--help-markdown").stdout
    assert section.strip() == generated.strip(), (
        "docs/configuration.md is out of date: run .venv/bin/python tests/integration/test_config.py")
    for name in EXPECTED:
        assert f"`TRAM_{name.upper()}`" in section


# --- precedence ---------------------------------------------------------------

def test_precedence_default_file_env_flag(tram_bin, model_path, tmp_path):
    conf = tmp_path / "tram.json"
    conf.write_text(json.dumps({"model": str(model_path), "port": 1111, "threads": 1,
                                "max_seqs": 8, "log_level": "warn", "api_keys": ["f1", "f2"]}))
    env = {"TRAM_PORT": "2222", "TRAM_THREADS": "2", "TRAM_API_KEYS": "e1"}
    c = check(tram_bin, "--config", conf, "--port", "3333", env=env)
    src = f"config file {conf}"
    assert c["config"] == {"value": str(conf), "source": "flag --config"}
    assert c["port"] == {"value": 3333, "source": "flag --port"}
    assert c["threads"] == {"value": 2, "source": "environment TRAM_THREADS"}
    assert c["max_seqs"] == {"value": 8, "source": src}
    assert c["log_level"] == {"value": "warn", "source": src}
    assert c["model"] == {"value": str(model_path), "source": src}
    assert c["block_size"] == {"value": 32, "source": "default"}
    assert c["api_keys"] == {"value": ["***"], "source": "environment TRAM_API_KEYS"}
    # Without the flag the environment wins; without both, the file.
    assert check(tram_bin, "-c", conf, env=env)["port"]["value"] == 2222
    assert check(tram_bin, "-c", conf)["port"]["value"] == 1111
    # TRAM_CONFIG names the file when no flag does; the flag wins over it.
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"model": str(model_path), "port": 4444}))
    assert check(tram_bin, env={"TRAM_CONFIG": str(conf)})["port"]["value"] == 1111
    c = check(tram_bin, "-c", other, env={"TRAM_CONFIG": str(conf)})
    assert c["port"]["value"] == 4444 and c["config"]["source"] == "flag --config"


def test_value_forms(tram_bin, model_path, tmp_path):
    conf = tmp_path / "tram.json"
    conf.write_text(json.dumps({"kv_cache_bytes": "2G", "max_body_size": 4096,
                                "request_timeout": "500ms", "idle_timeout": 5,
                                "metrics": False, "device": "cpu"}))
    c = check(tram_bin, "-c", conf, "-m", model_path, "--max-header-size", "64KiB",
              "--drain-timeout", "2m", "--slow-client-timeout=45", "--no-metrics",
              "--api-keys", "a, b", "--api-keys", "c", "--kv-cache-blocks", "0")
    assert c["kv_cache_bytes"]["value"] == 2 << 30
    assert c["max_body_size"]["value"] == 4096
    assert c["max_header_size"]["value"] == 64 << 10
    assert c["request_timeout"]["value"] == 0.5
    assert c["idle_timeout"]["value"] == 5
    assert c["drain_timeout"]["value"] == 120
    assert c["slow_client_timeout"]["value"] == 45
    assert c["metrics"] == {"value": False, "source": "flag --metrics"}
    assert c["api_keys"]["value"] == ["***"] * 3
    c = check(tram_bin, "-m", model_path, "--kv-cache-blocks", "500", "--metrics=on")
    assert c["kv_cache_blocks"]["value"] == 500 and c["kv_cache_bytes"]["value"] == 0
    assert c["metrics"]["value"] is True
    assert c["served_model_name"]["value"] == model_path.name.removesuffix(".gguf")


def test_api_key_file_is_read_and_never_printed(tram_bin, model_path, tmp_path):
    keys = tmp_path / "keys"
    keys.write_text("# tram keys\nsecret-one\n\n  secret-two  \n")
    r = run(tram_bin, "serve", "--check-config", "-m", model_path, "--api-key-file", keys)
    assert r.returncode == 0, r.stderr
    assert "secret" not in r.stdout + r.stderr
    assert json.loads(r.stdout)["api_keys"]["value"] == ["***", "***"]


# --- errors: exit status 2, one message naming the key and its source ---------

ERRORS = [
    # (flags, environment, config file text or None, expected message parts)
    (["--port", "abc"], {}, None, ['flag --port: expected an integer 0..65535, got "abc"']),
    ([], {"TRAM_PORT": "abc"}, None, ['environment TRAM_PORT: expected an integer 0..65535, got "abc"']),
    ([], {}, '{"port": "abc"}', ['key "port": expected an integer 0..65535, got "abc"']),
    (["-p", "65536"], {}, None, ["flag --port: expected an integer 0..65535", '"65536"']),
    ([], {}, '{"port": 8080.5}', ['key "port": expected an integer', "got 8080.5"]),
    (["--threads", "-1"], {}, None, ["flag --threads: expected an integer 0..1024"]),
    (["--block-size", "48"], {}, None, ['flag --block-size: expected a power of two 8..256, got "48"']),
    ([], {"TRAM_BLOCK_SIZE": "512"}, None, ["environment TRAM_BLOCK_SIZE: expected a power of two"]),
    (["--kv-cache-bytes", "12X"], {}, None, ["flag --kv-cache-bytes: expected a size 1M..64T", 'got "12X"']),
    (["--kv-cache-bytes", "1.5G"], {}, None, ["flag --kv-cache-bytes: expected a size"]),
    ([], {}, '{"max_body_size": "2Q"}', ['key "max_body_size": expected a size 1K..1G', 'got "2Q"']),
    (["--idle-timeout", "5x"], {}, None, ["flag --idle-timeout: expected a duration 1s..24h"]),
    ([], {}, '{"drain_timeout": -1}', ['key "drain_timeout": expected a duration 0..1h', "got -1"]),
    (["--metrics=maybe"], {}, None, ['flag --metrics: expected true or false, got "maybe"']),
    ([], {}, '{"metrics": "true"}', ['key "metrics": expected true or false, got "true"']),
    (["--device", "tpu"], {}, None, ['flag --device: expected one of cpu, cuda, got "tpu"']),
    ([], {"TRAM_LOG_LEVEL": "trace"}, None, ["environment TRAM_LOG_LEVEL: expected one of error, warn, info, debug"]),
    ([], {}, '{"log_format": "xml"}', ['key "log_format": expected one of text, json, got "xml"']),
    ([], {}, '{"api_keys": "k"}', ['key "api_keys": expected a list of strings, got "k"']),
    (["--api-keys", "a,,b"], {}, None, ["flag --api-keys: empty item in the list"]),
    ([], {}, '{"prot": 8080}', ['unknown key "prot"']),
    ([], {}, '{"config": "x.json"}', ['key "config" cannot be set in a config file']),
    ([], {}, '{"port": 1, "port": 2}', ['key "port" appears twice']),
    ([], {}, '{"port": 1,\n  "host": }', ["invalid JSON at line 2, column 11"]),
    ([], {}, '["port"]', ["expected a JSON object of settings"]),
    (["--prot", "1"], {}, None, ["flag --prot: unknown flag (see tram --help)"]),
    (["--port"], {}, None, ["flag --port: missing value"]),
    (["8080"], {}, None, ['unexpected argument "8080"']),
    (["--kv-cache-blocks", "10"], {"TRAM_KV_CACHE_BYTES": "1G"}, None,
     ["kv_cache_bytes (environment TRAM_KV_CACHE_BYTES) and kv_cache_blocks (flag --kv-cache-blocks) are exclusive"]),
    (["--max-seqs", "512"], {}, None, ["flag --max-seqs: max_batch_tokens (256, default) must be at least max_seqs (512, flag --max-seqs)"]),
    (["--host", "my host"], {}, None, ["flag --host: expected an IPv4 or IPv6 address or a host name"]),
    ([], {"TRAM_API_KEY_FILE": "/nonexistent/keys"}, None,
     ['environment TRAM_API_KEY_FILE: API key file "/nonexistent/keys": cannot open: No such file or directory']),
    (["--log-file", "/nonexistent/dir/tram.log"], {}, None, ["flag --log-file: cannot create log file"]),
]


@pytest.mark.parametrize("flags,env,text,want", ERRORS, ids=[" ".join(e[3])[:50] for e in ERRORS])
def test_errors_exit_2_naming_key_and_source(tram_bin, model_path, tmp_path, flags, env, text, want):
    args = ["serve", "--check-config", "-m", model_path]
    if text is not None:
        conf = tmp_path / "bad.json"
        conf.write_text(text)
        args += ["--config", conf]
        want = [f"config file {conf}: " + want[0]] + want[1:]
    r = run(tram_bin, *args, *flags, env=env)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr  # one clear message
    assert re.match(TS + " error: ", lines[0])
    for w in want:
        assert w in lines[0]


def test_model_errors(tram_bin, tmp_path):
    r = run(tram_bin, "serve", "--check-config")
    assert r.returncode == 2 and "model: no model file given" in r.stderr
    r = run(tram_bin, "serve", "--check-config", env={"TRAM_MODEL": str(tmp_path / "none.gguf")})
    assert r.returncode == 2
    assert f'environment TRAM_MODEL: cannot open model file "{tmp_path}/none.gguf": No such file' in r.stderr
    r = run(tram_bin, "serve", "--check-config", "--model", tmp_path)
    assert r.returncode == 2 and "flag --model: model file" in r.stderr and "not a regular file" in r.stderr
    unreadable = tmp_path / "secret.gguf"
    unreadable.write_bytes(b"GGUF")
    unreadable.chmod(0)
    if os.geteuid() != 0:  # root reads anything
        r = run(tram_bin, "serve", "--check-config", "-m", unreadable)
        assert r.returncode == 2 and "Permission denied" in r.stderr
    conf = tmp_path / "c.json"
    conf.write_text(json.dumps({"model": "/nonexistent/m.gguf"}))
    r = run(tram_bin, "serve", "--check-config", "-c", conf)
    assert r.returncode == 2
    assert f'config file {conf}: key "model": cannot open model file "/nonexistent/m.gguf"' in r.stderr


def test_missing_config_file(tram_bin, model_path):
    r = run(tram_bin, "serve", "-m", model_path, "-c", "/nonexistent/tram.json")
    assert r.returncode == 2
    assert "config file /nonexistent/tram.json: cannot open: No such file or directory" in r.stderr


def test_empty_api_key_file_is_an_error(tram_bin, model_path, tmp_path):
    keys = tmp_path / "keys"
    keys.write_text("# none yet\n\n")
    r = run(tram_bin, "serve", "--check-config", "-m", model_path, "--api-key-file", keys)
    assert r.returncode == 2 and "holds no API key" in r.stderr


def test_unknown_tram_env_is_a_warning(tram_bin, model_path):
    r = run(tram_bin, "serve", "--check-config", "-m", model_path, env={"TRAM_PROT": "1"})
    assert r.returncode == 0
    assert re.search(TS + r" warn: environment TRAM_PROT: not a tram setting, ignored", r.stderr)


# --- log lines --------------------------------------------------------------

def test_log_formats(tram_bin, model_path, tmp_path):
    r = run(tram_bin, "serve", "--check-config", "-m", model_path)
    assert re.fullmatch(TS + r" info: configuration is valid\n", r.stderr)
    r = run(tram_bin, "serve", "--check-config", "-m", model_path, "--log-format", "json")
    line = json.loads(r.stderr)
    assert line["level"] == "info" and line["msg"] == "configuration is valid"
    assert re.fullmatch(TS, line["ts"])
    r = run(tram_bin, "serve", "--check-config", "-m", model_path, env={"TRAM_LOG_LEVEL": "warn"})
    assert r.returncode == 0 and r.stderr == ""
    log = tmp_path / "tram.log"
    r = run(tram_bin, "serve", "--check-config", "-m", model_path, "--log-file", log)
    assert r.returncode == 0 and r.stderr == ""
    assert re.fullmatch(TS + r" info: configuration is valid\n", log.read_text())


def run_with_journal(tram_bin, *args, stream=None):
    """Runs tram with stderr on a pipe and JOURNAL_STREAM naming that pipe
    (or `stream`), as systemd does; returns (exit status, stderr text)."""
    rfd, wfd = os.pipe()
    st = os.fstat(wfd)
    env = {"PATH": os.environ.get("PATH", ""), "JOURNAL_STREAM": stream or f"{st.st_dev}:{st.st_ino}"}
    p = subprocess.run([str(tram_bin), *map(str, args)], env=env, stdout=subprocess.DEVNULL,
                       stderr=wfd, timeout=30)
    os.close(wfd)
    with os.fdopen(rfd) as f:
        return p.returncode, f.read()


def test_journald_priority_prefixes(tram_bin, model_path):
    rc, err = run_with_journal(tram_bin, "serve", "--check-config", "-m", model_path)
    assert rc == 0 and err == "<6>info: configuration is valid\n"
    rc, err = run_with_journal(tram_bin, "serve", "-m", model_path, "--port", "x")
    assert rc == 2 and err.startswith("<3>error: flag --port:")
    rc, err = run_with_journal(tram_bin, "serve", "--check-config", "-m", model_path,
                               "--log-format", "json")
    assert err.startswith("<6>{") and json.loads(err[3:])["level"] == "info"
    # A JOURNAL_STREAM that is not our stderr (redirected): timestamps again.
    rc, err = run_with_journal(tram_bin, "serve", "--check-config", "-m", model_path, stream="1:1")
    assert re.fullmatch(TS + r" info: configuration is valid\n", err)


# --- the ASan+UBSan build (TRAM_SAN_BIN, set by `make test`) ------------------

def test_sanitized_binary_is_clean(root, model_path, tmp_path):
    """The main paths of the sanitized build: no leak, no undefined behaviour
    (ASan/UBSan abort with a report, which this sees as a bad exit status)."""
    san = os.environ.get("TRAM_SAN_BIN")
    if not san:
        pytest.skip("TRAM_SAN_BIN not set (make test sets it)")
    san = pathlib.Path(san) if os.path.isabs(san) else root / san
    assert san.exists(), f"{san} is missing: run `make sanitize`"
    keys = tmp_path / "keys"
    keys.write_text("k1\nk2\n")
    conf = tmp_path / "c.json"
    conf.write_text(json.dumps({"model": str(model_path), "api_keys": ["a"], "port": 1}))
    env = {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=1",
           "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1"}
    cases = [
        (0, ["--help"]), (0, ["--help-markdown"]), (0, ["--version"]),
        (0, ["serve", "--check-config", "-c", conf, "--api-key-file", keys, "--api-keys", "x",
             "--api-keys", "y", "--log-format", "json", "--log-file", tmp_path / "log"]),
        (2, ["serve", "-c", conf, "--port", "abc"]),
        (2, ["serve", "-c", conf, "--kv-cache-blocks", "4", "--kv-cache-bytes", "1G"]),
        (2, ["serve", "-m", model_path, "--api-keys", "a,,b"]),
        (2, ["generate"]),
    ]
    for want, args in cases:
        r = run(san, *args, env={**env, "TRAM_NOT_A_SETTING": "1"})
        assert r.returncode == want, (args, r.stderr[-3000:])
        assert "Sanitizer" not in r.stderr and "runtime error" not in r.stderr, r.stderr[-3000:]
    bad = tmp_path / "bad.json"
    bad.write_text('{"api_keys": ["a", 1], "port": "x"}')
    r = run(san, "serve", "-c", bad, "-m", model_path, env=env)
    assert r.returncode == 2 and "Sanitizer" not in r.stderr


# --- regenerate the reference in docs/configuration.md ------------------------

def regenerate(root, tram):
    doc_path = root / "docs" / "configuration.md"
    doc = doc_path.read_text()
    head, rest = doc.split(BEGIN, 1)
    marker_line, _ = rest.split("\n", 1)
    tail = rest.split(END, 1)[1]
    generated = subprocess.run([str(tram), "--help-markdown"], capture_output=True, text=True,
                               check=True).stdout
    doc_path.write_text(f"{head}{BEGIN}{marker_line}\n\n{generated}\n{END}{tail}")


if __name__ == "__main__":
    ROOT = pathlib.Path(__file__).resolve().parents[2]
    regenerate(ROOT, pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "build" / "tram")
