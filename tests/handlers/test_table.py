"""Each method is declared once, and what its spec says is what its handler does."""

from __future__ import annotations

import inspect
import typing

import pytest

from subagent_host.errors import DOMAIN_ERRORS
from subagent_host.handlers.control import CONTROL_METHODS
from subagent_host.handlers.table import METHODS, MethodSpec, implementation

SPECS = [*METHODS.values(), *CONTROL_METHODS.values()]


def _hints(spec: MethodSpec) -> dict[str, object]:
    return typing.get_type_hints(implementation(spec.handler))


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.name)
def test_a_spec_declares_the_result_its_handler_returns(spec: MethodSpec) -> None:
    declared = type(None) if spec.result is None else spec.result
    assert _hints(spec)["return"] == declared


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.name)
def test_a_spec_declares_the_params_its_handler_takes(spec: MethodSpec) -> None:
    params = next(iter(inspect.signature(implementation(spec.handler)).parameters))
    assert _hints(spec)[params] is spec.params


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.name)
def test_a_spec_raises_only_domain_errors_and_a_notification_answers_nothing(
    spec: MethodSpec,
) -> None:
    assert set(spec.raises) <= set(DOMAIN_ERRORS)
    assert len(set(spec.raises)) == len(spec.raises)
    if spec.notification:
        assert spec.result is None and not spec.raises and not spec.paced


def test_a_later_handler_is_imported_only_when_asked_for() -> None:
    spawn = METHODS["spawn"]
    assert spawn.handler is not implementation(spawn.handler)
    assert implementation(spawn.handler).__module__ == "subagent_host.handlers.spawn"
    assert implementation(METHODS["ping"].handler) is METHODS["ping"].handler
