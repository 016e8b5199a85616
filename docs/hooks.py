"""MkDocs hooks: the API reference page is generated from the package's public names.

``<!-- api:top-level -->`` in a page becomes one mkdocstrings block per name in
``memrefine_edge.__all__``, at the module where the object is defined (so the page
follows the code when a module moves); ``<!-- api:module NAME -->`` becomes a block
documenting the public module NAME with its ``__all__``.
"""

from __future__ import annotations

import importlib
import re

_MODULE = re.compile(r"<!-- api:module ([\w.]+) -->")
# The docstrings cross-reference in reST roles (:class:`Name`), which mkdocstrings leaves as text.
_ROLE = re.compile(r":(?:class|meth|func|mod|data|attr|exc|obj):(?=<code>)")


def _top_level() -> str:
    import memrefine_edge

    blocks = []
    for name in memrefine_edge.__all__:
        if name.startswith("__"):
            continue
        obj = getattr(memrefine_edge, name)
        blocks.append(f"::: {obj.__module__}.{obj.__qualname__}\n    options:\n      heading_level: 3\n")
    return "\n".join(blocks)


def _module(match: re.Match[str]) -> str:
    name = match.group(1)
    module = importlib.import_module(name)  # a module that moved fails the build here, by name
    members = "".join(f"\n        - {m}" for m in getattr(module, "__all__", []))
    return (f"::: {name}\n    options:\n      show_root_heading: false\n      heading_level: 3\n"
            + (f"      members:{members}\n" if members else ""))


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ARG001 - MkDocs' signature
    if "<!-- api:" not in markdown:
        return markdown
    markdown = markdown.replace("<!-- api:top-level -->", _top_level())
    return _MODULE.sub(_module, markdown)


def on_page_content(html: str, page, config, files) -> str:  # noqa: ARG001 - MkDocs' signature
    return _ROLE.sub("", html) if page.file.src_uri.startswith("reference/") else html
