-- filter_ords: the timeline rows (ords) a filter keeps, into the temp table tui_visible.
-- One fixed query: every field of the filter is a named parameter, NULL when the field
-- does not restrict. $by_desc (slot, agent and pool all given) also keeps the transfer
-- events whose descriptors touch that slot (tui_slot_xfers, filled first by slot_xfers):
-- transfer events carry no pool or slot, so agent/pool then restrict only the slot events.
CREATE OR REPLACE TEMP TABLE tui_visible AS
SELECT ord FROM tl
WHERE ($request::VARCHAR IS NULL OR request = $request::VARCHAR)
  AND ($shard::VARCHAR IS NULL OR shard = $shard::VARCHAR)
  AND ($kinds::VARCHAR[] IS NULL OR list_contains($kinds::VARCHAR[], kind))
  AND ($xfer::BIGINT IS NULL OR xfer = $xfer::BIGINT OR pair_xfer = $xfer::BIGINT)
  AND ($text::VARCHAR IS NULL OR concat_ws(' ', agent, kind, request, pool, peer, status, detail,
                                           CAST(msg AS VARCHAR)) ILIKE $text::VARCHAR)
  AND ((($agent::VARCHAR IS NULL OR agent = $agent::VARCHAR)
        AND ($pool::VARCHAR IS NULL OR pool = $pool::VARCHAR)
        AND ($slot::BIGINT IS NULL OR list_contains(slots, $slot::BIGINT)))
       OR ($by_desc::BOOLEAN AND ((shard, xfer) IN (SELECT (shard, xfer) FROM tui_slot_xfers)
                                  OR (pair_shard, pair_xfer) IN (SELECT (shard, xfer) FROM tui_slot_xfers))))
