"""How one event reads as a timeline line: pure formatting, no I/O."""
from __future__ import annotations

import json

from rich.style import Style
from rich.text import Text

#: kind -> colour, grouped by what the event does to a slot
KIND_STYLE = {
    "alloc": "green", "free": "yellow", "write": "cyan", "read": "bright_cyan",
    "xfer_post": "magenta", "xfer_done": "bright_magenta", "xfer_error": "bold red",
    "xfer_release": "dark_magenta", "notif_send": "blue", "notif_recv": "bright_blue",
    "msg_send": "blue", "msg_recv": "bright_blue", "req_start": "bright_white",
    "req_done": "bright_white", "req_abort": "bold red", "move": "bright_green",
    "mark": "bold yellow", "register": "grey62", "deregister": "grey62",
}


def short_slots(slots, limit: int = 6) -> str:
    """``[1,2,3,...+7]``: the first slots of a list and how many more."""
    if slots is None:
        return ""
    s = list(slots)
    head = ",".join(str(x) for x in s[:limit])
    return f"[{head}{',…+' + str(len(s) - limit) if len(s) > limit else ''}]"


def _msg(m) -> str:
    if m is None:
        return ""
    b = bytes(m)
    try:
        return b.decode()
    except UnicodeDecodeError:
        return b.hex()


def what(row: dict) -> str:
    """The event's content after kind and request: pool/layer/slots, transfer, peer, msg."""
    k = row["kind"]
    parts = []
    if row.get("agent") and row.get("agent") != row.get("shard"):
        parts.append(f"@{row['agent']}")
    if row.get("pool") is not None:
        lay = f"/L{row['layer']}" if row.get("layer") is not None else ""
        parts.append(f"{row['pool']}{lay}{short_slots(row.get('slots'))}")
    if row.get("xfer") is not None:
        parts.append(f"x{row['xfer']}")
    elif row.get("pair_xfer") is not None:
        parts.append(f"←{row['pair_shard']}:x{row['pair_xfer']}")
    if row.get("peer"):
        parts.append(("→" if k in ("xfer_post", "notif_send", "msg_send") else "from ") + row["peer"])
    if row.get("msg") is not None:
        parts.append(f"'{_msg(row['msg'])}'")
    if k in ("register", "deregister") and row.get("addr") is not None:
        parts.append(f"{row['addr']:#x}+{row.get('nbytes') or 0}")
    elif row.get("nbytes") and k == "xfer_post":
        parts.append(f"{row['nbytes']}B")
    if row.get("status") and k != "xfer_post":
        parts.append(row["status"])
    if row.get("detail") and k in ("mark", "req_abort", "free", "alloc", "msg_send", "msg_recv", "write"):
        try:
            d = json.loads(row["detail"])
            parts.append(" ".join(f"{a}={b}" for a, b in d.items()) if isinstance(d, dict) else str(d))
        except ValueError:
            parts.append(row["detail"])
    return " ".join(p for p in parts if p)


def format_row(row: dict, width: int, selected: bool = False, t0: int = 0) -> Text:
    """One timeline line, ``width`` cells wide (a time column appears past 100 cells)."""
    where = f"{row['shard']}:{row['seq']}"
    kind = row["kind"] or "?"
    req = row.get("request") or "-"
    t = Text(no_wrap=True, overflow="crop")
    t.append(f"{row['ord']:>7} ", "grey50")
    if width >= 100 and row.get("t_ns") is not None:
        t.append(f"{(row['t_ns'] - t0) / 1e6:>10.3f}ms ", "grey50")
    t.append(f"{where:<14.14} ", "bold" if selected else "")
    t.append(f"{kind:<11.11} ", KIND_STYLE.get(kind, ""))
    t.append(f"{req:<10.10} ", "italic")
    t.append(what(row))
    t.truncate(width, pad=True)
    if selected:
        t.stylize(Style(reverse=True))
    return t


HEADER_FIELDS = ("row", "shard:seq", "kind", "request", "what")


def header(width: int) -> Text:
    """The column header line matching format_row."""
    t = Text(no_wrap=True, overflow="crop", style="bold underline")
    t.append(f"{'row':>7} ")
    if width >= 100:
        t.append(f"{'time':>12} ")
    t.append(f"{'shard:seq':<14} {'kind':<11} {'request':<10} what")
    t.truncate(width, pad=True)
    return t
