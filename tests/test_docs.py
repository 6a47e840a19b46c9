"""The README's quick start is what CI runs, and protocol.md's examples stay true."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def quick_start_lines() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.+?)\n```", section)


def test_readme_quick_start_runs_a_command_then_shows_the_protocol_then_the_tests() -> None:
    install_and_run, protocol, install_and_test = quick_start_lines()
    assert "subagent-host run -- echo" in install_and_run
    assert "subagent-host" in protocol and '"method":"spawn"' in protocol
    assert install_and_test.endswith("/pytest")


def test_ci_runs_the_readme_test_line_verbatim() -> None:
    *_, install_and_test = quick_start_lines()
    assert install_and_test in (ROOT / ".ci" / "run").read_text().splitlines()


def test_readme_quick_start_runs_a_real_command() -> None:
    import json
    import subprocess

    from tests.e2e.harness import assert_conforming, server_executable

    _, protocol, _ = quick_start_lines()
    request = protocol.split("printf '%s\\n' '", 1)[1].split("' |", 1)[0]
    done = subprocess.run(  # noqa: TID251 - the quick start's own pipeline, once
        [server_executable()], input=request.encode() + b"\n", capture_output=True, timeout=60
    )
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    assert done.returncode == 0
    assert_conforming([json.loads(request)], replies)
    assert replies[-1]["result"]["output"]["text"] == "hello from a subagent\n"


def test_readme_python_example_runs_as_it_is(tmp_path: Path) -> None:
    import subprocess
    import sys

    readme = (ROOT / "README.md").read_text()
    (example,) = re.findall(r"```python\n(.+?)\n```", readme, re.S)
    script = tmp_path / "example.py"
    script.write_text(example)
    done = subprocess.run(  # noqa: TID251 - the example as a reader runs it, once
        [sys.executable, str(script)], capture_output=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr.decode()
    lines = done.stdout.decode().splitlines()
    assert lines[:2] == ["protocol 1 limits 1000", "completed hi"]
    events = [line.split(" ", 1)[1] for line in lines[2:-3]]
    assert events[-1] == "status completed"
    assert events.index("output one") < events.index("output two")
    assert lines[-3:] == [
        "completed True",
        "completed ['hello', 'again']",
        "-32001 no run 'no-such-run' in this session",
    ]


def test_protocol_md_lists_every_contract_error_code() -> None:
    text = (ROOT / "protocol.md").read_text()
    for code in (-32700, -32600, -32601, -32602, -32603, -32800, -32001, -32002, -32003,
                 -32004, -32005, -32006):  # fmt: skip
        assert f"| {code} |" in text


def _named_paths(text: str) -> set[str]:
    """Package directories (`name/`) and modules (`name.py`) a document names."""
    return set(re.findall(r"\b([a-z_]+/|[a-z_]+\.py)(?=[\s,`*:)])", text))


def test_the_readme_layout_and_architecture_name_only_modules_that_exist() -> None:
    layout = (ROOT / "README.md").read_text().split("Layout (", 1)[1].split("```", 2)[1]
    architecture = (ROOT / "ARCHITECTURE.md").read_text()
    package = ROOT / "subagent_host"
    # Packages nested in another (rpc/wire/) count as well as top-level ones.
    existing = {path.parent.name + "/" for path in package.rglob("__init__.py")} | {
        path.name for path in package.rglob("*.py")
    }
    others = {"tests/", "bench/", "agents/", "subagent_host/", "scripts/", "schema/"}
    others |= {path.name for path in (ROOT / "bench").glob("*.py")}
    others |= {path.name for path in (ROOT / "tests").rglob("*.py")}
    others |= {path.name + "/" for path in (ROOT / "tests").iterdir() if path.is_dir()}
    for text in (layout, architecture):
        assert _named_paths(text) - existing - others == set()
    # And the layout names every package of ours.
    packages = {path.name + "/" for path in package.iterdir() if (path / "__init__.py").exists()}
    assert packages <= _named_paths(layout)


def test_every_section_protocol_md_refers_to_has_its_heading() -> None:
    """A `§N` or `§N.M` in protocol.md or the README names a heading that exists, and the
    top-level sections are numbered without a gap."""
    protocol = (ROOT / "protocol.md").read_text()
    headings = re.findall(r"^#{2,4} (\d+(?:\.\d+)*)\.? ", protocol, re.MULTILINE)
    top = [int(number) for number in headings if "." not in number]
    assert top == list(range(1, len(top) + 1))
    for document in ("protocol.md", "README.md"):
        referred = set(re.findall(r"§(\d+(?:\.\d+)*)", (ROOT / document).read_text()))
        assert referred <= set(headings), f"{document}: {sorted(referred - set(headings))}"
