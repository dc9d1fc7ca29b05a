"""The request checks REST and ``relay mcp`` share: a bad source is one coded line."""

from __future__ import annotations

import pytest

from relay_notebook.commands.api_requests import checked_source
from relay_notebook.errors import InvalidRequestError


def test_a_source_that_is_not_unicode_text_is_refused_with_its_code() -> None:
    """A lone surrogate (valid in a JSON string, not in UTF-8) is refused, not a crash."""
    with pytest.raises(InvalidRequestError) as refused:
        checked_source("shop", "x = '\ud800'\n")
    assert refused.value.code == "invalid-request"
    assert "lone surrogate at character 5" in refused.value.message
    assert checked_source("shop", "x = 'é'\n") == "x = 'é'\n"
