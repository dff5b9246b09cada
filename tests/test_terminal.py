"""What azr shows of outside text on a terminal: control characters escaped, lines kept only where asked."""

from __future__ import annotations

import pytest

from azr.terminal import printable


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("FAIL\x1b[2K\rPASS", "FAIL\\x1b[2K\\rPASS"),
        ("a\nb\tc", "a\\nb\\tc"),
        ("right\u202eto left", "right\\u202eto left"),
        ("\x9b31m", "\\x9b31m"),
        ("plain text, ünïcode, 漢字", "plain text, ünïcode, 漢字"),
    ],
)
def test_one_line(text, shown):
    assert printable(text) == shown


def test_lines_keep_newlines_and_tabs_only():
    assert printable("a\nb\tc\r\x1b[1m", lines=True) == "a\nb\tc\\r\\x1b[1m"
