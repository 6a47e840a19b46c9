"""LSP's end of a connection: `shutdown`, then `exit` (protocol.md §6).

One per connection, owned by its dispatcher. The `shutdown` and `exit` handlers
(handlers/lifecycle.py) mark it; the dispatcher reads it for every message that
follows (after `shutdown` a request is -32600 and a notification other than
`exit` is ignored, as LSP 3.17 says); the connection stops reading at `exit`, and
`app.py` ends the server from there as at end of input, with the status this
says. A connection whose client never sends either (every client that is not an
LSP client) ends at end of input with status 0, as ever.
"""

from __future__ import annotations

from typing import Final

SHUTDOWN: Final = "shutdown"
EXIT: Final = "exit"
# LSP: "The server should exit with success code 0 if the shutdown request has been
# received before; otherwise with error code 1."
EXIT_AFTER_SHUTDOWN: Final = 0
EXIT_WITHOUT_SHUTDOWN: Final = 1


class Lifecycle:
    """Whether this connection's client asked the server to shut down, and to exit."""

    def __init__(self) -> None:
        self.is_shut_down = False
        """`shutdown` was answered: from then on only `exit` is taken."""
        self.has_exited = False
        """`exit` was received: nothing after it is read."""

    def shut_down(self) -> None:
        """Called by the `shutdown` handler as it answers (result null)."""
        self.is_shut_down = True

    def exit(self) -> None:
        """Called by the `exit` handler: the connection reads no further message."""
        self.has_exited = True

    def refusal(self) -> str | None:
        """Why a request is refused now (-32600), or None while requests are taken."""
        if self.has_exited:
            return "the server is exiting: the exit notification was received"
        if self.is_shut_down:
            return "the server is shut down: after shutdown, only the exit notification is taken"
        return None

    def ignores(self, notification: str) -> bool:
        """Whether a notification is ignored: after `shutdown`, every one but `exit`."""
        return (self.is_shut_down or self.has_exited) and notification != EXIT

    @property
    def exit_status(self) -> int:
        """The server's exit status: 1 after an `exit` that no `shutdown` came before, else 0
        (end of input, a signal, or `exit` after `shutdown`)."""
        if self.has_exited and not self.is_shut_down:
            return EXIT_WITHOUT_SHUTDOWN
        return EXIT_AFTER_SHUTDOWN
