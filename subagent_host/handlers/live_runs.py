"""What `run/send`, `run/interrupt`, `run/close` and `run/permit` share: the run they
reach (this session's, held by this server; on the control socket, any run it holds)
and the child a request names."""

from __future__ import annotations

from subagent_host.errors import RequestRefused, RunNotFound
from subagent_host.handlers.context import HandlerContext
from subagent_host.rpc.errors import InvalidParams
from subagent_host.rpc.param_problems import ParamProblem
from subagent_host.runs.live_requests import NOT_INTERACTIVE, interactive_indexes
from subagent_host.runs.state import Run
from subagent_host.values.error_data import Refusal, RunRef
from subagent_host.values.plurals import plural


async def held_run(run_id: str, ctx: HandlerContext) -> Run:
    """The run (its id or a prefix), as this server holds it: RunNotFound for another
    session's, and for one another server process on the state directory runs. On a
    control connection (`ctx.any_session`): the run of that full id this server holds."""
    if ctx.any_session:
        return held_here(run_id, ctx)
    run = await ctx.store.find(ctx.session_id, run_id)
    held = ctx.orchestrator.get(run.run_id)
    if held is not None:
        return held
    if not run.is_terminal:
        raise RunNotFound(
            f"run {run.run_id} is running in another server process on this state "
            "directory; talk to it through that server",
            data=RunRef(run.run_id, reason="owned-by-another-server"),
        )
    return run


def held_here(run_id: str, ctx: HandlerContext) -> Run:
    """The run of this full id this server holds, whichever session it is in."""
    run = ctx.orchestrator.get(run_id)
    if run is None:
        raise RunNotFound(
            f"run {run_id} is not held by this server",
            data=RunRef(run_id, reason="not-held-here"),
        )
    return run


def child_index(run: Run, index: int | None) -> int:
    """The child a request names (`index`), or the run's one interactive child."""
    if index is not None:
        if not 0 <= index < len(run.children):
            count = len(run.children)
            raise InvalidParams(
                [
                    ParamProblem(
                        "index",
                        f"run {run.run_id} has {plural(count, 'child', 'children')} "
                        f"(index 0..{count - 1})",
                    )
                ]  # fmt: skip
            )
        return index
    interactive = interactive_indexes(run)
    if len(interactive) == 1:
        return interactive[0]
    if not interactive:
        raise RequestRefused(
            f"run {run.run_id} has no interactive child: it takes no messages",
            data=Refusal(NOT_INTERACTIVE, run.run_id),
        )
    listed = ", ".join(str(i) for i in interactive)
    raise InvalidParams(
        [ParamProblem("index", f"run {run.run_id} has interactive children {listed}: name one")]
    )


def answerer(ctx: HandlerContext) -> str:
    """Who answers a permission from this connection: `client`, and its name when it said
    one (`client:vscode`)."""
    return f"client:{ctx.client_name}" if ctx.client_name else "client"
