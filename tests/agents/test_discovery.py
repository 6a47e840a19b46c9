"""Finding definitions on disk: search order, overrides, blocking and unreadable files."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import attrs
import pytest

from subagent_host.agents.definitions import (
    MAX_INSTRUCTIONS_BYTES,
    AgentDefinition,
    DefinitionDiagnostic,
)
from subagent_host.agents.discovery import (
    MAX_DEFINITION_BYTES,
    AgentCatalog,
    discover,
    search_path,
)
from subagent_host.values.choices import AgentSource


@attrs.frozen
class Dirs:
    user: Path
    project: Path

    @property
    def user_agents(self) -> Path:
        return self.user / "agents"

    @property
    def user_subagents(self) -> Path:
        return self.user / "subagents"

    @property
    def project_agents(self) -> Path:
        return self.project / ".pi" / "agents"

    @property
    def project_subagents(self) -> Path:
        return self.project / ".pi" / "subagents"


@pytest.fixture
def dirs(tmp_path: Path) -> Dirs:
    return Dirs(tmp_path / "user", tmp_path / "repo")


def write(directory: Path, file_name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / file_name
    path.write_text(text)
    return path


def agent(name: str, *, extra: str = "", body: str = "Work.", description: str = "d") -> str:
    return f"---\nname: {name}\ndescription: {description}\n{extra}---\n{body}\n"


def found(catalog: AgentCatalog) -> list[tuple[str, str, str]]:
    """Every diagnostic as (severity, code, name)."""
    return [(d.severity, d.code, d.name or "") for d in catalog.diagnostics]


def usable(catalog: AgentCatalog, name: str) -> AgentDefinition:
    definition = catalog.lookup(name)
    assert isinstance(definition, AgentDefinition)
    return definition


def blocker(catalog: AgentCatalog, name: str) -> DefinitionDiagnostic:
    diagnostic = catalog.lookup(name)
    assert isinstance(diagnostic, DefinitionDiagnostic)
    assert name.lower() not in catalog.agents
    assert catalog.blocked[name.lower()] is diagnostic
    return diagnostic


def test_search_path_is_user_then_trusted_project(tmp_path: Path) -> None:
    user, project = tmp_path / "u", tmp_path / "p"

    assert search_path(user, project) == [
        ("user", user / "agents"),
        ("user", user / "subagents"),
        ("project", project / ".pi" / "agents"),
        ("project", project / ".pi" / "subagents"),
    ]
    assert search_path(user, None) == [("user", user / "agents"), ("user", user / "subagents")]


def test_nothing_on_disk_gives_an_empty_catalog_listing_the_searched_directories(
    dirs: Dirs,
) -> None:
    catalog = discover(dirs.user, dirs.project)

    assert catalog == AgentCatalog(
        agents={},
        blocked={},
        diagnostics=(),
        directories=(
            ("user", str(dirs.user_agents)),
            ("user", str(dirs.user_subagents)),
            ("project", str(dirs.project_agents)),
            ("project", str(dirs.project_subagents)),
        ),
    )


def test_a_definition_is_found_with_its_source_realpath_and_digest(dirs: Dirs) -> None:
    text = agent("reviewer", extra="tools: read, grep\n")
    path = write(dirs.user_agents, "reviewer.md", text)

    catalog = discover(dirs.user, None)

    assert catalog.agents == {
        "reviewer": AgentDefinition(
            name="reviewer",
            description="d",
            instructions="Work.",
            source=AgentSource.USER,
            path=os.path.realpath(path),
            digest="sha256:v1:" + hashlib.sha256(text.encode()).hexdigest(),
            tools=("read", "grep"),
        )
    }
    assert catalog.diagnostics == ()
    assert catalog.blocked == {}


def test_project_definitions_have_the_project_source(dirs: Dirs) -> None:
    write(dirs.project_subagents, "a.md", agent("a"))

    assert usable(discover(dirs.user, dirs.project), "a").source == "project"


def test_project_directories_are_ignored_without_a_trusted_project(dirs: Dirs) -> None:
    write(dirs.project_agents, "local.md", agent("local"))
    write(dirs.project_subagents, "broken.md", "no frontmatter")

    catalog = discover(dirs.user, None)

    assert catalog.agents == {}
    assert catalog.diagnostics == ()
    assert catalog.directories == (
        ("user", str(dirs.user_agents)),
        ("user", str(dirs.user_subagents)),
    )


def test_later_directories_override_earlier_ones_in_search_order(dirs: Dirs) -> None:
    paths = [
        write(directory, "same.md", agent("same", body=f"from {label}"))
        for label, directory in [
            ("user agents", dirs.user_agents),
            ("user subagents", dirs.user_subagents),
            ("project agents", dirs.project_agents),
            ("project subagents", dirs.project_subagents),
        ]
    ]
    real = [os.path.realpath(path) for path in paths]

    catalog = discover(dirs.user, dirs.project)

    assert usable(catalog, "same").instructions == "from project subagents"
    assert usable(catalog, "same").path == real[3]
    assert [(d.code, d.path, d.message) for d in catalog.diagnostics] == [
        ("overridden", real[i + 1], f"{real[i + 1]}: agent 'same' replaces the one in {real[i]}")
        for i in range(3)
    ]
    assert {d.severity for d in catalog.diagnostics} == {"info"}


def test_each_step_of_the_search_order_wins_over_the_one_before(dirs: Dirs) -> None:
    write(dirs.user_agents, "x.md", agent("x", body="user agents"))
    assert usable(discover(dirs.user, dirs.project), "x").instructions == "user agents"

    write(dirs.user_subagents, "x.md", agent("x", body="user subagents"))
    assert usable(discover(dirs.user, dirs.project), "x").instructions == "user subagents"

    write(dirs.project_agents, "x.md", agent("x", body="project agents"))
    assert usable(discover(dirs.user, dirs.project), "x").instructions == "project agents"
    assert usable(discover(dirs.user, None), "x").instructions == "user subagents"


def test_override_matches_names_case_insensitively_across_file_names(dirs: Dirs) -> None:
    write(dirs.user_agents, "reviewer.md", agent("reviewer", body="old"))
    write(dirs.project_agents, "my-review.md", agent("Reviewer", body="new"))

    catalog = discover(dirs.user, dirs.project)

    assert list(catalog.agents) == ["reviewer"]
    assert usable(catalog, "reviewer").name == "Reviewer"
    assert usable(catalog, "reviewer").instructions == "new"
    assert found(catalog) == [("info", "overridden", "Reviewer")]


def test_lookup_is_case_insensitive_and_unknown_names_are_none(dirs: Dirs) -> None:
    write(dirs.user_agents, "r.md", agent("Code.Reviewer"))

    catalog = discover(dirs.user, None)

    assert usable(catalog, "code.reviewer").name == "Code.Reviewer"
    assert usable(catalog, "CODE.REVIEWER") is usable(catalog, "Code.Reviewer")
    assert catalog.lookup("reviewer") is None
    assert catalog.lookup("r") is None  # the file stem is not the name


def test_a_malformed_later_definition_blocks_the_earlier_valid_one(dirs: Dirs) -> None:
    write(dirs.user_agents, "reviewer.md", agent("reviewer"))
    bad = write(dirs.project_agents, "reviewer.md", agent("Reviewer", extra="effort: huge\n"))

    catalog = discover(dirs.user, dirs.project)

    diagnostic = blocker(catalog, "REVIEWER")
    assert diagnostic == DefinitionDiagnostic(
        "error",
        "invalid-effort",
        f"{os.path.realpath(bad)}: field 'effort' is 'huge': "
        "expected one of off, minimal, low, medium, high, xhigh, max",
        os.path.realpath(bad),
        "Reviewer",
    )
    assert catalog.agents == {}
    assert found(catalog) == [("error", "invalid-effort", "Reviewer")]


def test_a_malformed_file_without_a_valid_name_blocks_its_stem(dirs: Dirs) -> None:
    write(dirs.user_agents, "helper.md", agent("helper"))
    write(dirs.user_subagents, "Helper.md", agent("not a valid name"))

    catalog = discover(dirs.user, None)

    diagnostic = blocker(catalog, "helper")
    assert (diagnostic.code, diagnostic.name) == ("invalid-name", "Helper")


def test_a_file_without_frontmatter_blocks_its_stem(dirs: Dirs) -> None:
    write(dirs.user_agents, "notes.md", agent("notes"))
    write(dirs.user_subagents, "notes.md", "# Just notes\n")

    catalog = discover(dirs.user, None)

    assert (blocker(catalog, "notes").code, blocker(catalog, "notes").name) == (
        "no-frontmatter",
        "notes",
    )


def test_a_later_valid_definition_unblocks_a_name(dirs: Dirs) -> None:
    write(dirs.user_agents, "x.md", agent("x", extra="model: nope\n"))
    write(dirs.project_agents, "x.md", agent("x", body="fixed"))

    catalog = discover(dirs.user, dirs.project)

    assert usable(catalog, "x").instructions == "fixed"
    assert catalog.blocked == {}
    # The broken file is still reported, and nothing was overridden (it was never usable).
    assert found(catalog) == [("error", "invalid-model", "x")]


def test_warnings_do_not_block(dirs: Dirs) -> None:
    write(dirs.user_agents, "x.md", "---\nname: x\ncolor: red\n---\nbody\n")

    catalog = discover(dirs.user, None)

    assert usable(catalog, "x").description == ""
    assert found(catalog) == [
        ("warning", "missing-description", "x"),
        ("warning", "unknown-field", "x"),
    ]


def test_two_files_in_one_directory_with_the_same_name_are_both_unusable(dirs: Dirs) -> None:
    write(dirs.user_agents, "helper.md", agent("helper", body="earlier directory"))
    first = write(dirs.project_agents, "a.md", agent("helper"))
    second = write(dirs.project_agents, "b.md", agent("HELPER"))
    write(dirs.project_agents, "other.md", agent("other"))

    catalog = discover(dirs.user, dirs.project)

    diagnostic = blocker(catalog, "Helper")
    real = (os.path.realpath(first), os.path.realpath(second))
    assert diagnostic == DefinitionDiagnostic(
        "error",
        "duplicate",
        f"agent 'HELPER' is defined by 2 files in one directory ({real[0]}, {real[1]}): "
        "none of them is used",
        real[1],
        "HELPER",
    )
    assert list(catalog.agents) == ["other"]
    assert found(catalog) == [("error", "duplicate", "HELPER")]


def test_duplicates_across_the_two_directories_of_a_source_are_overrides(dirs: Dirs) -> None:
    write(dirs.user_agents, "a.md", agent("a", body="agents"))
    write(dirs.user_subagents, "a.md", agent("a", body="subagents"))

    catalog = discover(dirs.user, None)

    assert usable(catalog, "a").instructions == "subagents"
    assert found(catalog) == [("info", "overridden", "a")]


def test_a_malformed_file_counts_towards_duplicates(dirs: Dirs) -> None:
    write(dirs.user_agents, "a.md", agent("x"))
    write(dirs.user_agents, "x.md", "no frontmatter\n")

    catalog = discover(dirs.user, None)

    assert blocker(catalog, "x").code == "duplicate"
    assert found(catalog) == [("error", "no-frontmatter", "x"), ("error", "duplicate", "x")]


def test_files_are_read_in_name_order_and_diagnostics_keep_that_order(dirs: Dirs) -> None:
    for stem in ["c", "a", "B", "d"]:
        write(dirs.user_agents, f"{stem}.md", f"---\nname: {stem}1\n---\n")

    catalog = discover(dirs.user, None)

    # Code point order: upper case sorts before lower case.
    assert [d.name for d in catalog.diagnostics] == ["B1", "a1", "c1", "d1"]
    assert [d.code for d in catalog.diagnostics] == ["missing-description"] * 4
    assert list(catalog.agents) == ["b1", "a1", "c1", "d1"]


def test_only_visible_markdown_files_at_the_top_level_are_read(dirs: Dirs) -> None:
    write(dirs.user_agents, "real.md", agent("real"))
    write(dirs.user_agents, ".hidden.md", agent("hidden"))
    write(dirs.user_agents, "notes.txt", agent("text"))
    write(dirs.user_agents, "upper.MD", agent("upper"))
    write(dirs.user_agents, "README", agent("readme"))
    write(dirs.user_agents / "nested", "deep.md", agent("deep"))
    (dirs.user_agents / "folder.md").mkdir()

    catalog = discover(dirs.user, None)

    assert list(catalog.agents) == ["real"]
    assert catalog.diagnostics == ()


def test_symlinked_files_are_followed_and_recorded_by_realpath(dirs: Dirs, tmp_path: Path) -> None:
    target = write(tmp_path / "shared", "actual-file.md", agent("linked"))
    dirs.user_agents.mkdir(parents=True)
    (dirs.user_agents / "linked.md").symlink_to(target)

    catalog = discover(dirs.user, None)

    assert usable(catalog, "linked").path == str(target.resolve())
    assert usable(catalog, "linked").path != str(dirs.user_agents / "linked.md")


def test_a_symlinked_directory_is_followed(dirs: Dirs, tmp_path: Path) -> None:
    target = write(tmp_path / "elsewhere", "a.md", agent("a"))
    dirs.user.mkdir()
    dirs.user_agents.symlink_to(tmp_path / "elsewhere")

    assert usable(discover(dirs.user, None), "a").path == str(target.resolve())


def test_a_broken_symlink_is_unreadable_and_blocks_its_stem(dirs: Dirs, tmp_path: Path) -> None:
    write(dirs.user_agents, "gone.md", agent("gone"))
    dirs.user_subagents.mkdir(parents=True)
    (dirs.user_subagents / "gone.md").symlink_to(tmp_path / "missing.md")

    catalog = discover(dirs.user, None)

    diagnostic = blocker(catalog, "gone")
    assert (diagnostic.severity, diagnostic.code, diagnostic.name) == (
        "error",
        "unreadable",
        "gone",
    )
    assert diagnostic.path == str(tmp_path / "missing.md")


def test_non_utf8_file_is_unreadable_and_blocks_its_stem(dirs: Dirs) -> None:
    write(dirs.user_agents, "Latin.md", agent("latin"))
    dirs.user_subagents.mkdir(parents=True)
    (dirs.user_subagents / "Latin.md").write_bytes(b"---\nname: latin\ndescription: \xe9\n---\n")

    catalog = discover(dirs.user, None)

    diagnostic = blocker(catalog, "latin")
    assert (diagnostic.code, diagnostic.name) == ("unreadable", "Latin")
    assert "not UTF-8" in diagnostic.message


@pytest.mark.skipif(
    hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads files whatever their mode"
)
def test_a_file_without_read_permission_is_unreadable(dirs: Dirs) -> None:
    path = write(dirs.user_agents, "secret.md", agent("secret"))
    path.chmod(0)
    try:
        catalog = discover(dirs.user, None)
    finally:
        path.chmod(0o644)

    diagnostic = blocker(catalog, "secret")
    assert (diagnostic.severity, diagnostic.code) == ("error", "unreadable")
    assert diagnostic.message.startswith(f"{os.path.realpath(path)}: cannot read: ")


def test_a_file_over_the_size_cap_is_too_large(dirs: Dirs) -> None:
    header = agent("big", body="")
    write(dirs.user_agents, "big.md", agent("big"))
    path = write(
        dirs.user_subagents, "big.md", header + "x" * (MAX_DEFINITION_BYTES + 1 - len(header))
    )
    assert path.stat().st_size == 256 * 1024 + 1

    catalog = discover(dirs.user, None)

    assert blocker(catalog, "big") == DefinitionDiagnostic(
        "error",
        "too-large",
        f"{os.path.realpath(path)}: larger than 262144 bytes, the limit for a definition",
        os.path.realpath(path),
        "big",
    )


def test_a_file_exactly_at_the_size_cap_is_read(dirs: Dirs) -> None:
    # The largest instructions there can be, and a frontmatter comment filling the rest.
    body = "x" * MAX_INSTRUCTIONS_BYTES
    header = agent("big", extra="# \n", body=body)
    padding = "#" * (MAX_DEFINITION_BYTES - len(header))
    path = write(dirs.user_agents, "big.md", agent("big", extra=f"# {padding}\n", body=body))
    assert path.stat().st_size == MAX_DEFINITION_BYTES

    catalog = discover(dirs.user, None)

    assert usable(catalog, "big").instructions == body


def test_definitions_no_agent_cli_could_run_are_not_usable(dirs: Dirs) -> None:
    write(dirs.user_agents, "nul.md", agent("nul", body="Do\0 it."))
    write(dirs.user_agents, "big.md", agent("big", body="x" * (MAX_INSTRUCTIONS_BYTES + 1)))
    write(dirs.user_agents, "fine.md", agent("fine"))

    catalog = discover(dirs.user, None)

    assert sorted(catalog.agents) == ["fine"]
    assert found(catalog) == [
        ("error", "instructions-too-large", "big"),
        ("error", "invalid-instructions", "nul"),
    ]
    assert blocker(catalog, "nul").code == "invalid-instructions"
    assert blocker(catalog, "big").code == "instructions-too-large"


def test_a_search_path_entry_that_is_a_file_is_a_warning(dirs: Dirs) -> None:
    dirs.user.mkdir()
    dirs.user_agents.write_text("not a directory")
    write(dirs.user_subagents, "a.md", agent("a"))

    catalog = discover(dirs.user, None)

    assert catalog.diagnostics == (
        DefinitionDiagnostic(
            "warning",
            "unreadable",
            f"{os.path.realpath(dirs.user_agents)}: cannot list agent definitions: "
            f"[Errno 20] Not a directory: '{dirs.user_agents}'",
            os.path.realpath(dirs.user_agents),
            None,
        ),
    )
    assert list(catalog.agents) == ["a"]


def test_a_fifo_named_like_a_definition_is_skipped_without_hanging(dirs: Dirs) -> None:
    dirs.user_agents.mkdir(parents=True)
    os.mkfifo(dirs.user_agents / "pipe.md")
    write(dirs.user_agents, "real.md", agent("real"))

    catalog = discover(dirs.user, None)

    assert list(catalog.agents) == ["real"]
    assert catalog.blocked == {}
    assert found(catalog) == [("warning", "unreadable", "")]
    assert catalog.diagnostics[0].message.endswith("pipe.md: not a regular file")


def test_the_catalog_cannot_be_changed(dirs: Dirs) -> None:
    write(dirs.user_agents, "a.md", agent("a"))
    catalog = discover(dirs.user, None)

    with pytest.raises(TypeError):
        catalog.agents["b"] = usable(catalog, "a")  # type: ignore[index]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        catalog.agents = {}  # type: ignore[misc]
