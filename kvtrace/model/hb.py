"""Happens-before: vector clocks over shards, computed from raw events only.

Edges: program order within a shard (``seq``), and cross-shard send → receive pairs
(xfer_post/notif_send → notif_recv, FIFO per (sender, receiver, msg); msg_send →
msg_recv by ``detail.id``), paired by ``sql/view_sync_pairs.sql``.

Representation (what the checks use): every cross-shard receive event ``r`` on shard
``k`` gets ``vc[r][j]`` = the largest seq of shard ``j`` known to happen-before ``r``.
Knowledge only changes at receives, so an arbitrary event ``e`` knows what the last
receive at or before it on its shard knows (an ASOF join), plus its own shard up to
``e.seq - 1``. ``X`` happens-before ``e`` iff ``X.seq <= know(e)[X.shard]``.

Cost: a shortest causal path visits each shard at most once (program order shortcuts
any revisit), so ``N - 1`` rounds of a vectorised cumulative max over the receives
reach the fixed point: O(N² · receives) numpy work, independent of the event count.
Timestamps are never used.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa

NONE = -1  # "nothing of that shard is known"


@dataclasses.dataclass
class Clocks:
    """Vector clocks at the cross-shard receive events of each shard."""

    shards: list[str]
    #: per shard index: receive seqs (sorted) and the (R, N) knowledge matrix after them
    recv_seq: list[np.ndarray]
    know: list[np.ndarray]

    def first_knowing(self, obs_sidx: np.ndarray, obs_seq: np.ndarray, on: int) -> np.ndarray:
        """For observations (shard index, seq), the first seq on shard ``on`` that knows
        them (every event there with seq >= it happens after); -1 where none does."""
        out = np.full(len(obs_seq), NONE, np.int64)
        same = obs_sidx == on
        out[same] = obs_seq[same] + 1
        rs, kn = self.recv_seq[on], self.know[on]
        for j in np.unique(obs_sidx[~same]):
            m = obs_sidx == j
            col = kn[:, j] if len(rs) else np.empty(0, np.int64)
            pos = np.searchsorted(col, obs_seq[m], side="left")   # col is nondecreasing (cummax)
            ok = pos < len(rs)
            res = np.full(m.sum(), NONE, np.int64)
            res[ok] = rs[pos[ok]]
            out[m] = res
        return out

    def table(self) -> pa.Table:
        """Arrow table (shard, seq, vc list<int64>) of every receive's knowledge."""
        shard, seq, flat = [], [], []
        for k, name in enumerate(self.shards):
            n = len(self.recv_seq[k])
            shard.append(np.full(n, k))
            seq.append(self.recv_seq[k])
            flat.append(self.know[k].reshape(-1))
        N = len(self.shards)
        sidx = np.concatenate(shard) if shard else np.empty(0, np.int64)
        names = pa.array(np.asarray(self.shards, dtype=object)[sidx] if len(sidx) else [], pa.string())
        vals = pa.array(np.concatenate(flat) if flat else np.empty(0, np.int64), pa.int64())
        offsets = pa.array(np.arange(0, len(sidx) * N + 1, N, dtype=np.int32) if N else [0], pa.int32())
        vc = pa.ListArray.from_arrays(offsets, vals)
        return pa.table({"shard": names, "seq": pa.array(np.concatenate(seq) if seq else [], pa.int64()),
                         "vc": vc})


def compute_clocks(shards: list[str], pairs: pa.Table) -> Clocks:
    """Vector clocks from cross-shard send/receive pairs.

    Args:
        shards: shard names; position = shard index.
        pairs: columns send_sidx, send_seq, recv_sidx, recv_seq (cross-shard only).
    """
    N = len(shards)
    ssid = pairs.column("send_sidx").to_numpy().astype(np.int64)
    sseq = pairs.column("send_seq").to_numpy().astype(np.int64)
    rsid = pairs.column("recv_sidx").to_numpy().astype(np.int64)
    rseq = pairs.column("recv_seq").to_numpy().astype(np.int64)
    recv_seq, rows = [], []
    for k in range(N):
        m = np.nonzero(rsid == k)[0]
        order = m[np.argsort(rseq[m], kind="stable")]
        recv_seq.append(rseq[order])
        rows.append(order)
    vc = [np.full((len(recv_seq[k]), N), NONE, np.int64) for k in range(N)]
    know = [np.maximum.accumulate(v, axis=0) if len(v) else v for v in vc]
    for _ in range(max(1, N)):
        changed = False
        for k in range(N):
            if not len(rows[k]):
                continue
            r = rows[k]
            new = np.full((len(r), N), NONE, np.int64)
            for j in np.unique(ssid[r]):
                m = ssid[r] == j
                x = sseq[r][m]
                # what the send knew: the last receive on its shard strictly before it
                pos = np.searchsorted(recv_seq[j], x, side="left") - 1
                kx = np.full((len(x), N), NONE, np.int64)
                ok = pos >= 0
                if ok.any():
                    kx[ok] = know[j][pos[ok]]
                kx[:, j] = np.maximum(kx[:, j], x)
                new[m] = kx
            cum = np.maximum.accumulate(np.maximum(new, vc[k]), axis=0)
            if not np.array_equal(cum, know[k]):
                changed = True
            vc[k] = np.maximum(new, vc[k])
            know[k] = cum
        if not changed:
            break
    return Clocks(list(shards), recv_seq, know)
