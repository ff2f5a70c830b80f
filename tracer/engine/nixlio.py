"""The engine's NIXL plumbing: agent factory, registration, prepped lists, control messages.

``make_agent`` is the one place that chooses TracedAgent (recording) or NIXL's own
nixl_agent (recording off, for the A/B benchmark): both are the same class to the engine.
"""
from __future__ import annotations

import itertools
import json

import numpy as np

from ..schema import EventKind as K


def make_agent(name: str, rec, *, listen_port: int | None = None):
    """A UCX agent named ``name``; traced into ``rec`` unless it is None.

    No UCX progress thread: the engine progresses its agents itself (prefill polling
    ``check_xfer_state``, decode polling ``get_new_notifs``). Two idle progress threads
    burn half a core, which on a 2-core box makes every timing noisy.
    """
    from nixl._api import nixl_agent_config  # ~0.3 s import, only when the engine runs
    cfg = nixl_agent_config(backends=["UCX"], enable_prog_thread=False,
                            enable_listen_thread=listen_port is not None, listen_port=listen_port or 0)
    if rec is None:
        from ..agent import original_agent_class
        return original_agent_class()(name, cfg)
    from ..agent import TracedAgent
    return TracedAgent(name, cfg, recorder=rec, request_tags="sglang")


def register(agent, mem, rec) -> None:
    """Register every region with NIXL (one call per pool) and describe it in layouts."""
    for regs in mem.regions.values():
        if not isinstance(regs[0].buf, np.ndarray):
            agent.register_memory([r.buf for r in regs])
        else:
            agent.register_memory([(r.addr, r.nbytes, 0, "") for r in regs], "DRAM")
        if rec is not None:
            for r in regs:
                p = r.pool
                rec.layout(agent.name, p.name, r.layer, r.addr, p.item_len, p.num_slots, page_tokens=p.page_tokens,
                           dtype=p.dtype, mem_type=r.mem_type, device=r.dev_id)


def describe(regions) -> dict:
    """SGLang's parallel lists for a group of regions (what decode sends prefill)."""
    return {"ptrs": [r.addr for r in regions], "lens": [r.nbytes for r in regions],
            "item_lens": [r.pool.item_len for r in regions], "devs": [r.dev_id for r in regions],
            "mem_type": regions[0].mem_type}


def prep(agent, remote: str, group: dict):
    """A prepped list over a described region group: entry ``offset[r] + s`` is slot s of
    region r (``base[r] + s*item_len[r]``), stacked region-major."""
    rows = []
    for base, ln, item, dev in zip(group["ptrs"], group["lens"], group["item_lens"], group["devs"]):
        n = ln // item
        addrs = base + np.arange(n, dtype=np.int64) * item
        rows.append(np.stack([addrs, np.full(n, item), np.full(n, dev)], axis=1))
    arr = np.concatenate(rows).astype(np.int64)
    return agent.prep_xfer_dlist(remote, arr, group["mem_type"])


def region_offsets(group: dict, uniform: bool) -> list[int]:
    """Index of each region's slot 0 in the prepped list.

    Correct: cumulative per-region slot counts. ``uniform`` reproduces the suspect in
    SGLang's conn.py: ``r * M`` with M = lens[0] // item_lens[0] applied to every region.
    """
    counts = [ln // it for ln, it in zip(group["lens"], group["item_lens"])]
    if uniform:
        return [r * counts[0] for r in range(len(counts))]
    return [int(x) for x in np.concatenate([[0], np.cumsum(counts)[:-1]])]


#: json.dumps(m, separators=(",", ":")) without building an encoder per message
_MSG_JSON = json.JSONEncoder(separators=(",", ":")).encode


#: sender name -> {id(message): (message, its JSON)} of the batch its mailbox handed out last: a
#: receiver in the same process records those bytes instead of encoding the message again
#: (the engine reads a message, never changes it); one batch per sender (a receiver in another
#: process gets a copy: encoded there)
_HANDED: dict[str, dict[int, tuple[dict, bytes]]] = {}


class Mailbox:
    """Control messages of one side (the engine's side channel: a queue in-process, a
    local socket between processes). Sending records ``msg_send``, taking delivery
    records ``msg_recv``; ``detail.id`` pairs the two ends."""

    def __init__(self, agent_name: str, peer: str, rec):
        self.name, self.peer, self.rec = agent_name, peer, rec
        self._ids = itertools.count()
        self.out: list[dict] = []
        self._json: dict[int, tuple[dict, bytes]] = {}

    def send(self, type_: str, room: int | None = None, **body) -> None:
        m = {"id": f"{self.name}:{next(self._ids)}", "type": type_, "room": room, **body}
        if self.rec is not None:
            text = _MSG_JSON(m).encode()
            self._json[id(m)] = (m, text)
            self.rec.event(K.MSG_SEND, self.name, None if room is None else str(room), peer=self.peer,
                           msg=text, detail={"id": m["id"], "type": type_})
        self.out.append(m)

    def take(self) -> list[dict]:
        out, self.out = self.out, []
        if self.rec is not None:
            _HANDED[self.name], self._json = self._json, {}
        return out

    def received(self, m: dict) -> None:
        if self.rec is not None:
            room = m.get("room")
            sent = _HANDED.get(self.peer)
            hit = sent.pop(id(m), None) if sent else None
            text = hit[1] if hit is not None and hit[0] is m else _MSG_JSON(m).encode()
            self.rec.event(K.MSG_RECV, self.name, None if room is None else str(room), peer=self.peer,
                           msg=text, detail={"id": m["id"], "type": m["type"]})
