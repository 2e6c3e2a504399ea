"""The checked-in golden renderings and the docs table match what the rules compute now."""

from __future__ import annotations

import pytest

import published_samples
import tuning_golden


@pytest.mark.parametrize("name", published_samples.sample_names())
def test_golden_rendering(name):
    golden = tuning_golden.GOLDEN_DIR / ("%s.txt" % name)
    assert golden.is_file(), "no golden rendering for %s: run make golden" % name
    assert tuning_golden.render_sample(name) == golden.read_text(), "run make golden and review the diff"


def test_no_golden_without_a_sample():
    assert sorted(path.stem for path in tuning_golden.GOLDEN_DIR.glob("*.txt")) == published_samples.sample_names()


def test_docs_table_is_current():
    assert tuning_golden.expected_docs() == tuning_golden.DOCS.read_text(), "run make golden"
