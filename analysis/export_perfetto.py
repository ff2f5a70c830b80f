"""Perfetto protobuf writer, offline, through the ``perfetto`` package's proto builder.

Tracks: a process track per agent; thread tracks for recorded threads; named child
tracks for transfer lanes, request lanes, slot counters and findings. Spans are
SLICE_BEGIN/END pairs, points are INSTANTs; a flow starts with ``flow_ids`` on its
source event and ends with ``terminating_flow_ids`` on its target. Packets are written
in time order (END before BEGIN at equal times, so lane slices never overlap).
"""
from __future__ import annotations

from .export_model import Timeline

_SEQ = 1          # one trusted packet sequence for the whole file
_PROC_UUID = 1 << 40


def _annotate(ev, args: dict) -> None:
    for k, v in args.items():
        if v is None:
            continue
        a = ev.debug_annotations.add()
        a.name = str(k)
        if isinstance(v, bool):
            a.bool_value = v
        elif isinstance(v, int) and -(1 << 63) <= v < (1 << 63):
            a.int_value = v
        elif isinstance(v, float):
            a.double_value = v
        else:
            a.string_value = str(v)


def perfetto_packets(tl: Timeline):
    """Yield populated ``TracePacket`` protos for the timeline (descriptors first)."""
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TracePacket, TrackEvent  # ~0.3 s

    first = True

    def packet(ts: int | None = None):
        nonlocal first
        p = TracePacket()
        p.trusted_packet_sequence_id = _SEQ
        if first:
            p.sequence_flags = TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
            first = False
        if ts is not None:
            p.timestamp = ts
        return p

    for agent in tl.agents:
        p = packet()
        td = p.track_descriptor
        td.uuid = _PROC_UUID + tl.pid(agent)
        td.process.pid = tl.pid(agent)
        td.process.process_name = agent
        yield p
    for tr in tl.tracks.values():
        p = packet()
        td = p.track_descriptor
        td.uuid = tr.uid
        pid = tl.pid(tr.agent)
        if tr.kind == "thread":
            td.thread.pid = pid
            td.thread.tid = pid * 100000 + tr.tid   # tids are global in Perfetto
            td.thread.thread_name = tr.name
        else:
            td.parent_uuid = _PROC_UUID + pid
            td.name = tr.name
            if tr.kind == "counter":
                td.counter.unit_name = "slots"
        yield p

    items = []  # (ts, order, n, builder) so END sorts before BEGIN at one time
    for n, s in enumerate(tl.slices):
        if s.dur > 0:
            items.append((s.ts, 1, n, ("begin", s)))
            items.append((s.ts + s.dur, 0, n, ("end", s)))
        else:
            items.append((s.ts, 1, n, ("instant", s)))
    for n, (uid, ts, v) in enumerate(tl.counters):
        items.append((ts, 1, len(tl.slices) + n, ("counter", (uid, v))))
    items.sort(key=lambda x: x[:3])
    for ts, _o, _n, (what, obj) in items:
        p = packet(ts)
        ev = p.track_event
        if what == "counter":
            ev.type = TrackEvent.TYPE_COUNTER
            ev.track_uuid, ev.counter_value = obj
        elif what == "end":
            ev.type = TrackEvent.TYPE_SLICE_END
            ev.track_uuid = obj.track
        else:
            ev.type = TrackEvent.TYPE_SLICE_BEGIN if what == "begin" else TrackEvent.TYPE_INSTANT
            ev.track_uuid = obj.track
            ev.name = obj.name
            ev.categories.append(obj.cat)
            ev.flow_ids.extend(obj.flows_out)
            ev.terminating_flow_ids.extend(obj.flows_in)
            _annotate(ev, obj.args)
        yield p


def write_perfetto(tl: Timeline, path: str) -> int:
    """Write the timeline as a Perfetto protobuf trace; returns the packet count."""
    from perfetto.trace_builder.proto_builder import StreamingTraceProtoBuilder

    n = 0
    with open(path, "wb") as f:
        b = StreamingTraceProtoBuilder(f)
        for p in perfetto_packets(tl):
            b.write_packet(p)
            n += 1
    return n
