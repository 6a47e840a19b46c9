"""How `run -i` asks a person about a tool use its child waits on (protocol.md §23.4),
and which option the answer sends.

One line says what the child wants to do, as the tool's kind, name and summary; the
prompt below it names the keys that answer: `y` allows it once, `a` always (for the
rest of the child's session), `n` rejects it, each only where the CLI offers such an
option. The answer is a line: its first character, either case.
"""

from __future__ import annotations

from typing import Final

from subagent_host.terminal import views
from subagent_host.values.choices import OptionKind
from subagent_host.values.interaction import PendingPermission, PermissionOption

# Each key, the kinds of option it sends (the first the permission offers), in words.
KEYS: Final = (
    ("y", (OptionKind.ALLOW_ONCE,), "allow once"),
    ("a", (OptionKind.ALLOW_ALWAYS,), "allow always"),
    ("n", (OptionKind.REJECT_ONCE, OptionKind.REJECT_ALWAYS), "reject"),
)
# What the tool's line shows of its summary: a command or a path, not a page.
SUMMARY_CHARS: Final = 200


def describe(permission: PendingPermission) -> str:
    """What the child wants to do: `? execute Bash: printf x > written.txt`, without
    the escapes or control characters a CLI could put there."""
    summary = views.shorten(views.printable(permission.summary), SUMMARY_CHARS)
    name = views.shorten(views.printable(permission.name))
    return f"? {permission.kind} {name}: {summary}" if summary else f"? {permission.kind} {name}"


def answers(permission: PendingPermission) -> dict[str, PermissionOption]:
    """The keys that answer `permission`, each to the option it sends."""
    keys: dict[str, PermissionOption] = {}
    for key, kinds, _words in KEYS:
        for kind in kinds:
            option = next((o for o in permission.options if o.kind is kind), None)
            if option is not None:
                keys[key] = option
                break
    return keys


def question(permission: PendingPermission) -> str:
    """The prompt: the keys it takes, in words (`[y] allow once  [a] allow always  [n]
    reject? `)."""
    offered = answers(permission)
    words = [f"[{key}] {said}" for key, _kinds, said in KEYS if key in offered]
    return "  ".join(words) + "? "


def chosen(permission: PendingPermission, line: str) -> PermissionOption | None:
    """The option a typed line answers with; None: not an answer it takes."""
    key = line.strip()[:1].lower()
    return answers(permission).get(key)


def refusal(permission: PendingPermission) -> PermissionOption | None:
    """What a person who will type no more answers (their input ended): its reject."""
    return answers(permission).get("n")
