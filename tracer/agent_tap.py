"""BindingTap: records what a nixl_agent asks of its C++ binding object.

``nixl_agent`` keeps the binding in ``self.agent`` and every public method funnels into
it (``register_memory`` -> ``registerMem``, ``transfer`` -> ``postXferReq``, handle
``release()`` and ``__del__`` -> ``releaseXferReq``, ``update_notifs`` and
``check_remote_xfer_done`` -> ``getNotifs``...). Tapping there, instead of overriding the
Python methods, records every path -- including the ones that bypass the public methods
-- while the Python layer, its arguments and its results stay NIXL's own.

Ordering invariant: an ``xfer_post`` / ``notif_send`` is recorded *before* NIXL is asked
to act, so no effect of it (a notification polled by another thread of this process)
can get a smaller ``seq``. Completions and registrations are recorded after NIXL
reports them.
"""
from __future__ import annotations

import sys
import threading

import numpy as np

from .agent_descs import Descs, array_descs, mem_name, reg_descs, strided_descs, xfer_descs
from .recorder import NATIVE_ROWS, Recorder, _text, current_request
from .schema import UNTRACED_AFTER_CLOSE
from .schema import EventKind as K


class _Dlist:
    __slots__ = ("id", "agent", "text", "descs", "uniform", "size", "dev")

    def __init__(self, id_: int, agent: str, descs: Descs):
        self.id, self.agent, self.descs = id_, agent, descs
        self.text = _text(agent)  # the agent as its descriptor rows record it (once, not per posting)
        nb, dv = descs.nbytes, descs.device
        # every entry the same size (a pool's pages): a posting's bytes are count x size
        self.uniform = int(nb[0]) if len(nb) and bool((nb == nb[0]).all()) else None
        # one size / one device for every entry: a posting's column is that one value
        # (a 0-d array: Recorder.descs_prepared's "shared by every descriptor"), not a gather
        self.size = None if self.uniform is None else np.asarray(nb[0], np.uint64)
        self.dev = np.asarray(dv[0], np.int32) if len(dv) and bool((dv == dv[0]).all()) else None


class _Handle:
    """One transfer handle: descriptors resolved once, state of its latest posting."""
    __slots__ = ("op", "remote", "notif", "total", "detail", "xfer", "request", "terminal", "tagged",
                 "hashes", "descs")

    def __init__(self, op: str, remote: str, notif: bytes, descs: tuple, detail: str, total: int):
        """``descs``: its descriptors' rows less the xfer id, in Recorder.descs_prepared's form
        (:func:`_handle_descs`): every posting of this handle records them; ``total``: the
        posting's bytes."""
        self.op, self.remote, self.notif, self.descs, self.detail, self.total = op, remote, notif, descs, detail, total
        self.xfer = None
        self.request = None
        self.terminal = False
        self.tagged = (None, None)  # (msg, request its tag names): reposts skip the regex
        self.hashes = 0             # the recorder's hash mark at the latest posting (WRITE: our pages are read)


def _handle_descs(op: str, local_text: str, remote_text: str, local: tuple, remote_d: tuple,
                  ldl=None, lidx=None, rdl=None, ridx=None) -> tuple:
    """A handle's descriptor rows less the xfer id (the columns already of their types).
    ``local``/``remote_d``: (addresses, sizes, devices) of each side (sizes and devices:
    arrays or one 0-d value for all); the agents as text."""
    if op == "WRITE":  # src/dst is the direction the bytes move, whoever initiated
        return (op, local_text, remote_text, local[0], remote_d[0], local[1], local[2], remote_d[2],
                ldl, lidx, rdl, ridx, len(local[0]))
    return (op, remote_text, local_text, remote_d[0], local[0], remote_d[1], remote_d[2], local[2],
            rdl, ridx, ldl, lidx, len(remote_d[0]))


class BindingTap:
    """Stands in for ``nixl_agent.agent``; unknown attributes pass through (and are cached)."""

    def __init__(self, inner, name: str, recorder: Recorder, parse=None, telemetry: bool = False,
                 native: bool = True):
        """``native``: the per-posting calls in C (tracer/_rows.c ``tap``) when the recorder's
        per-event methods are (same rows; False: these Python methods)."""
        self._inner = inner
        self._name = _name(name)
        self._text = _text(self._name)
        self._rec = recorder
        self._parse = parse
        self._telemetry = telemetry
        self._bind = sys.modules[type(inner).__module__]
        b = self._bind   # the status and op values, read once (one per call otherwise)
        self._IN_PROG, self._SUCCESS, self._WRITE = b.NIXL_IN_PROG, b.NIXL_SUCCESS, b.NIXL_WRITE
        self._dlists: dict[int, _Dlist] = {}
        self._handles: dict[int, _Handle] = {}
        self._untraced: dict[int, str] = {}  # handle -> why its postings cannot be recorded
        # id(list) -> (list, its rows, mem): lists get_xfer_descs made of Nx3 arrays, until a
        # createXferReq takes them (their columns then need no read-back of the list)
        self._made: dict[int, tuple] = {}
        self._lock = threading.Lock()  # a completion is recorded once even if two threads poll
        self._new_handle = _Handle
        if native:
            self._native()

    def _native(self) -> None:
        """makeXferReq, createXferReq, postXferReq, getXferStatus, releaseXferReq and getNotifs in C (tracer/_rows.c ``tap``):
        the same calls into NIXL and the same rows, no Python frame per call. Only on a recorder
        whose nixl_event is the C appender's (not KVTRACE_ROWS=python, not a subclass's own);
        the C calls claim a completion under the GIL instead of this tap's lock, so every handle
        is then its TapHandle."""
        ap = getattr(self._rec.nixl_event, "__self__", None)
        if NATIVE_ROWS is None or not hasattr(NATIVE_ROWS, "tap") or type(ap) is not NATIVE_ROWS.Appender:
            return
        rec, cls = self._rec, type(self._rec)
        xfer_ids = rec._xfer_ids if cls.new_xfer_id is Recorder.new_xfer_id else None
        plain = cls.hash_mark is Recorder.hash_mark and cls.wait_hashes is Recorder.wait_hashes
        c = NATIVE_ROWS.tap(self, self._inner, self._name, ap, xfer_ids, self._handles, self._untraced,
                            self._parse, self._telemetry, self._IN_PROG, self._SUCCESS,
                            (_POST, _DONE, _RELEASE, _RECV, "DONE", "WRITE", "READ", _CLOSED, _BEFORE),
                            (BindingTap.postXferReq, BindingTap.getXferStatus, BindingTap.releaseXferReq,
                             BindingTap.getNotifs, BindingTap.makeXferReq, BindingTap.createXferReq), plain,
                            self._dlists, self._text, self._WRITE, np.empty, np.dtype(np.int64), np.dtype(np.uint64),
                            np.dtype(np.int32), cls.descs_posted is Recorder.descs_posted)
        self._new_handle = NATIVE_ROWS.TapHandle
        self.postXferReq, self.getXferStatus = c.postXferReq, c.getXferStatus
        self.releaseXferReq, self.getNotifs, self.makeXferReq = c.releaseXferReq, c.getNotifs, c.makeXferReq
        self.createXferReq = c.createXferReq

    def __getattr__(self, attr):
        value = getattr(self._inner, attr)
        if callable(value):
            setattr(self, attr, value)  # next call skips __getattr__
        return value

    def _request(self, msg) -> str | None:
        req = current_request.get()
        if req is None and self._parse is not None and msg:
            req = self._parse(msg)
        return req

    # ------------------------------------------------------------ memory
    def registerMem(self, descs, *args, **kwargs):
        out = self._inner.registerMem(descs, *args, **kwargs)
        self._regions(K.REGISTER, descs)
        return out

    def deregisterMem(self, descs, *args, **kwargs):
        # memory is freed after it is deregistered: no background hash may still read it
        self._rec.wait_hashes()
        out = self._inner.deregisterMem(descs, *args, **kwargs)
        self._regions(K.DEREGISTER, descs)
        return out

    def _regions(self, kind, descs) -> None:
        d = reg_descs(descs)
        for a, n, dev in zip(d.addr.tolist(), d.nbytes.tolist(), d.device.tolist()):
            self._rec.event(kind, self._name, None, addr=a, nbytes=n, mem_type=d.mem_type, device=dev)

    # ------------------------------------------------------------ prepared lists
    def prepXferDlist(self, agent_name, *args):
        handle = self._inner.prepXferDlist(agent_name, *args)
        agent_name = _name(agent_name)
        if len(args) >= 2 and isinstance(args[1], np.ndarray) and args[1].ndim == 2 and args[1].shape[1] == 5:
            d = strided_descs(args[1], mem_name(args[0]))
        else:
            d = self._columns(args[0])   # (vLLM prepares the lists get_xfer_descs made)
        local = agent_name == _name(self._bind.NIXL_INIT_AGENT)
        owner = self._name if local else agent_name
        dl = _Dlist(self._rec.new_dlist_id(), owner, d)
        self._rec.dlist_array(dl.id, owner, None if local else agent_name, d.addr, d.nbytes, d.device,
                              mem_type=d.mem_type)
        self._dlists[handle] = dl
        return handle

    def releasedDlistH(self, handle):
        out = self._inner.releasedDlistH(handle)
        self._dlists.pop(handle, None)
        return out

    # ------------------------------------------------------------ transfer handles
    def _op(self, op) -> str:
        return "WRITE" if op == self._WRITE else "READ"

    def makeXferReq(self, op, local_h, local_idx, remote_h, remote_idx, notif=b"", *args):
        handle = self._inner.makeXferReq(op, local_h, local_idx, remote_h, remote_idx, notif, *args)
        self._prepped(handle, op, local_h, local_idx, remote_h, remote_idx, notif)
        return handle

    def _prepped(self, handle, op, local_h, local_idx, remote_h, remote_idx, notif) -> None:
        """The handle NIXL made of two prepared lists: its descriptors resolved once."""
        dlists = self._dlists
        L, R = dlists.get(local_h), dlists.get(remote_h)
        if L is not None and R is not None:
            # copies: an engine may reuse its index arrays once NIXL made the handle
            li = np.array(local_idx, dtype=np.int64)
            ri = np.array(remote_idx, dtype=np.int64)
            ld, rd = L.descs, R.descs
            # each side's (addresses, sizes, devices): sizes and devices as one 0-d value when every
            # entry of its list shares it
            lsz = ld.nbytes[li] if L.size is None else L.size
            local = (ld.addr[li], lsz, ld.device[li] if L.dev is None else L.dev)
            remote = (rd.addr[ri], rd.nbytes[ri] if R.size is None else R.size,
                      rd.device[ri] if R.dev is None else R.dev)
            total = L.uniform * len(li) if L.uniform is not None else (int(lsz.sum()) if len(lsz) else 0)
            op_ = "WRITE" if op == self._WRITE else "READ"
            detail = f'{{"handle": "{hex(handle)}", "prepped": true}}'  # = json.dumps of that dict
            self._handles[handle] = self._new_handle(
                op_, R.agent, _bytes(notif),
                _handle_descs(op_, self._text, R.text, local, remote, L.id, li, R.id, ri), detail, total)
        else:
            self._untraced[handle] = "descriptor list prepared before tracing started"

    def made_list(self, dl, rows, mem_seg) -> None:
        """``nixl_agent.get_xfer_descs`` made ``dl`` of the Nx3 array ``rows`` (the agent's
        get_xfer_descs, agent.py): createXferReq takes its columns from a copy of ``rows``
        (~2 us) instead of reading the list back (~5 us, ~11 us beside a transfer's cache misses)."""
        if len(rows) > _MADE_ROWS_MAX:   # not copied: a list this long is read back when it is used
            return
        made = self._made
        if len(made) >= _MADE_MAX:   # lists never given to createXferReq: forget them (read back if they come)
            made.clear()
        made[id(dl)] = (dl, rows.copy(), mem_seg)   # a copy: the engine may refill its array for the next list

    def _columns(self, dl) -> Descs:
        """A transfer list's columns: from the rows it was made of when get_xfer_descs saw
        them, else read back from the list."""
        got = self._made.pop(id(dl), None)
        if got is not None and got[0] is dl:
            try:
                d = array_descs(dl, got[1], mem_name(got[2]))
            except Exception:   # an unexpected list or array: the read-back is always right
                d = None
            if d is not None:
                return d
        return xfer_descs(dl)

    def createXferReq(self, op, local_descs, remote_descs, remote_agent, notif=b"", *args):
        handle = self._inner.createXferReq(op, local_descs, remote_descs, remote_agent, notif, *args)
        self._created(handle, op, local_descs, remote_descs, remote_agent, notif)
        return handle

    def _created(self, handle, op, local_descs, remote_descs, remote_agent, notif) -> None:
        """The handle NIXL made of two transfer lists: its descriptors resolved once."""
        detail = f'{{"handle": "{hex(handle)}", "prepped": false}}'  # = json.dumps of that dict
        L, R = self._columns(local_descs), self._columns(remote_descs)
        op_, remote = self._op(op), _name(remote_agent)
        self._handles[handle] = self._new_handle(op_, remote, _bytes(notif),
                                        _handle_descs(op_, self._text, _text(remote), L[:3], R[:3]), detail,
                                        int(L.nbytes.sum()) if len(L.nbytes) else 0)

    def postXferReq(self, handle, notif=b"", *args):
        H = self._handles.get(handle)
        if H is None or self._rec.closed:
            # NIXL still moves the bytes; the trace says how many postings it did not see
            self._rec.untraced(_CLOSED if self._rec.closed else self._untraced.get(handle, _BEFORE))
            return self._inner.postXferReq(handle, notif, *args)
        msg = _bytes(notif) if notif else H.notif  # an empty message keeps the one given at creation
        req = current_request.get()
        if req is None and msg:
            if H.tagged[0] != msg:
                H.tagged = (msg, self._parse(msg) if self._parse is not None else None)
            req = H.tagged[1]
        rec = self._rec
        xid = rec.new_xfer_id()
        rec.descs_posted(xid, H.descs)
        with self._lock:
            H.xfer, H.request, H.terminal = xid, req, False
            H.hashes = rec.hash_mark()
        rec.nixl_event(_POST, self._name, req, xid, H.remote, H.total, msg or None, None, H.detail)
        try:
            status = self._inner.postXferReq(handle, notif, *args)
        except Exception as e:  # NIXL raises on failures found at post (e.g. peer disconnected)
            self._terminal(handle, H, None, e)
            raise
        if status != self._IN_PROG:
            self._terminal(handle, H, status)
        return status

    def getXferStatus(self, handle):
        try:
            status = self._inner.getXferStatus(handle)
        except Exception as e:  # NIXL 1.x raises instead of returning an error status
            H = self._handles.get(handle)
            if H is not None:
                self._terminal(handle, H, None, e)
            raise
        if status != self._IN_PROG:
            H = self._handles.get(handle)
            if H is not None and not H.terminal:
                self._terminal(handle, H, status)
        return status

    def _terminal(self, handle, H: _Handle, status, error: Exception | None = None) -> None:
        with self._lock:
            if H.terminal or H.xfer is None:
                return
            H.terminal = True
        if H.op == "WRITE":  # the engine may reuse the pages this posting read once it hears: hash them first
            self._rec.wait_hashes(H.hashes)   # (tracer/async_sums.py; at once when no hash is pending)
        ok = error is None and status == self._SUCCESS
        if ok and not self._telemetry:   # the common case: no detail
            self._rec.nixl_event(_DONE, self._name, H.request, H.xfer, H.remote, H.total, None, "DONE")
            return
        self._terminal_detail(handle, H, status, error, ok)

    def _terminal_detail(self, handle, H, status, error: Exception | None, ok: bool) -> None:
        """The end of a posting that is not a plain success (an error, or telemetry asked for),
        once claimed (:meth:`_terminal`, or the C calls)."""
        detail = {}
        if error is not None:
            detail["error"] = f"{type(error).__name__}: {error}"
        elif not ok:
            detail["error"] = str(status)
        if ok and self._telemetry:
            try:
                t = self._inner.getXferTelemetry(handle)
                detail["telemetry"] = {"start_us": t.startTime, "post_us": t.postDuration,
                                       "xfer_us": t.xferDuration, "bytes": t.totalBytes, "descs": t.descCount}
            except Exception:  # telemetry is best effort; the completion itself is the fact
                pass
        self._rec.event(K.XFER_DONE if ok else K.XFER_ERROR, self._name, H.request, xfer=H.xfer,
                        peer=H.remote, nbytes=H.total, status="DONE" if ok else "ERR", detail=detail or None)

    def releaseXferReq(self, handle):
        out = self._inner.releaseXferReq(handle)
        H = self._handles.pop(handle, None)
        self._untraced.pop(handle, None)
        if H is not None and H.xfer is not None and not self._rec.closed:
            self._rec.nixl_event(_RELEASE, self._name, H.request, H.xfer, H.remote)
        return out

    # ------------------------------------------------------------ notifications
    def genNotif(self, remote, msg, *args):
        if not self._rec.closed:
            m = _bytes(msg)
            self._rec.event(K.NOTIF_SEND, self._name, self._request(m), peer=_name(remote), msg=m)
        return self._inner.genNotif(remote, msg, *args)

    def getNotifs(self, notif_map, *args):
        before = {k: len(v) for k, v in notif_map.items()} if notif_map else None
        out = self._inner.getNotifs(notif_map, *args)
        if out and not self._rec.closed:
            ev, name, parse = self._rec.nixl_event, self._name, self._parse
            for peer, msgs in out.items():
                peer_name = None
                for m in (msgs[before.get(peer, 0):] if before else msgs):  # one notif_recv per new message
                    if peer_name is None:
                        peer_name = _name(peer)
                    req = current_request.get()
                    if req is None and parse is not None and m:
                        req = parse(m)
                    ev(_RECV, name, req, None, peer_name, None, m)
        return out


_POST, _DONE, _RELEASE, _RECV = K.XFER_POST.value, K.XFER_DONE.value, K.XFER_RELEASE.value, K.NOTIF_RECV.value
_MADE_MAX = 256    # lists made and not yet given to createXferReq (threads x lists in flight)
_MADE_ROWS_MAX = 1 << 16   # the longest list kept so (a posting's; at most 256 x 1.5 MiB of copies held)
_CLOSED = UNTRACED_AFTER_CLOSE                                # why a posting went untraced
_BEFORE = "transfer handle created before tracing started"


def _name(agent) -> str:
    """An agent name as text: nixl's ``add_remote_agent`` returns the peer's name as bytes
    (annotated ``str``) and engines pass it on; both must record the same."""
    if isinstance(agent, (bytes, bytearray, memoryview)):
        return bytes(agent).decode("utf-8", "replace")
    return agent


def _bytes(msg) -> bytes:
    if isinstance(msg, str):
        return msg.encode()
    return bytes(msg) if msg else b""
