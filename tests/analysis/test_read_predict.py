"""read_predict where one slot layer generation receives two transfers (decode asks for a
resend into the same pages): each read is predicted from the latest transfer not posted
after it — the general join + group-by that such generations take, beside the one-transfer
join every other generation takes. The read before the resend is predicted from the first
transfer, the read after it from the resend; the bug twin reads before the resend's bytes
land (though notified), so its reads hold the first transfer's bytes and checksum_mismatch
reports them."""
from __future__ import annotations

import pytest

from kvtrace.analysis.session import TraceSession

from cases_helpers import handshake, pd


def _resend(path, bug):
    b, p, d = pd(path)                      # pool kv: 2 layers
    handshake(p, d, "r1", [3])
    p.alloc("r1", "kv", [1, 2])
    p.write("r1", "kv", [1, 2])             # two pages: two contents
    x1 = p.post("r1", d, src=("kv", [1]), dst=("kv", [3]), msg=b"r1_kv")
    d.notif_recv(p, b"r1_kv", request="r1")
    first = d.read("r1", "kv", [3])
    d.msg_send(p, "r1/resend", request="r1")   # the read happens-before the resend's post
    p.msg_recv(d, "r1/resend", request="r1")
    x2 = p.post("r1", d, src=("kv", [2]), dst=("kv", [3]), msg=b"r1_kv2", deliver="later" if bug else "post")
    d.notif_recv(p, b"r1_kv2", request="r1")
    second = d.read("r1", "kv", [3])
    for x in (x1, x2):
        p.done(x, "r1")
        p.release(x, "r1")
    p.free("r1", "kv", [1, 2])
    d.free("r1", "kv", [3])
    d.req_done("r1")
    b.close()
    return int(x1), int(x2), first, second


@pytest.mark.parametrize("bug", [False, True])
def test_resend_into_one_generation(tmp_path, bug):
    path = str(tmp_path / f"resend-{int(bug)}.kvtrace")
    x1, x2, first, second = _resend(path, bug)
    with TraceSession(path) as s:
        s.derive(["read_predict"])
        post = {r["xfer"]: r["post_seq"] for r in s.query("SELECT xfer, post_seq FROM xfers").to_pylist()}
        rows = s.query("SELECT seq, via, predicted, checksum, x_post FROM read_predict ORDER BY seq").to_pylist()
        # one row per read and layer: a read of a generation with two transfers is not doubled
        assert [r["seq"] for r in rows] == sorted(first + second)
        assert all(r["via"] == "xfer" for r in rows)
        assert [r["x_post"] for r in rows] == [post[x1]] * len(first) + [post[x2]] * len(second)
        assert all(r["predicted"] == r["checksum"] for r in rows if r["seq"] in first)
        after = [r for r in rows if r["seq"] in second]
        assert all((r["predicted"] != r["checksum"]) == bug for r in after)
        found = s.findings(["checksum_mismatch"])
        assert bool(found) == bug
