"""status-after-data: a notification or status message is delivered only after the
bytes of the transfer it reports.

Two ways a completion signal can outrun the data: the transport delivers a transfer's
notification before its bytes (NIXL #252, ``--fault notify-before-data``), or the
initiator sends its own notification or control message about a request while that
request's transfers are still in flight (nothing orders the message after the bytes).
Under the fix the receive of such a signal waits for every move of those transfers.
"""
from __future__ import annotations

import collections

from ...errors import UsageError

NAME = "status-after-data"
SUMMARY = "deliver a notification or status message only after its transfer's bytes"


def apply(edit, args: str | None) -> None:
    if args:
        raise UsageError(f"--what-if {NAME} takes no arguments")
    g = edit.graph
    col = g.col
    kind = col["kind"]
    n_prog = g.n_prog
    # 1. a transfer's own notification: the data first, then the notification
    notif_fixed = 0
    for t in g.transfers:
        for o in t.observers:
            if kind[o] != "notif_recv":
                continue
            late = [m for m in t.chunks if o in edit.waits(m)]
            for m in late:
                edit.drop_wait(m, o)
            for m in t.chunks:
                edit.add_wait(o, m)
            notif_fixed += bool(late)
    # 2. a notification or message the initiator sends about a request whose transfers
    #    it has not yet seen complete: its receive waits for their bytes
    receivers = collections.defaultdict(list)
    for op in range(n_prog):
        if kind[op] in ("notif_recv", "msg_recv"):
            for w in g.waits[op]:
                if w < n_prog and kind[w] in ("notif_send", "msg_send"):
                    receivers[w].append(op)
    by_agent_req = collections.defaultdict(list)
    for t in g.transfers:
        if t.request:
            by_agent_req[(col["shard"][t.post], t.agent, t.request)].append(t)
    hb = edit.hb
    status_fixed = 0
    for s, recvs in receivers.items():
        req = col["request"][s]
        if not req:
            continue
        inflight = [t for t in by_agent_req.get((col["shard"][s], col["agent"][s], req), ())
                    if hb.before(t.post, s) and not hb.any_before(t.observers, s)]
        if not inflight:
            continue
        status_fixed += 1
        for r in recvs:
            for t in inflight:
                for m in t.chunks:
                    edit.add_wait(r, m)
    if notif_fixed:
        edit.note(f"{notif_fixed} transfer notification(s) could arrive before their bytes; "
                  "with the fix each arrives after them")
    if status_fixed:
        edit.note(f"{status_fixed} notification(s)/message(s) about a request were sent while its transfers "
                  "were in flight; with the fix each is delivered after their bytes")
    if not (notif_fixed or status_fixed):
        edit.note("every notification and status message already followed its transfer's bytes: nothing changes")
