from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.mock_llm import MockLLM


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture
def mock() -> Iterator[MockLLM]:
    """A loopback mock LLM for this test (tests/mock_llm), closed after it."""
    with MockLLM() as server:
        yield server
