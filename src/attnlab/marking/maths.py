"""A student's maths typeset on the server, as MathML (which the browser lays out itself: no script in the page):
``latex2mathml`` converts the TeX, and what it gives is kept only when every element is one of MathML's
presentation elements and every attribute one of theirs with a plain value (no ``href``: ``\\href`` is refused; an
``<mtext>`` that would hold ``<script>`` is refused); the tree is written out again here, every text escaped. The TeX
itself rides along as the formula's annotation (``\\,`` and every other backslash kept). A formula that cannot be
converted, or is too long, is shown as its source, escaped."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from html import escape

from latex2mathml.converter import convert

MATHML = "http://www.w3.org/1998/Math/MathML"
MAX_FORMULA_CHARS = 2_000  # a longer formula is shown as its source
MAX_MATHML_CHARS = 200_000
ELEMENTS = frozenset(
    "math mrow mi mn mo ms mtext mspace mfrac msqrt mroot mstyle merror mpadded mphantom mfenced menclose msub msup"
    " msubsup munder mover munderover mmultiscripts mprescripts none mtable mtr mtd mlabeledtr maligngroup"
    " malignmark semantics annotation".split())
ATTRIBUTES = frozenset(
    "display mathvariant stretchy fence separator form lspace rspace symmetric largeop movablelimits accent"
    " accentunder minsize maxsize mathsize mathcolor mathbackground width height depth linethickness displaystyle"
    " scriptlevel columnalign rowalign columnlines rowlines columnspacing rowspacing frame framespacing notation"
    " open close separators columnspan rowspan encoding voffset".split())
_PLAIN_VALUE = re.compile(r"[#%.\w\s:-]{0,64}")  # a length, a colour, a keyword: never markup or a URL's quotes


def formula_html(tex: str, display: bool) -> str:
    """The formula ``tex`` as MathML (``display``: a block), or its source escaped where it cannot be."""
    source = escape(tex)
    if len(tex) > MAX_FORMULA_CHARS:
        return source
    try:
        tree = ET.fromstring(convert(tex, display="block" if display else "inline"))
    except Exception:  # noqa: BLE001 - any failure of the converter on untrusted TeX: the source is shown
        return source
    if not _allowed(tree):
        return source
    body = "".join(_written(child) for child in tree)
    mode = "block" if display else "inline"
    out = (f'<math xmlns="{MATHML}" display="{mode}"><semantics><mrow>{body}</mrow>'
           f'<annotation encoding="application/x-tex">{source}</annotation></semantics></math>')
    return out if len(out) <= MAX_MATHML_CHARS else source


def _name(element: ET.Element) -> str | None:
    """The element's local name when it is in MathML's namespace, else None."""
    prefix = "{" + MATHML + "}"
    return element.tag[len(prefix):] if isinstance(element.tag, str) and element.tag.startswith(prefix) else None


def _allowed(tree: ET.Element) -> bool:
    for element in tree.iter():
        if _name(element) not in ELEMENTS:
            return False
        if any(a not in ATTRIBUTES or not _PLAIN_VALUE.fullmatch(v) for a, v in element.attrib.items()):
            return False
    return True


def _written(element: ET.Element) -> str:
    """The element as HTML's MathML, every text and attribute value escaped (``_allowed`` checked its names)."""
    name = _name(element)
    attributes = "".join(f' {a}="{escape(v)}"' for a, v in element.attrib.items())
    inner = escape(element.text or "") + "".join(_written(child) for child in element)
    return f"<{name}{attributes}>{inner}</{name}>" + escape(element.tail or "")
