-- fact: prepped_lists_mixing_slot_counts
-- counts: prepared descriptor lists whose regions differ in slot count (only there can
--   one region's slot count, applied to every region, misaddress a page)
-- absent: the regions of every prepared list have the same slot count, so one count applied to all cannot misaddress them
-- requires: dl_region
SELECT count(*) AS n FROM (SELECT shard, dlist FROM dl_region GROUP BY ALL HAVING count(DISTINCT num_slots) > 1)
