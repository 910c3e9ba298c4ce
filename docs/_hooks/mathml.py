"""MkDocs hook (docs only; the package does not use it): typeset the pages' formulas as MathML.

``pymdownx.arithmatex`` (generic mode) turns ``$...$`` into ``<span class="arithmatex">\\(...\\)
</span>`` and ``$$...$$`` into ``<div class="arithmatex">\\[...\\]</div>``; this hook replaces
each with the MathML that ``latex2mathml`` converts it to, at build time. Browsers render MathML
natively, so the site needs no script and no network, also opened from disk. A formula that does
not convert stops the build, naming the page and the formula; so does one that converts with a
command ``latex2mathml`` does not know (it copies ``\\foo`` into the output as text), or an
escape it keeps (``\\_`` in ``\\text``).
"""

import html
import re

from latex2mathml.converter import convert

INLINE = re.compile(r'<span class="arithmatex">\\\((.*?)\\\)</span>', re.S)
BLOCK = re.compile(r'<div class="arithmatex">\\\[(.*?)\\\]</div>', re.S)
BACKSLASH_LEFT = re.compile(r">[^<]*\\[^<]*<")


def _mathml(tex: str, display: str, page) -> str:
    source = html.unescape(tex).strip()
    try:
        mathml = convert(source, display=display)
    except Exception as error:  # latex2mathml raises several unrelated types
        raise ValueError(f"{page.file.src_uri}: cannot typeset {source!r}: {error}") from error
    left = BACKSLASH_LEFT.search(mathml)
    if left:
        raise ValueError(f"{page.file.src_uri}: {left.group()[1:-1]!r} left in {source!r}")
    return mathml


def on_page_content(html_text: str, page, **kwargs) -> str:
    html_text = BLOCK.sub(
        lambda m: f'<div class="arithmatex">{_mathml(m.group(1), "block", page)}</div>', html_text
    )
    return INLINE.sub(
        lambda m: f'<span class="arithmatex">{_mathml(m.group(1), "inline", page)}</span>',
        html_text,
    )
