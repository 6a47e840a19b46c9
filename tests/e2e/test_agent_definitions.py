"""Agent definitions, `agents/list`, configuration files and protected resume of agent
runs, end to end: the real server process (its working directory the project, its
`XDG_CONFIG_HOME` a temporary directory) and, where a child runs, the real pinned pi CLI
against the loopback mock LLM (tests/mock_llm)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, TypeVar

import pytest

from tests.e2e.agents import needs_cli, pi_environment, server_args
from tests.e2e.harness import ServerProcess, result_of, running_server
from tests.e2e.test_resume import (
    RESUME_DENIED,
    approve,
    assert_nothing_started,
    denied,
    observe,
    refused,
)
from tests.mock_llm import KEYWORD_ANSWER_NOW, MockLLM

F = TypeVar("F", bound=Callable[..., Any])

# What a digest is: the same scheme as a plan's fingerprint, over the file's exact bytes.
DIGEST_PREFIX: Final = "sha256:v1:"
# The one model every pi child of these tests talks to unless a test adds more.
MOCK_MODEL: Final = "mock/mock-model"
START: Final = f"{KEYWORD_ANSWER_NOW} start"
FOLLOW_UP: Final = f"{KEYWORD_ANSWER_NOW} and now?"


def with_pi(test: F) -> F:
    """The marks of a test that runs the pinned pi CLI (skipped when it is missing)."""
    for mark in needs_cli("pi"):
        test = mark(test)
    return test


# --- where things go -------------------------------------------------------------------


def config_home(tmp_path: Path) -> Path:
    """The server's `XDG_CONFIG_HOME`."""
    return tmp_path / "config"


def user_dir(tmp_path: Path) -> Path:
    """The user config directory: `subagents.json`, `agents/`, `subagents/`."""
    return config_home(tmp_path) / "subagent-host"


def project(tmp_path: Path) -> Path:
    """The project: the server's working directory."""
    path = tmp_path / "project"
    path.mkdir(exist_ok=True)
    return path


def project_pi(tmp_path: Path) -> Path:
    """The project's `.pi/`: `subagents.json`, `agents/`, `subagents/`."""
    return project(tmp_path) / ".pi"


def define(directory: Path, name: str, description: str, body: str = "", **fields: str) -> Path:
    """Write `<directory>/<name>.md`: frontmatter (name, description, fields), then the body."""
    lines = ["---", f"name: {name}", f"description: {description}"]
    lines += [f"{key}: {value}" for key, value in fields.items()]
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.md"
    path.write_text("\n".join([*lines, "---", body, ""]))
    return path


def write_json(path: Path, content: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content))
    return path


def real(path: Path) -> str:
    return os.path.realpath(path)


def digest_of(path: Path) -> str:
    return DIGEST_PREFIX + hashlib.sha256(path.read_bytes()).hexdigest()


def reference(name: str, source: str, path: Path) -> dict[str, str]:
    """What a launch records of the definition it came from (`contract.projection.agent`)."""
    return {"name": name, "source": source, "path": real(path), "digest": digest_of(path)}


def listed(name: str, source: str, path: Path, description: str, **wanted: Any) -> dict[str, Any]:
    """One `agents/list` entry as it must be (`wanted`: model, effort, tools, mode)."""
    return {**reference(name, source, path), "description": description, **wanted}


# --- servers ---------------------------------------------------------------------------


def plain_environment(tmp_path: Path) -> dict[str, str]:
    """A server environment for tests that start no agent child."""
    home = tmp_path / "home"
    home.mkdir()
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)}


def add_models(env: dict[str, str], *model_ids: str) -> None:
    """Offer more model ids on the mock provider of pi's `models.json` (see pi_environment)."""
    path = Path(env["PI_CODING_AGENT_DIR"]) / "models.json"
    config = json.loads(path.read_text())
    offered = config["providers"]["mock"]["models"]
    offered += [{**offered[0], "id": model_id} for model_id in model_ids]
    path.write_text(json.dumps(config))


def agent_server(
    tmp_path: Path, env: dict[str, str], *extra: str, trusted: bool = True
) -> contextlib.AbstractAsyncContextManager[ServerProcess]:
    """A server run in the project, with the test's config home, the project trusted or not."""
    here = project(tmp_path)
    trust = ("--trust-project", str(here)) if trusted else ()
    return running_server(
        *server_args(tmp_path),
        *trust,
        *extra,
        env={**env, "XDG_CONFIG_HOME": str(config_home(tmp_path))},
        cwd=here,
    )


async def launched(server: ServerProcess, agent: str) -> dict[str, Any]:
    """A task-mode run of the agent; it must complete."""
    params = {"agent": agent, "prompt": START, "mode": "task"}
    run: dict[str, Any] = await result_of(server, "spawn", params)
    assert run["status"] == "completed", run
    assert run["children"][0]["backendSessionId"], run
    return run


def chat_requests(mock: MockLLM) -> list[tuple[str, str]]:
    """(model, system prompt) of every chat completion request the mock received."""
    found = []
    for request in mock.requests:
        if not request.path.endswith("/chat/completions"):
            continue
        body = request.body_object()
        messages = body.get("messages")
        assert isinstance(messages, list), body
        system = "\n".join(
            _text(message.get("content"))
            for message in messages
            if isinstance(message, dict) and message.get("role") in ("system", "developer")
        )
        found.append((str(body.get("model")), system))
    return found


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "\n".join(str(p.get("text", "")) for p in parts if isinstance(p, dict))


# --- agents/list -----------------------------------------------------------------------


def layered_definitions(tmp_path: Path) -> dict[str, Path]:
    """Definitions in all four directories, and a configuration file beside each set.

    - `layered` in every directory (the project's subagents/ wins);
    - `thrice` in all but the project's subagents/ (the project's agents/ wins);
    - `twice` in the user's two directories (subagents/ wins);
    - `solo` once, with a `subagent_*` tool that is taken away;
    - `profiled` (user) and `local` (project), each with a model profile in both files;
    - `broken`: fine in the user's agents/, malformed in the project's subagents/.
    """
    user_agents, user_subagents = user_dir(tmp_path) / "agents", user_dir(tmp_path) / "subagents"
    project_agents = project_pi(tmp_path) / "agents"
    project_subagents = project_pi(tmp_path) / "subagents"
    paths: dict[str, Path] = {}
    for key, directory in (
        ("user-agents", user_agents),
        ("user-subagents", user_subagents),
        ("project-agents", project_agents),
        ("project-subagents", project_subagents),
    ):
        paths[f"layered@{key}"] = define(directory, "layered", f"layered in {key}")
    for key, directory in (
        ("user-agents", user_agents),
        ("user-subagents", user_subagents),
        ("project-agents", project_agents),
    ):
        paths[f"thrice@{key}"] = define(directory, "thrice", f"thrice in {key}")
    for key, directory in (("user-agents", user_agents), ("user-subagents", user_subagents)):
        paths[f"twice@{key}"] = define(directory, "twice", f"twice in {key}")
    paths["solo"] = define(
        user_agents,
        "solo",
        "one of a kind",
        "Work alone.",
        model="mock/solo-model",
        effort="low",
        tools="read, subagent_spawn, bash",
        subagent_mode="task",
    )
    paths["profiled"] = define(
        user_agents, "profiled", "a user agent with profiles", model="mock/own", effort="low"
    )
    paths["local"] = define(
        project_agents, "local", "a project agent with profiles", model="mock/own", effort="low"
    )
    paths["broken@user-agents"] = define(user_agents, "broken", "fine here")
    paths["broken@project-subagents"] = define(
        project_subagents, "broken", "malformed here", effort="extreme"
    )
    # Each file profiles both agents: the global file's apply to the user's agents only,
    # the project's file's to the project's agents only.
    write_json(
        user_dir(tmp_path) / "subagents.json",
        {
            "model_profiles": {
                "profiled": {"model": "mock/global-profile", "effort": "high"},
                "local": {"model": "mock/global-profile-for-local", "effort": "off"},
            }
        },
    )
    paths["project-file"] = write_json(
        project_pi(tmp_path) / "subagents.json",
        {
            "model_profiles": {
                "local": {"model": "mock/project-profile", "thinking": "xhigh"},
                "profiled": {"model": "mock/project-profile-for-user", "effort": "off"},
            }
        },
    )
    return paths


def summary(diagnostics: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [(d["severity"], d["code"], d["path"]) for d in diagnostics]


@pytest.mark.parametrize("trust", ["--trust-project", "trusted_projects"])
async def test_agents_list_merges_user_then_trusted_project_definitions(
    tmp_path: Path, trust: str
) -> None:
    paths = layered_definitions(tmp_path)
    if trust == "trusted_projects":
        global_file = user_dir(tmp_path) / "subagents.json"
        settings = json.loads(global_file.read_text())
        write_json(global_file, {**settings, "trusted_projects": [str(project(tmp_path))]})
    env = plain_environment(tmp_path)
    async with agent_server(tmp_path, env, trusted=trust == "--trust-project") as server:
        listing = await result_of(server, "agents/list", {})
        await server.finish()

    assert listing["agents"] == [  # sorted by name; `broken` is blocked
        listed(
            "layered", "project", paths["layered@project-subagents"],
            "layered in project-subagents",
        ),
        listed(
            "local", "project", paths["local"], "a project agent with profiles",
            model="mock/project-profile", effort="xhigh",
        ),
        listed(
            "profiled", "user", paths["profiled"], "a user agent with profiles",
            model="mock/global-profile", effort="high",
        ),
        listed(
            "solo", "user", paths["solo"], "one of a kind",
            model="mock/solo-model", effort="low", tools=["read", "bash"], mode="task",
        ),
        listed("thrice", "project", paths["thrice@project-agents"], "thrice in project-agents"),
        listed("twice", "user", paths["twice@user-subagents"], "twice in user-subagents"),
    ]  # fmt: skip
    assert summary(listing["diagnostics"]) == [  # in discovery order
        ("info", "tools-removed", real(paths["solo"])),
        ("info", "overridden", real(paths["layered@user-subagents"])),
        ("info", "overridden", real(paths["thrice@user-subagents"])),
        ("info", "overridden", real(paths["twice@user-subagents"])),
        ("info", "overridden", real(paths["layered@project-agents"])),
        ("info", "overridden", real(paths["thrice@project-agents"])),
        ("error", "invalid-effort", real(paths["broken@project-subagents"])),
        ("info", "overridden", real(paths["layered@project-subagents"])),
    ]
    blocking = listing["diagnostics"][6]["message"]
    assert "'effort'" in blocking and "'extreme'" in blocking, blocking


async def test_an_untrusted_projects_definitions_and_file_are_not_read(tmp_path: Path) -> None:
    paths = layered_definitions(tmp_path)
    async with agent_server(tmp_path, plain_environment(tmp_path), trusted=False) as server:
        listing = await result_of(server, "agents/list", {})
        await server.finish()

    assert listing["agents"] == [  # no project agent, and the user's `broken` is not blocked
        listed("broken", "user", paths["broken@user-agents"], "fine here"),
        listed("layered", "user", paths["layered@user-subagents"], "layered in user-subagents"),
        listed(
            "profiled", "user", paths["profiled"], "a user agent with profiles",
            model="mock/global-profile", effort="high",
        ),
        listed(
            "solo", "user", paths["solo"], "one of a kind",
            model="mock/solo-model", effort="low", tools=["read", "bash"], mode="task",
        ),
        listed("thrice", "user", paths["thrice@user-subagents"], "thrice in user-subagents"),
        listed("twice", "user", paths["twice@user-subagents"], "twice in user-subagents"),
    ]  # fmt: skip
    assert summary(listing["diagnostics"]) == [
        ("info", "tools-removed", real(paths["solo"])),
        ("info", "overridden", real(paths["layered@user-subagents"])),
        ("info", "overridden", real(paths["thrice@user-subagents"])),
        ("info", "overridden", real(paths["twice@user-subagents"])),
        ("info", "untrusted-project", str(Path(real(project(tmp_path))) / ".pi/subagents.json")),
    ]


# --- spawn {agent} ---------------------------------------------------------------------

REVIEWER_BODY: Final = "You are the REVIEWER-7Q agent.\nFind bugs; be terse."
SCOUT_BODY: Final = "You are the SCOUT-3K agent.\nLook, never touch."


@with_pi
async def test_a_spawned_agent_runs_pi_with_its_instructions_model_and_tools(
    tmp_path: Path, mock: MockLLM
) -> None:
    env = pi_environment(tmp_path, mock.openai_base_url)
    add_models(env, "definition-model", "profile-model")
    agents = user_dir(tmp_path) / "agents"
    define(
        agents,
        "scout",
        "looks around",
        SCOUT_BODY,
        model="mock/definition-model",
        tools="read, subagent_spawn",
    )
    define(agents, "reviewer", "reviews", REVIEWER_BODY, model="mock/definition-model")
    write_json(
        user_dir(tmp_path) / "subagents.json",
        {"model_profiles": {"reviewer": {"model": "mock/profile-model"}}},
    )
    async with agent_server(tmp_path, env) as server:
        # What pi is given, as preflight shows it; a request's own model beats the profile.
        checked = await result_of(server, "preflight", {"agent": "scout", "prompt": START})
        argv = checked["plan"]["children"][0]["argv"]
        assert argv[argv.index("--append-system-prompt") + 1] == SCOUT_BODY + "\n", argv
        assert argv[argv.index("--tools") + 1] == "read", argv  # subagent_spawn taken away
        chosen = await result_of(
            server, "preflight", {"agent": "reviewer", "prompt": START, "model": MOCK_MODEL}
        )
        assert chosen["plan"]["children"][0]["model"] == MOCK_MODEL, chosen

        for agent in ("scout", "reviewer"):
            run = await launched(server, agent)
            assert run["children"][0]["output"]["text"].startswith("MOCK-FINAL:"), run
        await server.finish()

    seen = chat_requests(mock)
    assert len(seen) == 2, seen  # one answer each: ANSWER-NOW
    (scout_model, scout_system), (reviewer_model, reviewer_system) = seen
    assert scout_model == "definition-model" and SCOUT_BODY in scout_system, seen[0]
    assert reviewer_model == "profile-model" and REVIEWER_BODY in reviewer_system, seen[1]
    assert SCOUT_BODY not in reviewer_system
    scout_request: dict[str, Any] = json.loads(mock.requests_containing("SCOUT-3K")[0].raw_body)
    assert [tool["function"]["name"] for tool in scout_request["tools"]] == ["read"]


# --- protected resume of an agent's run ----------------------------------------------


@with_pi
async def test_an_unchanged_definition_is_resumed_with_its_instructions(
    tmp_path: Path, mock: MockLLM
) -> None:
    env = pi_environment(tmp_path, mock.openai_base_url)
    path = define(user_dir(tmp_path) / "agents", "keeper", "kept", REVIEWER_BODY, model=MOCK_MODEL)
    async with agent_server(tmp_path, env) as server:
        run = await launched(server, "keeper")
        approved = await approve(server, {"runId": run["runId"], "message": FOLLOW_UP})
        assert approved["contract"]["projection"]["agent"] == reference("keeper", "user", path)
        again = await result_of(server, "resume", {"token": approved["token"], "mode": "task"})
        assert again["status"] == "completed" and again["children"][0]["attempt"] == 2, again
        await server.finish()

    (_, first), (_, second) = chat_requests(mock)
    assert REVIEWER_BODY in first and REVIEWER_BODY in second
    assert "and now?" in mock.requests[-1].raw_body


def shadow_in_project(tmp_path: Path, name: str, launched_from: Path) -> None:
    define(project_pi(tmp_path) / "agents", name, "the project's own", "Other rules.")


def shadow_in_user_subagents(tmp_path: Path, name: str, launched_from: Path) -> None:
    define(user_dir(tmp_path) / "subagents", name, "a later user directory", "Other rules.")


def edit(tmp_path: Path, name: str, launched_from: Path) -> None:
    launched_from.write_text(launched_from.read_text() + "One more rule.\n")


def delete(tmp_path: Path, name: str, launched_from: Path) -> None:
    launched_from.unlink()


def block(tmp_path: Path, name: str, launched_from: Path) -> None:
    define(project_pi(tmp_path) / "subagents", name, "malformed", subagent_mode="sometimes")


CHANGES: Final = {
    "shadowed-by-project": (shadow_in_project, "agent-definition-shadowed"),
    "shadowed-by-user-subagents": (shadow_in_user_subagents, "agent-definition-shadowed"),
    "edited": (edit, "agent-definition-changed"),
    "deleted": (delete, "agent-definition-gone"),
    "blocked": (block, "agent-definition-blocked"),
}


@with_pi
@pytest.mark.parametrize("change", list(CHANGES))
async def test_a_resume_is_refused_when_its_definition_changed_since_launch(
    tmp_path: Path, mock: MockLLM, change: str
) -> None:
    """Both the preflight and a token issued before the change refuse; nothing starts."""
    alter, code = CHANGES[change]
    env = pi_environment(tmp_path, mock.openai_base_url)
    path = define(
        user_dir(tmp_path) / "agents", "worker", "works", "Do the work.", model=MOCK_MODEL
    )
    async with agent_server(tmp_path, env) as server:
        run = await launched(server, "worker")
        run_id = run["runId"]
        early = await approve(server, {"runId": run_id, "message": FOLLOW_UP})
        alter(tmp_path, "worker", path)
        before = await observe(server, run_id)

        result = await refused(server, {"runId": run_id, "message": FOLLOW_UP}, code)
        assert [d["code"] for d in result["diagnostics"]] == [code], result
        error = await denied(server, early["token"])
        assert error["code"] == RESUME_DENIED
        assert (error["data"]["reason"], error["data"]["code"]) == ("not-resumable", code), error
        await assert_nothing_started(server, run_id, before)
        await server.finish()
    assert len(chat_requests(mock)) == 1  # the launch's turn only


@with_pi
async def test_a_project_agent_still_wins_over_a_later_user_definition_of_its_name(
    tmp_path: Path, mock: MockLLM
) -> None:
    env = pi_environment(tmp_path, mock.openai_base_url)
    path = define(
        project_pi(tmp_path) / "agents", "builder", "builds", "Build it.", model=MOCK_MODEL
    )
    async with agent_server(tmp_path, env) as server:
        run = await launched(server, "builder")
        define(user_dir(tmp_path) / "agents", "builder", "the user's", "Other rules.")
        listing = await result_of(server, "agents/list", {})
        assert [(a["name"], a["path"]) for a in listing["agents"]] == [("builder", real(path))]
        approved = await approve(server, {"runId": run["runId"], "message": FOLLOW_UP})
        assert approved["contract"]["projection"]["agent"] == reference("builder", "project", path)
        again = await result_of(server, "resume", {"token": approved["token"], "mode": "task"})
        assert again["status"] == "completed" and again["children"][0]["attempt"] == 2, again
        await server.finish()
    assert ["Build it." in system for _, system in chat_requests(mock)] == [True, True]


def disable_in_project(tmp_path: Path) -> bool:
    """The project's file enables only another agent (protocol.md §19); still trusted."""
    write_json(project_pi(tmp_path) / "subagents.json", {"agents": {"enabled": ["other"]}})
    return True


def distrust(tmp_path: Path) -> bool:
    return False


# How a later server cannot use the agent a run was launched from: (the change, which
# says whether the project stays trusted; the refusal's code).
CANNOT_USE: Final = {
    "the project is not trusted": (distrust, "agent-definition-gone"),
    "the project disables it": (disable_in_project, "agent-disabled"),
}


@with_pi
@pytest.mark.parametrize("case", list(CANNOT_USE))
async def test_a_project_agents_run_is_not_resumed_by_a_server_that_cannot_use_it_now(
    tmp_path: Path, mock: MockLLM, case: str
) -> None:
    alter, code = CANNOT_USE[case]
    env = pi_environment(tmp_path, mock.openai_base_url)
    define(project_pi(tmp_path) / "agents", "builder", "builds", "Build it.", model=MOCK_MODEL)
    async with agent_server(tmp_path, env) as server:
        run = await launched(server, "builder")
        await server.finish()
    trusted = alter(tmp_path)
    async with agent_server(tmp_path, env, trusted=trusted) as server:  # same state, session
        before = await observe(server, run["runId"])
        resume = {"runId": run["runId"], "message": FOLLOW_UP}
        result = await refused(server, resume, code)
        assert [d["code"] for d in result["diagnostics"]] == [code], result
        await assert_nothing_started(server, run["runId"], before)
        await server.finish()
    (project_pi(tmp_path) / "subagents.json").unlink(missing_ok=True)
    async with agent_server(tmp_path, env) as server:  # usable again: resumable again
        await approve(server, resume)
        await server.finish()


@with_pi
async def test_enable_continue_false_refuses_every_resume(tmp_path: Path, mock: MockLLM) -> None:
    env = pi_environment(tmp_path, mock.openai_base_url)
    define(user_dir(tmp_path) / "agents", "worker", "works", "Do the work.", model=MOCK_MODEL)
    write_json(user_dir(tmp_path) / "subagents.json", {"enable_continue": False})
    async with agent_server(tmp_path, env) as server:
        run = await launched(server, "worker")
        before = await observe(server, run["runId"])
        await refused(server, {"runId": run["runId"], "message": FOLLOW_UP}, "resume-disabled")
        await assert_nothing_started(server, run["runId"], before)
        await server.finish()


# --- configuration files and the command line ------------------------------------------

# Each file sets default_effort and max_concurrency: global low/3, project medium/5 (read
# only when trusted), --config high/6. Per case: (project trusted, --config given, more
# options, the request's thinking) and then the expected (thinking, limits.maxConcurrency).
PRECEDENCE: Final[dict[str, tuple[bool, bool, tuple[str, ...], str | None, str, int]]] = {
    "global file": (False, False, (), None, "low", 3),
    "project file": (True, False, (), None, "medium", 5),
    "--config file": (True, True, (), None, "high", 6),
    "request and command line": (True, True, ("--max-concurrency", "7"), "minimal", "minimal", 7),
}


@with_pi
@pytest.mark.parametrize("case", list(PRECEDENCE))
async def test_settings_merge_global_then_project_then_config_then_command_line_and_request(
    tmp_path: Path, mock: MockLLM, case: str
) -> None:
    trusted, explicit, options, thinking, expected_thinking, expected_concurrency = PRECEDENCE[case]
    write_json(
        user_dir(tmp_path) / "subagents.json", {"default_effort": "low", "max_concurrency": 3}
    )
    write_json(
        project_pi(tmp_path) / "subagents.json", {"default_effort": "medium", "max_concurrency": 5}
    )
    config = write_json(
        tmp_path / "explicit.json", {"default_effort": "high", "max_concurrency": 6}
    )
    extra = (*(("--config", str(config)) if explicit else ()), *options)
    request: dict[str, Any] = {"prompt": "hello", "model": MOCK_MODEL}
    if thinking is not None:
        request["thinking"] = thinking
    env = pi_environment(tmp_path, mock.openai_base_url)
    async with agent_server(tmp_path, env, *extra, trusted=trusted) as server:
        checked = await result_of(server, "preflight", request)
        pong = await result_of(server, "ping", {})
        await server.finish()

    assert checked["accepted"] is True, checked
    child = checked["plan"]["children"][0]
    assert child["thinking"] == expected_thinking, child
    assert child["argv"][child["argv"].index("--thinking") + 1] == expected_thinking, child
    assert pong["limits"]["maxConcurrency"] == expected_concurrency, pong
    assert mock.requests == []  # a preflight talks to no model


# --- an agent in a workflow ------------------------------------------------------------


@with_pi
async def test_a_workflow_fans_an_agent_out_over_a_produced_list(
    tmp_path: Path, mock: MockLLM
) -> None:
    """The worked example of protocol.md §17, with pi: a command lists the files, the
    agent runs once per file with `{item}` in its prompt, a last step gathers."""
    env = pi_environment(tmp_path, mock.openai_base_url)
    define(user_dir(tmp_path) / "agents", "reviewer", "reviews", REVIEWER_BODY, model=MOCK_MODEL)
    workflow = {
        "name": "review",
        "task": "app.py db.py",
        "chain": [
            {
                "command": [
                    "python3",
                    "-c",
                    "import json,sys; print(json.dumps(sys.argv[1].split()))",
                    "{task}",
                ],
                "as": "files",
            },  # fmt: skip
            {
                "forEach": "{outputs.files}",
                "as": "reviews",
                "item": {
                    "agent": "reviewer",
                    "prompt": f"{KEYWORD_ANSWER_NOW} review FILE-{{item}} (number {{index}})",
                    "label": "review {item}",
                },
            },
            {"command": ["python3", "-c", "import sys; print(sys.argv[1])", "{outputs.reviews}"]},
        ],
    }
    async with agent_server(tmp_path, env) as server:
        run = await result_of(server, "spawn", {"workflow": workflow, "mode": "task"})
        assert run["status"] == "completed", run
        labels = [child.get("label") for child in run["children"]]
        assert labels == [None, "review app.py", "review db.py", None], labels
        assert [child["backend"] for child in run["children"]] == [
            "command", "pi", "pi", "command"
        ]  # fmt: skip
        gathered = json.loads(run["output"]["text"])
        assert len(gathered) == 2 and all(text.startswith("MOCK-FINAL:") for text in gathered)
        await server.finish()

    seen = chat_requests(mock)
    assert len(seen) == 2 and all(REVIEWER_BODY in system for _, system in seen), seen
    assert len(mock.requests_containing("FILE-app.py (number 0)")) == 1
    assert len(mock.requests_containing("FILE-db.py (number 1)")) == 1


async def test_agents_list_holds_no_definition_that_cannot_run_and_few_repeated_diagnostics(
    tmp_path: Path,
) -> None:
    agents = user_dir(tmp_path) / "agents"
    fine = define(agents, "fine", "runs")
    nul = define(agents, "nul", "a NUL in its body", "Do\0 it.")
    big = define(agents, "big", "too large a body", "x" * (128 * 1024 + 1))
    repeated = agents / "repeated.md"  # 50,000 lines that each repeat one key
    repeated.write_text("---\nname: repeated\ndescription: d\n" + "a: 1\n" * 50_000 + "---\nGo.\n")
    async with agent_server(tmp_path, plain_environment(tmp_path)) as server:
        listing = await result_of(server, "agents/list", {})
        await server.finish()

    assert [agent["name"] for agent in listing["agents"]] == ["fine"]
    assert listing["agents"][0]["path"] == real(fine)
    by_code: dict[str, int] = {}
    for diagnostic in listing["diagnostics"]:
        by_code[diagnostic["code"]] = by_code.get(diagnostic["code"], 0) + 1
    assert by_code == {
        "instructions-too-large": 1,
        "invalid-instructions": 1,
        "duplicate-field": 11,  # ten, and one that counts the rest
        "unknown-field": 1,
    }
    paths = {d["code"]: d["path"] for d in listing["diagnostics"]}
    assert paths["invalid-instructions"] == real(nul)
    assert paths["instructions-too-large"] == real(big)
    assert "49989 more 'duplicate-field' problems" in listing["diagnostics"][-2]["message"]
