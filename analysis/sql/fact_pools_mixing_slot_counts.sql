-- fact: pools_mixing_slot_counts
-- counts: agents whose pools' layers (layouts) or whose prepared lists' regions do not all
--   have the same slot count: the layout in which a slot count taken from one pool can
--   misaddress another
-- absent: every agent's pools have one slot count
-- requires: lay, dl_region
SELECT (SELECT count(*) FROM (SELECT agent FROM lay GROUP BY agent HAVING count(DISTINCT num_slots) > 1))
     + (SELECT count(*) FROM (SELECT shard, dlist FROM dl_region GROUP BY ALL HAVING count(DISTINCT num_slots) > 1)) AS n
