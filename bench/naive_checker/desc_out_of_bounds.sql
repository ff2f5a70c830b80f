-- naive desc_out_of_bounds: a descriptor end whose bytes are not inside one registered
-- layout region of its agent.
WITH ends AS (
    SELECT shard, xfer, pos, src_agent AS agent, src_addr AS addr, nbytes FROM descs
    UNION ALL
    SELECT shard, xfer, pos, dst_agent, dst_addr, nbytes FROM descs
)
SELECT 'desc_out_of_bounds' AS hazard, e.agent, e.shard, e.xfer, e.pos FROM ends e
WHERE NOT EXISTS (SELECT 1 FROM layouts l WHERE l.agent = e.agent AND e.addr >= l.addr
                                            AND e.addr + e.nbytes <= l.addr + l.nbytes)
