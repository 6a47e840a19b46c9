"""What leaves the machine: every agent child's receipt names its model provider (with the
endpoint its environment or its CLI's configuration gives it), a command child's says its
network is unknown, `egressConsent` is part of the fingerprint, and a server requiring
consent refuses an agent launch without it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from subagent_host.backends.base import Backend
from subagent_host.backends.codex import CodexBackend
from subagent_host.backends.endpoints import provider_endpoint
from subagent_host.planning.egress import EGRESS_CONSENT_REQUIRED, consent_missing
from subagent_host.planning.plan import LaunchPlan
from subagent_host.planning.preview import versioned_receipts
from subagent_host.planning.toolchain import Toolchain
from tests.planning.conftest import LIMITS, check_request, to_json

MOCK = "http://127.0.0.1:8123"


def plan_of(backends: dict[str, Backend], tmp_path: Path, **request: Any) -> LaunchPlan:
    env = {"PATH": str(tmp_path / "bin"), **request.pop("env", {})}
    checked = check_request(backends, tmp_path, **request, env=env)
    assert checked.accepted, checked.diagnostics
    assert checked.plan is not None
    return checked.plan


async def egress_of(
    backends: dict[str, Backend], tmp_path: Path, server_env: dict[str, str], **request: Any
) -> list[list[dict[str, Any]]]:
    """Each child's `egress` as preflight's receipts show it."""
    plan = plan_of(backends, tmp_path, **request)
    receipts = await versioned_receipts(plan, Toolchain(backends, None, server_env), LIMITS)
    return [to_json(child)["egress"] for child in receipts.access.children]


def pi_home(tmp_path: Path, providers: dict[str, Any], settings: Any = None) -> Path:
    home = tmp_path / "pi-agent"
    home.mkdir(parents=True, exist_ok=True)
    (home / "models.json").write_text(json.dumps({"providers": providers}))
    if settings is not None:
        (home / "settings.json").write_text(json.dumps(settings))
    return home


async def test_an_agent_child_s_egress_is_its_provider_even_with_no_network_for_its_tools(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    read_only = {"filesystem": "read", "network": False, "process": False}
    shown = await egress_of(
        backends,
        tmp_path,
        {"ANTHROPIC_BASE_URL": MOCK},
        tasks=[
            {"prompt": "look", "backend": "claude", "tools": ["Read"]},
            {"prompt": "look", "backend": "pi", "tools": ["read"]},
        ],
        access=read_only,
    )
    assert shown == [
        [{"kind": "model-provider", "backend": "claude", "endpoint": MOCK}],
        # No models.json names pi's provider: its own default, no endpoint claimed.
        [{"kind": "model-provider", "backend": "pi"}],
    ]


async def test_a_command_child_s_network_is_unknown(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    shown = await egress_of(backends, tmp_path, {}, command=["true"])
    assert shown == [[{"kind": "unknown"}]]


async def test_the_request_s_env_wins_over_the_server_s_and_unlisted_variables_never_count(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    other = "http://127.0.0.1:9999"
    spawn = {"prompt": "hi", "backend": "claude"}
    given = await egress_of(
        backends, tmp_path, {"ANTHROPIC_BASE_URL": MOCK}, **spawn, env={"ANTHROPIC_BASE_URL": other}
    )
    assert given[0][0]["endpoint"] == other
    # OPENAI_BASE_URL is not on claude's allowlist: the child would never see it.
    unlisted = await egress_of(backends, tmp_path, {"OPENAI_BASE_URL": other}, **spawn)
    assert unlisted == [[{"kind": "model-provider", "backend": "claude"}]]


async def test_pi_s_endpoint_is_the_base_url_its_models_json_gives_the_child_s_provider(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    home = pi_home(
        tmp_path,
        {"mock": {"baseUrl": f"{MOCK}/v1"}, "other": {"baseUrl": "https://elsewhere.invalid"}},
        settings={"defaultProvider": "other"},
    )
    env = {"PI_CODING_AGENT_DIR": str(home)}
    named = await egress_of(backends, tmp_path, env, prompt="hi", backend="pi", model="mock/m")
    assert named == [[{"kind": "model-provider", "backend": "pi", "endpoint": f"{MOCK}/v1"}]]
    # No provider in the request: pi's settings choose it.
    default = await egress_of(backends, tmp_path, env, prompt="hi", backend="pi")
    assert default[0][0]["endpoint"] == "https://elsewhere.invalid"
    # The request's env may point pi at another directory: that one is read.
    moved = pi_home(tmp_path / "moved", {"mock": {"baseUrl": "http://127.0.0.1:1/v1"}})
    shown = await egress_of(
        backends,
        tmp_path,
        env,
        prompt="hi",
        backend="pi",
        model="mock/m",
        env={"PI_CODING_AGENT_DIR": str(moved)},
    )
    assert shown[0][0]["endpoint"] == "http://127.0.0.1:1/v1"


def test_codex_s_endpoint_is_its_selected_provider_s_base_url_else_openai_base_url(
    tmp_path: Path,
) -> None:
    home = tmp_path / "codex-home"
    home.mkdir()
    config = home / "config.toml"
    env = {"CODEX_HOME": str(home), "OPENAI_BASE_URL": "https://proxy.invalid/v1"}
    config.write_text(f'model_provider = "mock"\n[model_providers.mock]\nbase_url = "{MOCK}/v1"\n')
    assert provider_endpoint("codex", env, ()) == f"{MOCK}/v1"
    # A profile's provider is the one used.
    config.write_text(
        'profile = "p"\nmodel_provider = "mock"\n[profiles.p]\nmodel_provider = "far"\n'
        f'[model_providers.mock]\nbase_url = "{MOCK}/v1"\n'
        '[model_providers.far]\nbase_url = "https://far.invalid/v1"\n'
    )
    assert provider_endpoint("codex", env, ()) == "https://far.invalid/v1"
    # The built-in provider: OPENAI_BASE_URL, when the environment names one.
    config.write_text("check_for_update_on_startup = false\n")
    assert provider_endpoint("codex", env, ()) == "https://proxy.invalid/v1"
    assert provider_endpoint("codex", {"CODEX_HOME": str(home)}, ()) is None
    # A file that cannot be parsed names nothing.
    config.write_text("model_provider = \n")
    assert provider_endpoint("codex", {"CODEX_HOME": str(home)}, ()) is None


def test_without_a_home_or_a_readable_file_no_endpoint_is_claimed(tmp_path: Path) -> None:
    assert provider_endpoint("pi", {}, ("pi", "--provider", "mock")) is None
    assert provider_endpoint("codex", {}, ()) is None
    broken = tmp_path / "pi-agent"
    broken.mkdir()
    (broken / "models.json").write_text("{not json")
    env = {"PI_CODING_AGENT_DIR": str(broken)}
    assert provider_endpoint("pi", env, ("pi", "--provider", "mock")) is None
    assert provider_endpoint("command", {"ANTHROPIC_BASE_URL": MOCK}, ()) is None


async def test_a_codex_child_s_receipt_reads_its_codex_home(tmp_path: Path) -> None:
    home = tmp_path / "codex-home"
    home.mkdir()
    (home / "config.toml").write_text(
        f'model_provider = "mock"\n[model_providers.mock]\nbase_url = "{MOCK}/v1"\n'
    )
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "codex").write_text("#!/bin/sh\n")
    (tmp_path / "bin" / "codex").chmod(0o755)
    backends: dict[str, Backend] = {"codex": CodexBackend()}
    shown = await egress_of(
        backends, tmp_path, {"CODEX_HOME": str(home)}, prompt="hi", backend="codex"
    )
    assert shown == [[{"kind": "model-provider", "backend": "codex", "endpoint": f"{MOCK}/v1"}]]


def test_egress_consent_is_part_of_the_fingerprint_and_false_is_the_same_as_absent(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    spawn = {"prompt": "hi", "backend": "claude"}
    absent = plan_of(backends, tmp_path, **spawn)
    refused = plan_of(backends, tmp_path, **spawn, egressConsent=False)
    given = plan_of(backends, tmp_path, **spawn, egressConsent=True)
    assert absent.fingerprint == refused.fingerprint != given.fingerprint
    assert "egressConsent" not in to_json(absent.normalized)
    assert to_json(given.normalized)["egressConsent"] is True
    assert (absent.egress_consent, given.egress_consent) == (False, True)


def test_consent_is_missing_only_when_required_for_an_agent_child_without_it(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    agent = plan_of(backends, tmp_path, prompt="hi", backend="pi")
    missing = consent_missing(agent, required=True)
    assert missing is not None
    assert (missing.severity, missing.code, missing.path) == (
        "error",
        EGRESS_CONSENT_REQUIRED,
        "egressConsent",
    )
    assert consent_missing(agent, required=False) is None
    consented = plan_of(backends, tmp_path, prompt="hi", backend="pi", egressConsent=True)
    assert consent_missing(consented, required=True) is None
    command = plan_of(backends, tmp_path, command=["true"])
    assert consent_missing(command, required=True) is None
    mixed = plan_of(
        backends,
        tmp_path,
        chain=[{"command": ["true"]}, {"prompt": "{previous}", "backend": "claude"}],
    )
    assert consent_missing(mixed, required=True) is not None


def test_a_configuration_of_unexpected_shapes_names_nothing_and_raises_nothing(
    tmp_path: Path,
) -> None:
    codex, pi = tmp_path / "codex", tmp_path / "pi"
    codex.mkdir()
    pi.mkdir()
    (codex / "config.toml").write_text(
        'profile = [1]\nmodel_provider = {a = 1}\n[profiles]\nx = 1\nmodel_providers = "no"\n'
    )
    assert provider_endpoint("codex", {"CODEX_HOME": str(codex)}, ()) is None
    (pi / "settings.json").write_text(json.dumps({"defaultProvider": ["mock"]}))
    (pi / "models.json").write_text(json.dumps({"providers": ["mock"]}))
    assert provider_endpoint("pi", {"PI_CODING_AGENT_DIR": str(pi)}, ("pi",)) is None
    (pi / "models.json").write_text(json.dumps([{"providers": {}}]))
    assert provider_endpoint("pi", {"PI_CODING_AGENT_DIR": str(pi)}, ("pi",)) is None
    assert provider_endpoint("pi", {"PI_CODING_AGENT_DIR": "~no-such-user-here/x"}, ()) is None
    (pi / "models.json").write_text(json.dumps({"providers": {"mock": {"baseUrl": 7}}}))
    assert provider_endpoint("pi", {"PI_CODING_AGENT_DIR": str(pi)}, ("--provider", "mock")) is None
