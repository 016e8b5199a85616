"""MkDocs hooks: the API reference page is generated from the package's public names.

``<!-- api:names PACKAGE NAME ... -->`` lists a package's public names (``tests/repo/test_api.py``
checks each list against the package's ``__all__``). For the top level it becomes a list of links
to each name's home section; for a stage, one mkdocstrings block per name at its public path.
"""

from __future__ import annotations

import importlib
import re

_NAMES = re.compile(r"<!-- api:names ([\w.]+)\s+([^>]*?)\s*-->", re.S)
# The docstrings cross-reference in reST roles (:class:`Name`), which mkdocstrings leaves as text.
_ROLE = re.compile(r":(?:class|meth|func|mod|data|attr|exc|obj):(?=<code>)")


def _home(obj: object) -> str:
    """The package whose ``__all__`` holds ``obj`` (its one public home)."""
    module = getattr(obj, "__module__", "") or ""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 and not parts[1].startswith("_") else module


def _names(match: re.Match[str]) -> str:
    package, names = match.group(1), match.group(2).split()
    module = importlib.import_module(package)  # a package that moved fails the build here, by name
    if package == "memrefine_edge":
        lines = []
        for name in names:
            home = _home(getattr(module, name))
            anchor = home.replace(".", "")
            lines.append(f"- [`{name}`](#{anchor}) (from `{home}`)")
        return "\n".join(lines) + "\n"
    blocks = [f"::: {package}.{name}\n    options:\n      heading_level: 3\n      show_root_full_path: false\n"
              for name in names]
    return "\n".join(blocks)


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ARG001 - MkDocs' signature
    if "<!-- api:" not in markdown:
        return markdown
    return _NAMES.sub(_names, markdown)


def on_page_content(html: str, page, config, files) -> str:  # noqa: ARG001 - MkDocs' signature
    return _ROLE.sub("", html) if page.file.src_uri.startswith("reference/") else html
