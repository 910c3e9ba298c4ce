"""The documents' programs named for Spark (``<!-- snippets: spark -->``, or importing pyspark
or ``recpack_ope.spark``) run as pasted and print the output shown after them; see
``tests/snippets.py`` for the rules."""

import pytest
from snippets import python_blocks, run_python


def test_the_documents_hold_spark_programs():
    assert python_blocks("spark"), "the Spark page's program is gone"


@pytest.mark.parametrize("block", python_blocks("spark"), ids=lambda b: b.id)
def test_spark_python_block_runs_as_pasted(block, tmp_path):
    run_python(block, tmp_path)
