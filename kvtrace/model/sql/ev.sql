-- ev: macro ev(shard, seq): an event reference as findings list them, {shard, seq}.
-- requires:
CREATE OR REPLACE MACRO ev(s, q) AS {'shard': s, 'seq': q::BIGINT};
