"""Pages assembled from slices: when is a page spliced from pieces of one source page
what the program meant?

Heterogeneous attention TP (SGLang's ``send_kvcache_slice``, non-MLA pools) moves one
descriptor per token carrying the destination rank's heads into their offset in the
destination token: prefill TP 1 -> decode TP 2 gives each decode token a slice of the
source token; 2 -> 1 builds each decode token from one slice per prefill rank. The
data flow (the model's per-descriptor pieces, run eagerly) then leaves a page whose
content is many segments of one atom, none of them aligned. Such a page is what the
program meant when, byte for byte:

* every segment holds the read's (pool, layer, page) of one legitimate request (no
  poison, no other page);
* every byte of destination token ``t`` comes from source token ``t`` (token strides
  from each side's layout: ``slot_bytes / page_tokens``);
* every token is assembled the same way (its *shape*: which byte range of the source
  token lands at which byte range of the destination token) — a rank holds the same
  heads of every token;
* that shape is the one most pages of the same (agent, pool, layer) from the same
  source geometry have (a rank holds the same heads on every page).

A slice at the wrong head offset breaks the third or fourth rule, a missing slice
leaves poison or another page's bytes (the first), a slice from the wrong token the
second. A whole rank consistently receiving the wrong heads on every page is not
detectable from the placement alone (which heads a rank holds is not in the trace).
"""
from __future__ import annotations

from .symbolic import checksum, full, write_atom


def token_bytes(layout) -> int | None:
    """Bytes per token of a layout region, or None when it has no token geometry."""
    if not layout or not layout.get("page_tokens"):
        return None
    sb, pt = layout["slot_bytes"], layout["page_tokens"]
    return sb // pt if sb % pt == 0 else None


def source_token_bytes(graph) -> dict:
    """atom -> bytes per token of the slots it was written into (only where every write
    of it agrees; cached on the graph)."""
    cached = getattr(graph, "_atom_tok", None)
    if cached is not None:
        return cached
    c, seen = graph.col, {}
    for op in range(graph.n_prog):
        if c["kind"][op] != "write" or not graph.cells[op]:
            continue
        tb = token_bytes(graph.layouts.get((c["agent"][op], c["pool"][op], c["layer"][op])))
        for i, cell in enumerate(graph.cells[op]):
            if cell is not None:
                seen.setdefault(write_atom(graph, op, i), set()).add(tb)
    out = graph._atom_tok = {a: next(iter(t)) for a, t in seen.items() if len(t) == 1 and None not in t}
    return out


def assembled_shape(head: tuple, dst_tok: int | None, src_tok: dict):
    """The per-token shape of a content made of one atom's slices, or None when it is
    not one: a tuple of (offset in the destination token, bytes, offset in the source
    token), the same for every token. ``head`` is the content's bytes in use."""
    atoms = {seg[2] for seg in head}
    if len(atoms) != 1 or not dst_tok:
        return None
    atom = next(iter(atoms))
    st = src_tok.get(atom)
    if atom is None or not st:
        return None
    tokens: dict[int, list] = {}
    for s, e, _a, base in head:
        d = s
        while d < e:
            b = base + d - s
            n = min(e - d, dst_tok - d % dst_tok, st - b % st)
            if d // dst_tok != b // st:       # a byte of another token
                return None
            pieces = tokens.setdefault(d // dst_tok, [])
            if pieces and pieces[-1][0] + pieces[-1][1] == d % dst_tok and \
                    pieces[-1][2] + pieces[-1][1] == b % st:
                pieces[-1] = (pieces[-1][0], pieces[-1][1] + n, pieces[-1][2])
            else:
                pieces.append((d % dst_tok, n, b % st))
            d += n
    shapes = {tuple(p) for t, p in tokens.items()}
    if len(shapes) != 1:
        return None                     # a token assembled differently from the others
    return next(iter(shapes))


def unreproduced_atoms(graph) -> frozenset:
    """Atoms whose recorded write checksums are not replay's bytes for them (a real
    engine's data, not the reference engine's fill): a read holding them cannot be
    compared with its recorded checksum (cached on the graph)."""
    cached = getattr(graph, "_unreproduced", None)
    if cached is not None:
        return cached
    c, out = graph.col, set()
    for op in range(graph.n_prog):
        rec = c["checksums"][op]
        if c["kind"][op] != "write" or not graph.cells[op] or not rec or graph.extent[op] is not None:
            continue
        for i, cell in enumerate(graph.cells[op]):
            if cell is None or i >= len(rec) or rec[i] is None:
                continue
            atom = write_atom(graph, op, i)
            if atom not in out and checksum(full(atom, graph.mem.cells[cell].size),
                                            graph.mem.cells[cell].size) != rec[i]:
                out.add(atom)
    graph._unreproduced = frozenset(out)
    return graph._unreproduced
