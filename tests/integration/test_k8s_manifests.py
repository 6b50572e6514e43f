"""The Kubernetes manifests in deploy/k8s/ (no cluster here): each parses as
YAML with the fields its kind requires; the Deployment's arguments are ones
tram accepts (`tram serve --check-config`, the model swapped for this
checkout's); its probes use /health; terminationGracePeriodSeconds covers
the preStop sleep, tram's drain grace, its drain timeout and the 5 s for
slow readers; the Service, the InferencePool and the KEDA ScaledObject
point at the Deployment's pods, port and served model, and the autoscaler
reads a gauge tram exports."""
import json
import re
import subprocess

import yaml

K8S = "deploy/k8s"


def docs(root, name):
    return list(yaml.safe_load_all((root / K8S / name).read_text()))


def by_kind(root):
    out = {}
    for name in ("tram.yaml", "inferencepool.yaml", "keda.yaml"):
        for d in docs(root, name):
            assert {"apiVersion", "kind", "metadata", "spec"} <= set(d), (name, d.keys())
            assert d["metadata"]["name"], name
            out[d["kind"]] = d
    return out


def container(dep):
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    return c


def arg(c, name):
    (v,) = [a.split("=", 1)[1] for a in c["args"] if a.startswith(f"--{name}=")]
    return v


def test_manifests_parse_with_their_fields(root):
    k = by_kind(root)
    assert set(k) == {"Deployment", "Service", "InferencePool", "ScaledObject"}
    assert k["Deployment"]["apiVersion"] == "apps/v1" and k["Service"]["apiVersion"] == "v1"
    assert k["InferencePool"]["apiVersion"] == "inference.networking.k8s.io/v1"
    assert k["ScaledObject"]["apiVersion"] == "keda.sh/v1alpha1"


def test_deployment_probes_and_drain(root, tram_bin, model_path):
    dep = by_kind(root)["Deployment"]
    spec = dep["spec"]["template"]["spec"]
    c = container(dep)
    assert dep["spec"]["selector"]["matchLabels"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    port = {p["name"]: p["containerPort"] for p in c["ports"]}["http"]
    assert arg(c, "port") == str(port)
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert c[probe]["httpGet"] == {"path": "/health", "port": "http"}, probe
    # tram accepts the arguments (the pod's IP as Kubernetes would expand it)
    args = [a.replace("$(POD_IP)", "10.1.2.3") for a in c["args"]]
    args = [f"--model={model_path}" if a.startswith("--model=") else a for a in args]
    assert args[0] == "serve"
    r = subprocess.run([str(tram_bin), *args, "--check-config"], capture_output=True, text=True, env={},
                       timeout=30)
    assert r.returncode == 0, r.stderr
    conf = {k: v["value"] for k, v in json.loads(r.stdout).items()}
    assert conf["kv_events_topic"] == "kv@10.1.2.3@" + conf["served_model_name"]
    # the drain fits in the grace period: preStop, drain_grace, drain_timeout, 5 s
    sleep = c["lifecycle"]["preStop"]["exec"]["command"]
    assert sleep[0] == "sleep" and re.fullmatch(r"\d+", sleep[1])
    need = int(sleep[1]) + conf["drain_grace"] + conf["drain_timeout"] + 5
    assert conf["drain_grace"] > 0 and spec["terminationGracePeriodSeconds"] >= need
    # readiness sees the drain's 503 within the grace; liveness never cuts a drain short
    ready = c["readinessProbe"]
    assert ready["periodSeconds"] * ready["failureThreshold"] < conf["drain_grace"]
    live = c["livenessProbe"]
    assert live["periodSeconds"] * live["failureThreshold"] >= need


def test_service_pool_and_autoscaler_point_at_the_pods(root):
    k = by_kind(root)
    dep = k["Deployment"]
    labels = dep["spec"]["template"]["metadata"]["labels"]
    c = container(dep)
    port = c["ports"][0]["containerPort"]
    assert k["Service"]["spec"]["selector"].items() <= labels.items()
    pool = k["InferencePool"]["spec"]
    assert pool["selector"]["matchLabels"].items() <= labels.items()
    assert pool["targetPorts"] == [{"number": port}]
    assert pool["endpointPickerRef"]["name"] and pool["endpointPickerRef"]["port"]["number"] > 0
    scaled = k["ScaledObject"]["spec"]
    assert scaled["scaleTargetRef"]["name"] == dep["metadata"]["name"]
    (trigger,) = scaled["triggers"]
    assert trigger["type"] == "prometheus"
    query = trigger["metadata"]["query"]
    m = re.search(r'(vllm:[a-z_]+)\{model_name="([^"]+)"\}', query)
    assert m and m.group(1) == "vllm:num_requests_waiting", query
    assert m.group(2) == arg(c, "served-model-name")
    assert f'"{m.group(1)}"' in (root / "server" / "metrics.c").read_text()  # a gauge tram exports
    assert float(trigger["metadata"]["threshold"]) > 0
