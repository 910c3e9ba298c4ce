"""The README's and docs' programs that use RecPack run as pasted (legacy environment)."""

from __future__ import annotations

import pytest
from snippets import python_blocks, run_python


def test_the_documents_hold_recpack_programs():
    assert python_blocks(recpack=True), "the README's RecPack pipeline program is gone"


@pytest.mark.parametrize("block", python_blocks(recpack=True), ids=lambda b: b.id)
def test_recpack_python_block_runs_as_pasted(block, tmp_path):
    run_python(block, tmp_path)
