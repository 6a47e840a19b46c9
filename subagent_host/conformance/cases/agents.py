"""Agent definitions and `agents/list` (protocol.md §18); with `--with-agents`, what the
agent backends promise without a model behind them (§14.2, §16)."""

from __future__ import annotations

from ..registry import AGENTS, case, diagnostic_codes, error_of, expect, expect_equal, result_of
from ..trial import Trial

DEFINITION = "---\nname: haiku\ndescription: Answers in a haiku\n---\nAnswer in one haiku.\n"


def define(t: Trial) -> None:
    folder = t.config_home / "subagent-host" / "agents"
    folder.mkdir(parents=True)
    (folder / "haiku.md").write_text(DEFINITION)


@case("agents.list-shape", "§18")
async def list_shape(t: Trial) -> None:
    conn = await t.start()
    result = result_of(await conn.request("agents/list", {}))
    expect(
        isinstance(result.get("agents"), list) and isinstance(result.get("diagnostics"), list),
        "{agents: [...], diagnostics: [...]}",
        result,
    )


@case("agents.user-definition-listed", "§18")
async def listed(t: Trial) -> None:
    define(t)
    conn = await t.start()
    agents = result_of(await conn.request("agents/list", {})).get("agents", [])
    found = [a for a in agents if a.get("name") == "haiku"]
    expect(len(found) == 1, "the user's definition 'haiku' listed once", agents)
    expect_equal(
        (found[0].get("description"), found[0].get("source")),
        ("Answers in a haiku", "user"),
        "its description and source",
    )
    expect(str(found[0].get("digest", "")).startswith("sha256:v1:"), "a digest", found[0])


@case("agents.unknown-agent-rejected", "§18")
async def unknown(t: Trial) -> None:
    conn = await t.start()
    error = error_of(await conn.request("spawn", {"agent": "nobody-here"}), -32003)
    expect("unknown-agent" in diagnostic_codes(error), "diagnostic unknown-agent", error)


@case("agents.cli-backends-available", "§16", keywords=(AGENTS,))
async def available(t: Trial) -> None:
    conn = await t.start()
    backends = {b.get("id"): b for b in result_of(await conn.request("ping")).get("backends", [])}
    for name in ("pi", "claude", "codex"):
        backend = backends.get(name, {})
        expect(backend.get("available") is True, f"backend {name} available", backend)


@case("agents.lean-by-default-in-plan", "§16.4", keywords=(AGENTS,))
async def lean(t: Trial) -> None:
    conn = await t.start()
    result = result_of(
        await conn.request("preflight", {"prompt": "hello", "backend": "pi", "model": "a/b"})
    )
    child = result.get("plan", {}).get("children", [{}])[0]
    expect_equal(child.get("sessionResources"), "lean", "the plan's sessionResources")


@case("agents.empty-prompt-refused", "§8.1", keywords=(AGENTS,))
async def empty_prompt(t: Trial) -> None:
    conn = await t.start()
    error = error_of(await conn.request("spawn", {"prompt": "   ", "backend": "pi"}), -32003)
    expect("empty-prompt" in diagnostic_codes(error), "diagnostic empty-prompt", error)


@case("agents.access-removes-tools", "§14.2", keywords=(AGENTS,))
async def access(t: Trial) -> None:
    conn = await t.start()
    result = result_of(
        await conn.request(
            "preflight",
            {
                "prompt": "read only",
                "backend": "pi",
                "model": "a/b",
                "access": {"filesystem": "read", "process": False, "network": False},
            },
        )
    )
    children = result.get("receipts", {}).get("access", {}).get("children", [{}])
    removed = [tool.get("name") for tool in children[0].get("removedTools", [])]
    expect(removed != [], "tools beyond the access removed", children)
    expect("tools-removed" in diagnostic_codes(result), "an info tools-removed", result)
