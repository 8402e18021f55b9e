#!/usr/bin/python3
"""Writes a covflow frame file (docs/frame-format.md) with Python and numpy alone.

    write_frames.py OUT.cvf [--frames N]

Frame i has sequence 100 + i and capture time i * 10 ms; it cycles through both payload kinds
(covariance, snapshots) and the four element types (f32, f64, cf32, cf64). Element j of a
payload, counted in payload order, is i + j/8 (real types) or i + j/8 - j·1j (complex types),
so a reader can check every value. covflow's test suite runs this script and reads the file.
"""
import argparse
import struct
import time
import zlib

import numpy as np

ELEMENT_TYPES = [(1, "<f4"), (2, "<f8"), (3, "<c8"), (4, "<c16")]  # code, little-endian dtype
COVARIANCE, SNAPSHOTS = 1, 2


def file_header():
    head = b"\x89CVF\r\n\x1a\n" + struct.pack("<IIqI", 1, 0, time.time_ns(), 0)
    return head + struct.pack("<I", zlib.crc32(head))


def record(kind, element_type, sequence, capture_ns, payload):
    """payload: a numpy array of shape (count, cols, rows); C order is the file's order."""
    count, cols, rows = payload.shape
    data = payload.tobytes(order="C")
    head = b"CVRD" + struct.pack("<BBHQqIIIIQ", kind, element_type, 0, sequence, capture_ns,
                                 rows, cols, count, 0, len(data))
    head += struct.pack("<I", zlib.crc32(head))
    return head + struct.pack("<I", zlib.crc32(data, zlib.crc32(head))) + data


def index(entries, index_offset):
    block = b"CVIX" + struct.pack("<IQ", 0, len(entries))
    block += b"".join(struct.pack("<QqQ", *entry) for entry in entries)
    footer = struct.pack("<QQ", index_offset, len(entries))
    return block + footer + struct.pack("<I", zlib.crc32(footer, zlib.crc32(block))) + b"CVFT"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--frames", type=int, default=8)
    args = parser.parse_args()

    entries = []
    with open(args.out, "wb") as out:
        out.write(file_header())
        offset = 32
        for i in range(args.frames):
            kind = COVARIANCE if i % 2 == 0 else SNAPSHOTS
            code, dtype = ELEMENT_TYPES[(i // 2) % 4]
            rows, cols, count = (3, 3, 2) if kind == COVARIANCE else (3, 5, 2)
            j = np.arange(rows * cols * count, dtype=np.float64)
            values = i + j / 8 - (1j * j if np.dtype(dtype).kind == "c" else 0)
            payload = values.astype(dtype).reshape(count, cols, rows)
            sequence, capture_ns = 100 + i, i * 10_000_000
            data = record(kind, code, sequence, capture_ns, payload)
            out.write(data)
            entries.append((sequence, capture_ns, offset))
            offset += len(data)
        out.write(index(entries, offset))


if __name__ == "__main__":
    main()
