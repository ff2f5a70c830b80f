-- unattributed_xfers: the transfers posted without a request, with what a sentence about
-- them needs (used to regroup findings on them, see analysis/unattributed.py).
-- Columns: shard VARCHAR, post_seq BIGINT, xfer BIGINT, agent VARCHAR (initiator),
--   peer VARCHAR, tag VARCHAR (the notification tag, printable), op VARCHAR,
--   ndesc BIGINT, nbytes UBIGINT (descriptor bytes)
SELECT x.shard, x.post_seq, x.xfer, x.agent, x.peer,
       CASE WHEN x.msg IS NULL THEN NULL ELSE decode(x.msg) END AS tag, x.op, x.ndesc,
       (SELECT sum(d.nbytes) FROM descs d WHERE d.shard = x.shard AND d.xfer = x.xfer)::UBIGINT AS nbytes
FROM xfers x WHERE x.request IS NULL;
