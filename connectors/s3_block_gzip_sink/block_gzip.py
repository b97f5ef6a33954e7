"""The Block-GZIP file: concatenated gzip members, one record per line, and its chunk index.

A new member starts when the current one holds `block_size` uncompressed bytes, and also at any
gap in offsets (compaction, transaction markers), so that within a member record i has offset
first_record_offset + i: the index then locates any offset exactly. Members are only opened for a
record, so no member is ever empty. Compression streams through zlib, so memory stays flat
whatever the block size.
"""

from __future__ import annotations

import zlib
from typing import BinaryIO

from connectors.s3_block_gzip_sink.layout import Chunk


class BlockGzipWriter:
    def __init__(self, out: BinaryIO, block_size: int):
        self._out = out
        self._block_size = block_size
        self.chunks: list[Chunk] = []
        self.records = 0
        self.bytes_uncompressed = 0
        self._compressor = None
        self._member_start = 0
        self._member_first_offset = 0
        self._member_records = 0
        self._member_uncompressed = 0
        self._position = 0

    def write(self, offset: int, line: bytes) -> None:
        if not line.endswith(b"\n"):
            line += b"\n"
        expected_offset = self._member_first_offset + self._member_records
        if (self._compressor is None or self._member_uncompressed >= self._block_size
                or offset != expected_offset):
            self._close_member()
            self._compressor = zlib.compressobj(6, zlib.DEFLATED, 31)  # wbits 31: gzip header and trailer
            self._member_start = self._position
            self._member_first_offset = offset
            self._member_records = 0
            self._member_uncompressed = 0
        self._emit(self._compressor.compress(line))
        self._member_records += 1
        self._member_uncompressed += len(line)
        self.records += 1
        self.bytes_uncompressed += len(line)

    def close(self) -> list[Chunk]:
        self._close_member()
        return self.chunks

    @property
    def bytes_written(self) -> int:
        return self._position

    def _emit(self, data: bytes) -> None:
        if data:
            self._out.write(data)
            self._position += len(data)

    def _close_member(self) -> None:
        if self._compressor is None:
            return
        self._emit(self._compressor.flush())
        self.chunks.append(Chunk(
            byte_length_uncompressed=self._member_uncompressed, num_records=self._member_records,
            byte_length=self._position - self._member_start, byte_offset=self._member_start,
            first_record_offset=self._member_first_offset,
        ))
        self._compressor = None
