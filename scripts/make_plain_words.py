"""Write memrefine_edge/data/plain_words.txt.gz: English words that are never proper nouns, from SCOWL.

    python scripts/make_plain_words.py [--dict PATH] [--copyright PATH]

The fact extractor takes a capitalised word at the start of a sentence for a name unless it looks
like an ordinary word ("Obstacles keep coming", "Big news!"). This list is what "ordinary" means:
the words of Debian's ``wamerican`` dictionary (SCOWL, Kevin Atkinson; a permissive licence, its
notice is copied beside the list as ``plain_words.COPYING``) that it spells only in lower case (so not "iPhone" either).
A word it also spells capitalised ("John"/"john", "Mark"/"mark", "Grace"/"grace") is left out, so
such a word at a sentence start is still a name. Left out too: words of fewer than three letters,
words with an apostrophe, and words the extractor already reads as ordinary by their ending
(``-ing``, ``-ed``, ``-ly`` ...), which keeps the list (and the memory it takes) small.

Without ``--dict`` the script reads ``/usr/share/dict/american-english``; on a machine without it::

    apt-get download wamerican && dpkg -x wamerican_*.deb wam
    python scripts/make_plain_words.py --dict wam/usr/share/dict/american-english \\
        --copyright wam/usr/share/doc/wamerican/copyright
"""

from __future__ import annotations

import argparse
import gzip
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DATA = REPO / "memrefine_edge" / "data"


def main() -> int:
    from memrefine_edge.text._facts import _COMMON_SUFFIX

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dict", type=Path, default=Path("/usr/share/dict/american-english"),
                    help="the wamerican word list [/usr/share/dict/american-english]")
    ap.add_argument("--copyright", type=Path, default=Path("/usr/share/doc/wamerican/copyright"),
                    help="its copyright file, copied beside the list [/usr/share/doc/wamerican/copyright]")
    args = ap.parse_args()
    for path in (args.dict, args.copyright):
        if not path.is_file():
            print(f"error: {path} not found (see this script's docstring for how to get wamerican)", file=sys.stderr)
            return 2
    words = args.dict.read_text(encoding="utf-8", errors="replace").split("\n")
    proper = {w.lower() for w in words if w[:1].isupper()}
    plain = sorted({w for w in words if w.islower() and w.isascii() and w.isalpha() and len(w) >= 3
                    and w not in proper and not _COMMON_SUFFIX.search(w)})
    header = ("# English words never spelled capitalised in SCOWL's American list (Debian wamerican), "
              "endings the extractor already knows left out; written by scripts/make_plain_words.py. "
              "Licence: plain_words.COPYING\n")
    data = (header + "\n".join(plain) + "\n").encode("utf-8")
    (DATA / "plain_words.txt.gz").write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
    (DATA / "plain_words.COPYING").write_bytes(args.copyright.read_bytes())
    print(f"{len(plain)} words -> {DATA / 'plain_words.txt.gz'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
