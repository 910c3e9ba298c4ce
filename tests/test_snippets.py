"""Every code block of README.md and docs/ runs as pasted and prints the output shown after it,
in the environments it names (``legacy`` or ``modern`` here, ``spark`` in
``tests/spark/test_snippets_spark.py``); see ``tests/snippets.py`` for the rules."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from glob import glob

import pytest
from snippets import (
    DOCUMENTS,
    LANGUAGES,
    ROOT,
    _fenced,
    code_blocks,
    commands,
    environment,
    extras,
    nox_sessions,
    python_blocks,
    run_python,
)

from recpack_ope.cli import build_parser

BLOCKS = code_blocks()
PYTHON = [b for b in BLOCKS if b.lang == "python"]
ENV = environment()
BASH = [b for b in BLOCKS if b.lang == "bash"]
#: Commands the tests run as pasted (seconds each; rpp-power runs in its own test below); the
#: others are checked by the CLI's parser here and run at small size by their study's own tests
#: (demo, ndcg-disagreement, reliability).
RUN = {
    ("rpp",),
    ("reproduce", "sensitivity"),
    ("reproduce", "disagreement"),
    ("reproduce", "simpsons-paradox"),
}


def test_every_block_names_a_known_language():
    bad = [f"{b.id} ({b.lang or 'no language'})" for b in BLOCKS if b.lang not in LANGUAGES]
    assert not bad, f"name each block's language, one of {sorted(LANGUAGES)}: {bad}"


def test_the_documents_hold_programs_and_commands():
    # README.md and docs/ hold 19 programs and 14 shell blocks: a harness that finds
    # fewer has stopped reading the documents.
    assert sum(b.lang == "python" for b in BLOCKS) >= 19
    assert sum(b.lang == "bash" for b in BLOCKS) >= 14


def test_every_program_shows_its_output():
    # A reader compares what they get with what the page shows; only a program that writes
    # files and says so (`writes-files`) may show none.
    bare = [b.id for b in PYTHON if b.output is None and not b.writes_files]
    assert not bare, f"put a text block with the printed output right after: {bare}"


def test_every_environment_checks_programs():
    # RecPack programs run only in legacy: a harness that parametrises none of them there has
    # stopped recognising them.
    legacy = python_blocks("legacy")
    assert any("from recpack." in b.text for b in legacy), "no RecPack program runs in legacy"
    assert python_blocks("modern"), "no program runs in modern"
    assert all(b.environments for b in PYTHON)


@pytest.mark.parametrize("block", python_blocks(ENV), ids=lambda b: b.id)
def test_python_block_runs_as_pasted(block, tmp_path):
    run_python(block, tmp_path)


def _page(tmp_path, text: str):
    path = tmp_path / "page.md"
    path.write_text(text, encoding="utf-8")
    return [b for b in _fenced(path) if b.lang == "python"]


def test_markers_name_the_environments_of_a_page_and_of_a_block(tmp_path):
    program = "```python\nprint(1)\n```\n"
    blocks = _page(
        tmp_path,
        "<!-- snippets: legacy -->\n# Page\n\n"
        + program
        + "\nprints\n\n```text\n1\n```\n\n<!-- snippets: modern, spark -->\n\n"
        + program
        + "\n```text\n1\n```\n\n"
        + "<!-- snippets: writes-files -->\n"
        + program
        + "\nText that is not an introduction.\n\n```text\n1\n```\n",
    )
    assert [b.environments for b in blocks] == [
        {"legacy"},
        {"modern", "spark"},
        {"legacy", "modern"},  # its own marker names no environment: by its imports
    ]
    assert [b.output for b in blocks] == ["1\n", "1\n", None]
    assert [b.writes_files for b in blocks] == [False, False, True]


def test_markers_are_checked(tmp_path):
    with pytest.raises(AssertionError, match=r"names \['numpy1'\]"):
        _page(tmp_path, "<!-- snippets: numpy1 -->\n```python\nprint(1)\n```\n")
    with pytest.raises(AssertionError, match=r"page.md:\[3\]: a snippets comment belongs"):
        _page(tmp_path, "# Page\n\n<!-- snippets: legacy -->\nText.\n")
    with pytest.raises(ValueError, match="env must be one of .* not 'numpy1'"):
        python_blocks("numpy1")


def test_a_program_that_writes_files_must_say_so(tmp_path):
    (block,) = _page(tmp_path, "<!-- snippets: writes-files -->\n```python\nx = 1\n```\n")
    with pytest.raises(AssertionError, match="must print what it wrote"):
        run_python(block, tmp_path)


def test_a_wrong_output_fails_and_dots_match_only_what_they_stand_for(tmp_path):
    (shown,) = _page(
        tmp_path, "```python\nprint('took', 3.2, 's')\n```\n\n```text\ntook ... s\n```\n"
    )
    assert run_python(shown, tmp_path) == "took 3.2 s\n"
    (wrong,) = _page(tmp_path, "```python\nprint(0.7842)\n```\n\n```text\n0.7797\n```\n")
    with pytest.raises(AssertionError, match="but the document shows"):
        run_python(wrong, tmp_path)


def _cli(words: list[str]) -> list[str] | None:
    if words[0] == "recpack-ope":
        return words[1:]
    if words[:3] in (["python", "-m", "recpack_ope"], ["python3", "-m", "recpack_ope"]):
        return words[3:]
    return None


def _check(words: list[str], cwd) -> None:
    # The shell expands wildcards before the program sees them.
    words = [x for w in words for x in (sorted(glob(w, root_dir=cwd)) if "*" in w else [w])]
    args = _cli(words)
    if args is not None:
        try:
            build_parser().parse_args(args)
        except SystemExit as stop:
            assert stop.code == 0, f"the CLI refuses {' '.join(words)!r}"
            return
        if tuple(a for a in args[:2] if not a.startswith("-")) in RUN or tuple(args[:1]) in RUN:
            done = subprocess.run(
                [sys.executable, "-m", "recpack_ope", *args],
                cwd=cwd,
                capture_output=True,
                text=True,
                timeout=600,
            )
            assert done.returncode == 0, f"{' '.join(words)!r} failed:\n{done.stderr[-3000:]}"
        return
    if words[:3] == ["python3", "-m", "pip"] or words[0] == "pip":
        for req in (w for w in words[words.index("install") + 1 :] if not w.startswith("-")):
            assert not req.startswith(("recpack-ope", "recpack_ope")), (
                f"{req!r}: recpack-ope is not on the package index; install from the clone: '.[…]'"
            )
            if req.startswith("."):
                named = set(req[req.index("[") + 1 : -1].split(",")) if "[" in req else set()
                assert named <= extras(), (
                    f"{req!r} names extras the package lacks: {named - extras()}"
                )
        return
    if words[:3] == ["python3", "-m", "nox"]:
        tail = words.index("--") if "--" in words else len(words)
        sessions = [words[i + 1] for i in range(3, tail - 1) if words[i] == "-s"]
        assert set(sessions) <= nox_sessions(), (
            f"unknown nox sessions {set(sessions) - nox_sessions()}"
        )
        if sessions == ["demo"] and tail < len(words):
            _check(["recpack-ope", "demo", *words[tail + 1 :]], cwd)
        return
    raise AssertionError(f"a bash block may hold pip, nox and recpack-ope commands, not {words!r}")


@pytest.mark.parametrize("block", BASH, ids=lambda b: b.id)
def test_shell_commands_are_valid_and_the_quick_ones_run(block, tmp_path):
    # Relative paths in the documents are relative to the clone's root.
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    for words in commands(block):
        _check(words, tmp_path)


def test_no_install_hint_sends_users_to_the_package_index():
    # recpack-ope is installed from a clone (`pip install ".[trec]"`), so a hint naming
    # `recpack-ope[…]` fails for every user who follows it.
    sources = [
        *(ROOT / "recpack_ope").rglob("*.py"),
        *(ROOT / "adapters").rglob("*.py"),
        *(ROOT / "examples").rglob("*.py"),
        *DOCUMENTS,
    ]
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sources
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"recpack[-_]ope\[", line)
    ]
    assert not offenders, f"install hints that name the package index: {offenders}"


def _table_row(path, label: str) -> list[float]:
    row = next(
        line
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.startswith(f"| {label} |")
    )
    return [float(cell) for cell in row.strip("|").split("|")[1:]]


def test_rpp_power_table_is_what_the_command_prints(tmp_path):
    # The reproduction's numbers must not depend on the environment (legacy once printed
    # 78.57 / 78.57 / 90.00 where modern printed 77.62 / 78.10 / 89.52); run the documented
    # command as pasted and compare the documented table with the report it writes.
    block = next(b for b in BASH if "reproduce rpp-power" in b.text)
    (words,) = commands(block)
    done = subprocess.run(
        [sys.executable, "-m", "recpack_ope", *_cli(words), "--no-plots"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (report,) = tmp_path.rglob("power.json")
    power = json.loads(report.read_text())["power"]
    measures = ["RPP", "dcgRPP", "invRPP", "nDCG@100", "DCG@100", "Recall@100"]
    for label, test in (
        ("Tukey HSD, ML-100K", "tukey"),
        ("t-test Bonferroni, ML-100K", "bonferroni"),
    ):
        assert _table_row(block.path, label) == [
            round(100 * power[test][m], 2) for m in measures
        ], label
