"""One rounding for every output: the report, the terminal and the video agree to the digit."""

from __future__ import annotations

import pytest

from tokenreel.analysis.figures import MISSING, figure, multiplier


@pytest.mark.parametrize(
    ("value", "text"),
    [(4.165, "4.17x"), (4.164999, "4.16x"), (1.005, "1.01x"), (2.675, "2.68x"), (1.0, "1.00x"), (None, MISSING)],
)
def test_multipliers_round_half_up_from_the_decimal_a_person_reads(value: float | None, text: str) -> None:
    assert multiplier(value) == text


def test_an_f_string_would_not_agree() -> None:
    """1.005 and 2.675 are stored just below their decimal halves: an f-string shows 1.00 and 2.67."""
    assert (f"{1.005:.2f}", f"{2.675:.2f}") == ("1.00", "2.67")
    assert (multiplier(1.005), multiplier(2.675)) == ("1.01x", "2.68x")


def test_figures_keep_their_digits_and_suffix() -> None:
    assert figure(97.05) == "97.1" and figure(0.125, 2, " s") == "0.13 s" and figure(12345.0) == "12345.0"
    assert figure(None, 2, " s") == MISSING
