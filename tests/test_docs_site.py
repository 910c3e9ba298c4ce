"""The built documentation site: every formula typeset, none left as LaTeX or pseudo-math.

Runs in the ``docs`` session after ``mkdocs build`` (``DOCS_SITE`` names the site folder; the
other sessions leave this file out). The pages write formulas as ``$...$`` and ``$$...$$``,
which the build turns into MathML (``docs/_hooks/mathml.py``). Each built page is parsed and
its text outside ``<math>``, ``<code>`` and ``<pre>`` must hold no LaTeX: no ``$``-delimited
formula, no ``\\(`` or ``\\[`` delimiter, no ``\\frac``-like command. Each math element must
have converted (MathML inside, no ``<merror>``, no command copied through). On the pages whose
formulas were converted from inline code, no inline code but a call may hold formula symbols
(Σ, δ, ≤, …): those belong in ``$...$``. Each subpackage's API page opens on its public
functions and documents every name of its ``__all__``, and no page documents a private name.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

SITE = Path(os.environ.get("DOCS_SITE", "site"))
# Pages whose formulas are LaTeX; the others' inline code is not checked for formula symbols.
FORMULA_PAGES = (
    "definitions.html",
    "estimators.html",
    "ranking_estimators.html",
    "sensitivity.html",
    "reliability.html",
    "choosing-a-metric.html",
    "reproductions.html",
    "open_bandit.html",
    "performance.html",
)
DOLLAR_FORMULA = re.compile(r"\$\$|\$[^\s$][^$]*\$")
LATEX_DELIMITER = re.compile(r"\\[(\[]")
# Any backslash command: the pages' prose and tables hold none outside code.
LATEX_COMMAND = re.compile(r"\\[A-Za-z]{2,}")
FORMULA_SYMBOL = re.compile(r"[Σ∑∏δρπκεσγβΔℓ·≤≥∝√∞∈⊆∣≈≡\u0302]")
# A call such as `ExponentialDiscount(γ, K)` is code, Greek arguments and all.
CALL = re.compile(r"[A-Za-z_][\w.]{2,}\(")
SKIPPED = {"math", "code", "pre", "script", "style", "textarea"}


class Page(HTMLParser):
    """The text outside math and code, the inline code, and the math elements of one page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[str] = []
        self.text: list[str] = []
        self.inline_code: list[str] = []
        self.arithmatex: list[str] = []  # the markup inside each arithmatex element
        self._capture: list[str] | None = None
        self._depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("br", "img", "hr", "input", "meta", "link", "mspace", "mprescripts", "none"):
            return
        if self._capture is not None:
            self._capture.append(f"<{tag}>")
            self._depth += 1
        elif "arithmatex" in (dict(attrs).get("class") or "").split():
            self._capture, self._depth = [], 1
        self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag not in self.open:
            return
        while self.open and self.open.pop() != tag:
            pass
        if self._capture is not None:
            self._depth -= 1
            if self._depth == 0:
                self.arithmatex.append("".join(self._capture))
                self._capture = None
            else:
                self._capture.append(f"</{tag}>")

    def handle_data(self, data: str) -> None:
        if self._capture is not None:
            self._capture.append(data)
        elif "code" in self.open and "pre" not in self.open:
            self.inline_code.append(data)
        elif not SKIPPED.intersection(self.open):
            self.text.append(data)


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _parse(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


PAGES = sorted(SITE.rglob("*.html"))
SUBPACKAGES = (
    "inference",
    "propensity",
    "metrics",
    "logged",
    "reward",
    "simulation",
    "io",
    "evaluation",
    "spark",
)
HEADING_ID = re.compile(r'<h([1-6])[^>]*\bid="([^"]+)"')


def test_the_site_is_built() -> None:
    names = {path.relative_to(SITE).as_posix() for path in PAGES}
    assert {"index.html", *FORMULA_PAGES} <= names, f"no built site in {SITE.resolve()}"


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.relative_to(SITE).as_posix())
def test_no_latex_outside_math(path: Path) -> None:
    text = " ".join(_parse(path).text)
    for pattern in (DOLLAR_FORMULA, LATEX_DELIMITER, LATEX_COMMAND):
        found = pattern.findall(text)
        assert not found, f"untypeset LaTeX {found[:3]} in {path}"


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.relative_to(SITE).as_posix())
def test_every_formula_converted(path: Path) -> None:
    for markup in _parse(path).arithmatex:
        assert markup.startswith("<math>"), f"formula not converted in {path}: {markup[:80]}"
        assert "<merror>" not in markup, f"MathML error in {path}: {markup[:200]}"
        assert not re.search(r"\\[A-Za-z]", markup), f"LaTeX left in MathML in {path}: {markup}"


@pytest.mark.parametrize("name", FORMULA_PAGES)
def test_no_formula_in_inline_code(name: str) -> None:
    code = [
        text
        for text in _parse(SITE / name).inline_code
        if FORMULA_SYMBOL.search(text) and not CALL.match(text)
    ]
    assert not code, f"formulas in inline code on {name} (write them as $...$): {code}"


def test_pages_have_typeset_formulas() -> None:
    # The Definitions page is the formulas' reference: its display blocks must be MathML.
    html = (SITE / "definitions.html").read_text(encoding="utf-8")
    assert html.count('<math xmlns="http://www.w3.org/1998/Math/MathML" display="block">') >= 20


@pytest.mark.parametrize("name", SUBPACKAGES)
def test_api_page_opens_on_the_public_functions(name: str) -> None:
    package = importlib.import_module(f"recpack_ope.{name}")
    headings = HEADING_ID.findall((SITE / "api" / f"{name}.html").read_text(encoding="utf-8"))
    documented = {anchor.rsplit(".", 1)[-1] for level, anchor in headings if level == "3"}
    missing = set(package.__all__) - documented
    assert not missing, f"recpack_ope.{name}: {sorted(missing)} not on its API page"
    has_functions = any(inspect.isroutine(getattr(package, n)) for n in package.__all__)
    sections = [anchor for level, anchor in headings if level == "2"]
    assert sections[0] == ("functions" if has_functions else "classes"), sections


@pytest.mark.parametrize("path", sorted((SITE / "api").glob("*.html")), ids=lambda p: p.name)
def test_api_pages_show_no_private_name(path: Path) -> None:
    anchors = [anchor for _, anchor in HEADING_ID.findall(path.read_text(encoding="utf-8"))]
    private = [a for a in anchors if any(_private(part) for part in a.split("."))]
    assert not private, f"private names documented on {path.name}: {private}"
