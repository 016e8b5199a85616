"""A store opens while another connection copies its write-ahead log back into the file.

A checkpoint writes page 1 (with the grown page count) before the pages that grow the file; the
recognition read takes no lock, so it may see that state. The store is still recognised: the read is
made again as any reader makes it, the write-ahead log included.
"""

from __future__ import annotations

import struct
from pathlib import Path

from memrefine_edge.core import Entry
from memrefine_edge.store import MemoryStore, check_store_file


def _newest_page_one(wal: bytes) -> bytes:
    """The newest copy of page 1 in a write-ahead log (its header: 32 bytes; each frame: 24 + a page)."""
    page = struct.unpack(">I", wal[8:12])[0]
    newest, offset = b"", 32
    while offset + 24 + page <= len(wal):
        if struct.unpack(">I", wal[offset:offset + 4])[0] == 1:
            newest = wal[offset + 24:offset + 24 + page]
        offset += 24 + page
    return newest


def test_a_store_opens_while_a_checkpoint_has_written_page_one_only(tmp_path):
    db = tmp_path / "s.db"
    with MemoryStore(db) as writer:
        writer.pragma("wal_autocheckpoint", 0)  # the log keeps every page until the checkpoint below
        writer.add_many([Entry(id=f"e{i}", content=f"memory number {i} " * 20) for i in range(200)])
        page_one = _newest_page_one(Path(f"{db}-wal").read_bytes())
        page = len(page_one)
        assert struct.unpack(">I", page_one[28:32])[0] > db.stat().st_size // page  # the file will grow
        with open(db, "r+b") as fh:  # a checkpoint's first write; the rest of it has not happened yet
            fh.write(page_one)
        check_store_file(db)
        with MemoryStore(db, create=False, read_only=True) as reader:
            assert len(reader) == 200 and reader.get("e199").content.startswith("memory number 199")
        with MemoryStore(db, create=False) as other:
            assert len(other) == 200
