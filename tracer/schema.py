"""Trace format v1 — the one place the on-disk contract is defined.

A trace is a directory ``NAME.kvtrace/`` holding ``manifest.json`` and one folder per
shard (one recording process). Each shard has ``shard.json`` and four Arrow IPC
*stream* files: events, descs, dlists, layouts. Folders starting with ``_`` are not
shards (indexes, caches). docs/format.md is the public contract and says what every
column means; ``kvtrace validate`` (tracer/validate.py) checks a trace against it.
"""
from __future__ import annotations

import enum

import pyarrow as pa

FORMAT_NAME = "kvtrace"
SCHEMA_VERSION = 1
#: Arrow schema metadata keys carried by every stream the recorder writes.
META = {b"kvtrace.format": FORMAT_NAME.encode(), b"kvtrace.version": str(SCHEMA_VERSION).encode()}

TABLES = ("events", "descs", "dlists", "layouts")
MANIFEST = "manifest.json"
SHARD_INFO = "shard.json"
#: shard.json ``untraced_postings``' reason for postings made after the shard was closed: past
#: every recorded event, so they hide nothing from the analysed trace (the other reasons do)
UNTRACED_AFTER_CLOSE = "posted after the recording ended"


class EventKind(str, enum.Enum):
    """Every value the ``events.kind`` column may hold."""

    REGISTER = "register"          # memory given to NIXL (addr, nbytes, mem_type, device)
    DEREGISTER = "deregister"      # memory taken back from NIXL
    ALLOC = "alloc"                # slots (with pages) of a pool handed to `request`
    FREE = "free"                  # slots taken back from `request`
    WRITE = "write"                # producer filled slots of pool/layer (checksums)
    READ = "read"                  # consumer used slots of pool/layer (checksums seen)
    XFER_POST = "xfer_post"        # transfer `xfer` posted (its rows are in descs)
    XFER_DONE = "xfer_done"        # initiator observed DONE
    XFER_ERROR = "xfer_error"      # initiator observed ERR
    XFER_RELEASE = "xfer_release"  # handle released
    NOTIF_SEND = "notif_send"      # notification not bound to a transfer
    NOTIF_RECV = "notif_recv"      # one delivered notification message (xfer is null)
    MSG_SEND = "msg_send"          # control message sent (detail.id pairs the ends)
    MSG_RECV = "msg_recv"          # control message received
    REQ_START = "req_start"        # request lifecycle on this side
    REQ_DONE = "req_done"
    REQ_ABORT = "req_abort"
    MOVE = "move"                  # replay output only: the bytes of `xfer` moved now
    MARK = "mark"                  # user annotation

    def __str__(self) -> str:
        return self.value


#: kinds whose rows must carry slots
SLOT_KINDS = frozenset({EventKind.ALLOC, EventKind.FREE, EventKind.WRITE, EventKind.READ})

EVENTS = pa.schema([
    pa.field("seq", pa.int64(), nullable=False),   # strictly increasing within a shard
    pa.field("t_ns", pa.int64()),                  # the shard's monotonic clock, ns
    pa.field("thread", pa.int32()),                # which thread of the process (program order is per thread)
    pa.field("agent", pa.string()),                # NIXL agent name the event belongs to
    pa.field("kind", pa.string()),                 # an EventKind value
    pa.field("request", pa.string()),              # the trace-wide request key
    pa.field("pool", pa.string()),                 # pool name (kv, index_k, state, ...)
    pa.field("layer", pa.int32()),                 # layer within the pool
    pa.field("slots", pa.list_(pa.int64())),       # slot numbers touched
    pa.field("pages", pa.list_(pa.int64())),       # each slot's page ordinal within the request
    pa.field("checksums", pa.list_(pa.uint64())),  # parallel to slots (write/read)
    pa.field("xfer", pa.int64()),                  # transfer id, unique per posting within the shard
    pa.field("peer", pa.string()),                 # the other agent of a transfer/notification/message
    pa.field("addr", pa.uint64()),                 # register/deregister base address
    pa.field("nbytes", pa.uint64()),               # bytes registered, or moved by a transfer
    pa.field("mem_type", pa.string()),             # DRAM | VRAM | ...
    pa.field("device", pa.int32()),                # device id of registered memory
    pa.field("msg", pa.binary()),                  # notification payload / control message body
    pa.field("status", pa.string()),               # DONE | ERR | PROC ... as NIXL reported it
    pa.field("detail", pa.string()),               # JSON object with kind-specific extras
], metadata=META)

DESCS = pa.schema([
    pa.field("xfer", pa.int64(), nullable=False),  # the posting these descriptors belong to
    pa.field("pos", pa.int32()),                   # position within the transfer
    pa.field("op", pa.string()),                   # WRITE | READ as posted
    pa.field("src_agent", pa.string()),            # where the bytes come from
    pa.field("src_addr", pa.uint64()),
    pa.field("src_device", pa.int32()),
    pa.field("dst_agent", pa.string()),            # where the bytes land
    pa.field("dst_addr", pa.uint64()),
    pa.field("dst_device", pa.int32()),
    pa.field("nbytes", pa.uint64()),
    pa.field("src_dlist", pa.int64()),             # prepped transfers: list id and index used
    pa.field("src_idx", pa.int64()),
    pa.field("dst_dlist", pa.int64()),
    pa.field("dst_idx", pa.int64()),
], metadata=META)

DLISTS = pa.schema([
    pa.field("dlist", pa.int64(), nullable=False),  # prepared list id, unique within the shard
    pa.field("agent", pa.string()),                 # whose memory the entries describe
    pa.field("remote_agent", pa.string()),          # null for a local list
    pa.field("idx", pa.int64()),                    # entry index used by make_prepped_xfer
    pa.field("addr", pa.uint64()),
    pa.field("nbytes", pa.uint64()),
    pa.field("device", pa.int32()),
    pa.field("mem_type", pa.string()),              # extra: DRAM | VRAM
], metadata=META)

LAYOUTS = pa.schema([
    pa.field("agent", pa.string()),          # whose memory
    pa.field("pool", pa.string()),           # pool name
    pa.field("layer", pa.int32()),           # layer within the pool
    pa.field("part", pa.string()),           # optional: 'K'/'V' half of a region holding both
    pa.field("addr", pa.uint64()),           # slot 0 starts here
    pa.field("nbytes", pa.uint64()),         # bytes of the region (num_slots * slot_bytes)
    pa.field("slot_bytes", pa.uint64()),     # bytes of one slot (one page of one layer)
    pa.field("num_slots", pa.int64()),       # slots in the region
    pa.field("page_tokens", pa.int32()),     # tokens per page
    pa.field("dtype", pa.string()),          # bf16 | fp8_e4m3+scales | ...
    pa.field("mem_type", pa.string()),       # DRAM | VRAM
    pa.field("device", pa.int32()),
    pa.field("from_seq", pa.int64()),        # valid from this event seq on (null: whole trace)
], metadata=META)

SCHEMAS: dict[str, pa.Schema] = {"events": EVENTS, "descs": DESCS, "dlists": DLISTS, "layouts": LAYOUTS}

#: the columns the public contract requires (extras above are allowed by it)
REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    "events": tuple(n for n in EVENTS.names if n != "thread"),
    "descs": tuple(DESCS.names),
    "dlists": tuple(n for n in DLISTS.names if n != "mem_type"),
    "layouts": ("agent", "pool", "layer", "addr", "nbytes", "slot_bytes", "num_slots",
                "page_tokens", "dtype"),
}

#: columns that hold a value in every row (the others are null where unused)
NOT_NULL_COLUMNS: dict[str, tuple[str, ...]] = {
    "events": ("seq", "agent", "kind"),
    "descs": ("xfer", "pos", "op", "src_agent", "src_addr", "dst_agent", "dst_addr", "nbytes"),
    "dlists": ("dlist", "agent", "idx", "addr", "nbytes"),
    "layouts": ("agent", "pool", "layer", "addr", "nbytes", "slot_bytes", "num_slots"),
}
#: events of these kinds may leave ``agent`` null (a user annotation of the whole process)
AGENTLESS_KINDS = ("mark",)


def contract_nulls(name: str, table: pa.Table) -> dict[str, int]:
    """Per not-null column of stream ``name``, how many rows of ``table`` break the contract
    by holding a null there (an agentless mark is not one)."""
    import pyarrow.compute as pc

    out = {}
    for col in NOT_NULL_COLUMNS[name]:
        if col not in table.schema.names:
            continue
        n = table.column(col).null_count
        if n and name == "events" and col == "agent" and "kind" in table.schema.names:
            agentless = pc.is_in(table.column("kind"), value_set=pa.array(AGENTLESS_KINDS, table.schema.field("kind").type))
            n = pc.sum(pc.and_kleene(pc.is_null(table.column(col)), pc.invert(agentless))).as_py() or 0
        out[col] = n
    return out


#: columns that come together: a row holds both or neither (a descriptor's index into a
#: prepared list means nothing without the list, and a list without an index names no entry)
PAIRED_COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    "descs": (("src_idx", "src_dlist"), ("dst_idx", "dst_dlist")),
}


def contract_unpaired(name: str, table: pa.Table) -> dict[tuple[str, str], int]:
    """Per pair of PAIRED_COLUMNS of stream ``name``, how many rows of ``table`` hold one
    of the two and not the other."""
    import pyarrow.compute as pc

    out = {}
    for a, b in PAIRED_COLUMNS.get(name, ()):
        if a in table.schema.names and b in table.schema.names:
            if table.column(a).null_count == table.column(b).null_count == 0:
                continue
            odd = pc.not_equal(pc.is_valid(table.column(a)), pc.is_valid(table.column(b)))
            out[(a, b)] = pc.sum(odd).as_py() or 0
    return out


def empty_table(name: str) -> pa.Table:
    """An empty table with the schema of ``name``."""
    return SCHEMAS[name].empty_table()
