"""One Parquet file from parts written apart (in parallel), without decoding a page.

Part files written by the same writer settings with the same schema hold their row
groups' pages between the leading ``PAR1`` and the footer (the Thrift ``FileMetaData``).
Joined, the first part keeps its pages where they are, each later part's pages follow,
and one footer lists every part's row groups in order, their page offsets moved by where
the part's pages now start. Each part's row groups are as the one writer would have
written them (the parts split at row group boundaries), so the file is byte for byte
the one writer's: tests/model/test_pqconcat.py checks that.

Only the footer is rewritten: a walk of its Thrift compact encoding that copies every
value as it is except the offsets (and the row group ordinals and the total row count).
"""
from __future__ import annotations

import os
import struct

MAGIC = b"PAR1"

# compact protocol types
_TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = range(1, 13)

# field ids (parquet.thrift)
_FMD_NUM_ROWS, _FMD_ROW_GROUPS = 3, 4
_RG_COLUMNS, _RG_FILE_OFFSET, _RG_ORDINAL = 1, 5, 7
_CC_FILE_OFFSET, _CC_META, _CC_OFFSET_INDEX, _CC_COLUMN_INDEX = 2, 3, 4, 6
_CM_OFFSETS = frozenset({9, 10, 11, 14})   # data, index, dictionary page; bloom filter


class ParquetConcatError(ValueError):
    """The parts cannot be joined (not Parquet files, or a footer this walk does not read)."""


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = out = 0
    while True:
        b = buf[pos]
        pos += 1
        out |= (b & 0x7F) << shift
        if b < 0x80:
            return out, pos
        shift += 7


def _put_varint(out: bytearray, v: int) -> None:
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _unzig(v: int) -> int:
    return (v >> 1) ^ -(v & 1)


def _zig(v: int) -> int:
    return (v << 1) ^ (v >> 63)


def _skip_varint(buf: bytes, pos: int) -> int:
    while buf[pos] & 0x80:
        pos += 1
    return pos + 1


def _skip(buf: bytes, pos: int, t: int) -> int:
    """Position after one field value of type ``t`` at ``pos``."""
    if t <= _FALSE:          # a bool field's value is in its header
        return pos
    if t == _BYTE:
        return pos + 1
    if t <= _I64:
        return _skip_varint(buf, pos)
    if t == _DOUBLE:
        return pos + 8
    if t == _BINARY:
        n, pos = _varint(buf, pos)
        return pos + n
    if t == _STRUCT:
        return _skip_struct(buf, pos)
    if t == _LIST or t == _SET:
        n, et, pos = _list_header(buf, pos)
        return _skip_elems(buf, pos, n, et)
    if t == _MAP:
        n, pos = _varint(buf, pos)
        if n:
            kv = buf[pos]
            pos += 1
            for _ in range(n):
                pos = _skip_elems(buf, pos, 1, kv >> 4)
                pos = _skip_elems(buf, pos, 1, kv & 0x0F)
        return pos
    raise ParquetConcatError(f"unknown Thrift type {t}")


def _skip_elems(buf: bytes, pos: int, n: int, et: int) -> int:
    """Position after ``n`` list elements of type ``et`` (a bool element is a byte)."""
    if et <= _BYTE:
        return pos + n
    if et <= _I64:
        for _ in range(n):
            pos = _skip_varint(buf, pos)
        return pos
    if et == _DOUBLE:
        return pos + 8 * n
    for _ in range(n):
        pos = _skip(buf, pos, et)
    return pos


def _skip_struct(buf: bytes, pos: int) -> int:
    while True:
        b = buf[pos]
        pos += 1
        if b == 0:
            return pos
        if not b >> 4:                     # long form: the field id follows
            pos = _skip_varint(buf, pos)
        pos = _skip(buf, pos, b & 0x0F)


def _list_header(buf: bytes, pos: int) -> tuple[int, int, int]:
    b = buf[pos]
    pos += 1
    n = b >> 4
    if n == 15:
        n, pos = _varint(buf, pos)
    return n, b & 0x0F, pos


def _put_list_header(out: bytearray, n: int, et: int) -> None:
    if n < 15:
        out.append((n << 4) | et)
    else:
        out.append(0xF0 | et)
        _put_varint(out, n)


def _field(buf: bytes, pos: int, fid: int) -> tuple[int, int, int]:
    """(field id, type, value position) of the field header at ``pos``; type 0: the
    struct's end (position after it)."""
    b = buf[pos]
    pos += 1
    if b == 0:
        return fid, 0, pos
    if b >> 4:
        return fid + (b >> 4), b & 0x0F, pos
    z, pos = _varint(buf, pos)
    return _unzig(z), b & 0x0F, pos


def _i64(buf: bytes, pos: int) -> tuple[int, int]:
    z, pos = _varint(buf, pos)
    return _unzig(z), pos


def _put_at(buf: bytes, pos: int, out: bytearray, flush: int, value: int) -> int:
    """Copy ``buf[flush:pos]``, write ``value`` in place of the varint at ``pos``;
    returns the position after the old varint (the next flush point)."""
    out += buf[flush:pos]
    _put_varint(out, _zig(value))
    return _skip_varint(buf, pos)


def _moved(buf: bytes, pos: int, out: bytearray, flush: int, shift: int) -> int:
    """_put_at with the offset at ``pos`` moved by ``shift`` (0: unset, kept)."""
    v, _ = _i64(buf, pos)
    return _put_at(buf, pos, out, flush, v + shift) if v else flush


def _meta(buf: bytes, pos: int, out: bytearray, flush: int, shift: int) -> tuple[int, int]:
    """A ColumnMetaData's page offsets moved: (position after it, flush point)."""
    fid = 0
    while True:
        fid, t, pos = _field(buf, pos, fid)
        if t == 0:
            return pos, flush
        if t == _I64 and fid in _CM_OFFSETS:
            flush = _moved(buf, pos, out, flush, shift)
        pos = _skip(buf, pos, t)


def _chunk(buf: bytes, pos: int, out: bytearray, flush: int, shift: int) -> tuple[int, int]:
    """A ColumnChunk's offsets moved: (position after it, flush point)."""
    fid = 0
    while True:
        fid, t, pos = _field(buf, pos, fid)
        if t == 0:
            return pos, flush
        if t == _STRUCT and fid == _CC_META:
            pos, flush = _meta(buf, pos, out, flush, shift)
            continue
        if t == _I64 and fid in (_CC_FILE_OFFSET, _CC_OFFSET_INDEX, _CC_COLUMN_INDEX):
            flush = _moved(buf, pos, out, flush, shift)
        pos = _skip(buf, pos, t)


def _row_group(buf: bytes, pos: int, out: bytearray, shift: int, ordinal: int) -> int:
    """Copy the RowGroup at ``pos`` to ``out`` with its offsets moved by ``shift`` and
    its ordinal set; returns the position after it."""
    fid, flush = 0, pos
    while True:
        fid, t, pos = _field(buf, pos, fid)
        if t == 0:
            break
        if t == _LIST and fid == _RG_COLUMNS:
            n, et, pos = _list_header(buf, pos)
            if et != _STRUCT:
                raise ParquetConcatError("column chunks are not structs")
            for _ in range(n):
                pos, flush = _chunk(buf, pos, out, flush, shift)
            continue
        if t == _I64 and fid == _RG_FILE_OFFSET:
            flush = _moved(buf, pos, out, flush, shift)
        elif t == _I16 and fid == _RG_ORDINAL:
            flush = _put_at(buf, pos, out, flush, ordinal)
        pos = _skip(buf, pos, t)
    out += buf[flush:pos]
    return pos


def _row_groups(footer: bytes) -> tuple[int, int, int, int, int]:
    """Where a footer's parts are: (row count, start of the row count's value, start of
    the row group list's header, start of its elements, their number)."""
    pos, fid, rows, groups = 0, 0, None, None
    while True:
        fid, t, pos = _field(footer, pos, fid)
        if t == 0:
            break
        if fid == _FMD_NUM_ROWS and t == _I64:
            rows = (_i64(footer, pos)[0], pos)
        elif fid == _FMD_ROW_GROUPS and t == _LIST:
            n, et, p = _list_header(footer, pos)
            if et != _STRUCT:
                raise ParquetConcatError("row groups are not structs")
            groups = (pos, p, n)
        pos = _skip(footer, pos, t)
    if rows is None or groups is None or rows[1] > groups[0]:
        raise ParquetConcatError("a footer without row count or row groups")
    return rows + groups


def _footer(path: str) -> tuple[bytes, int]:
    """(footer bytes, where the pages end) of a Parquet file."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(4)
        f.seek(size - 8)
        tail = f.read(8)
        n = struct.unpack("<I", tail[:4])[0]
        if head != MAGIC or tail[4:] != MAGIC or n + 12 > size:
            raise ParquetConcatError(f"{path}: not a Parquet file")
        f.seek(size - 8 - n)
        return f.read(n), size - 8 - n


def concat(parts: list[str]) -> None:
    """Append the row groups of ``parts[1:]`` to the Parquet file ``parts[0]`` (in
    place; the other parts are removed). The parts must come from one writer's settings
    and schema: the first part's footer is kept but for its row groups and row count."""
    footers = [_footer(p) for p in parts]
    base, base_end = footers[0]
    where = [_row_groups(f) for f, _end in footers]
    total_rows = sum(w[0] for w in where)
    total_groups = sum(w[4] for w in where)
    _rows0, rows_at, list_at, elems_at, n0 = where[0]
    # the first footer up to its row count, the new count, on to its row groups' list
    # header, the new header, its row groups, then every other part's, moved
    out = bytearray()
    flush = _put_at(base, rows_at, out, 0, total_rows)
    out += base[flush:list_at]
    _put_list_header(out, total_groups, _STRUCT)
    end0 = _skip_elems(base, elems_at, n0, _STRUCT)
    out += base[elems_at:end0]
    at, ordinal = base_end, n0
    for (foot, end), w in zip(footers[1:], where[1:]):
        q = w[3]
        for _ in range(w[4]):
            q = _row_group(foot, q, out, at - 4, ordinal)
            ordinal += 1
        at += end - 4
    out += base[end0:]
    with open(parts[0], "r+b") as dst:
        dst.truncate(base_end)
        dst.seek(base_end)
        for (_foot, end), path in zip(footers[1:], parts[1:]):
            with open(path, "rb") as src:
                src.seek(4)
                left = end - 4
                while left > 0:
                    chunk = src.read(min(left, 1 << 24))
                    if not chunk:
                        raise ParquetConcatError(f"{path}: shorter than its footer says")
                    dst.write(chunk)
                    left -= len(chunk)
        dst.write(out)
        dst.write(struct.pack("<I", len(out)))
        dst.write(MAGIC)
    for p in parts[1:]:
        os.remove(p)
