"""The record headers of a frame file (docs/frame-format.md), for `--frames`: which input frames the
run was given, so the report can tell which of them got no result (dropped, or lost before ingest).

Only the 56-byte record headers are read (each checked by its CRC); payloads are skipped by
seeking. The scan stops at the first record header that does not check out, or at the index, and
says where: `covflow inspect --verify` is the tool for damage, this only needs the sequence numbers.
"""
from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass, field

FILE_MAGIC = b"\x89CVF\r\n\x1a\n"
RECORD_MAGIC, INDEX_MAGIC = b"CVRD", b"CVIX"
KINDS = {1: "covariance", 2: "snapshots"}
ELEMENT_TYPES = {1: "f32", 2: "f64", 3: "cf32", 4: "cf64"}


class FramesError(Exception):
    """The file cannot be read, or is not a covflow frame file."""


@dataclass
class RecordHeader:
    sequence: int
    capture_ns: int
    kind: str
    element_type: str
    rows: int
    cols: int
    count: int

    @property
    def shape(self) -> str:
        return f"{self.kind} {self.element_type} {self.rows}×{self.cols}×{self.count}"


@dataclass
class FrameFile:
    path: str
    records: list[RecordHeader] = field(default_factory=list)
    stopped: str | None = None      # why the scan ended before the end of the records, with the offset


def read_frame_headers(path: str) -> FrameFile:
    out = FrameFile(path)
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(32)
            if len(head) < 32 or head[:8] != FILE_MAGIC:
                raise FramesError(f"{path}: not a covflow frame file (docs/frame-format.md)")
            version = struct.unpack_from("<I", head, 8)[0]
            if zlib.crc32(head[:28]) == struct.unpack_from("<I", head, 28)[0] and version != 1:
                raise FramesError(f"{path}: unknown frame file format version {version}")
            offset = 32
            while offset < size:
                f.seek(offset)
                header = f.read(56)
                if header[:4] == INDEX_MAGIC:
                    break
                if len(header) < 56:
                    out.stopped = f"offset {offset}: cut short inside a record header"
                    break
                if header[:4] != RECORD_MAGIC or zlib.crc32(header[:48]) != struct.unpack_from("<I", header, 48)[0]:
                    out.stopped = f"offset {offset}: not a record header that checks out (covflow inspect --verify says more)"
                    break
                kind, element, _, sequence, capture, rows, cols, count, _, length = struct.unpack_from(
                    "<BBHQqIIIIQ", header, 4)
                if offset + 56 + length > size:
                    out.stopped = f"offset {offset}: record (sequence {sequence}) cut short"
                    break
                out.records.append(RecordHeader(sequence, capture, KINDS.get(kind, f"kind {kind}"),
                                                ELEMENT_TYPES.get(element, f"type {element}"), rows, cols, count))
                offset += 56 + length
    except OSError as e:
        raise FramesError(f"{path}: {e.strerror or e}") from e
    return out
