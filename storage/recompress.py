"""compression.type: batches stored in the topic's codec, whatever the producer sent.

With ``compression.type=producer`` (the default) or a batch already in the target codec,
nothing here runs: the append stays zero-copy and never decodes a record. Otherwise each
producer batch is decoded and built again in the target codec (and level), as Kafka's
LogValidator does: the same records, offset deltas, timestamps, producer id, epoch, base
sequence and transactional flag, so the idempotent producer's sequence rules and the
offsets the log assigns are those of the batch as sent. Control batches (transaction
markers) are never compressed, in Kafka either, and pass as they are. This is one of the
two places where Castle reads records into Python memory (DESIGN.md, non-negotiable 4).
"""

from __future__ import annotations

from storage.batch import BatchHeader
from storage.records import decode_batch, rebuild_batch


def needs_recompression(headers: list[tuple[int, BatchHeader]], codec: int | None) -> bool:
    """Whether any batch must change codec (``codec`` None: the producer's is kept)."""
    if codec is None:
        return False
    return any(header.compression != codec and not header.is_control for _position, header in headers)


def recompress(view: memoryview, headers: list[tuple[int, BatchHeader]], codec: int, level: int | None) -> bytes:
    """The batches of ``view`` (validated, at ``headers``' positions), each in ``codec``."""
    out = bytearray()
    for position, header in headers:
        if header.compression == codec or header.is_control:
            out += view[position:position + header.size]
            continue
        _header, records = decode_batch(view, position)
        out += rebuild_batch(header, records, compression=codec, compression_level=level)
    return bytes(out)
