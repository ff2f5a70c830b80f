-- coverage: checksum_mismatch
-- items: read slot layers with a checksum
-- left_out: a transfer filled them with part of a slot (e.g. one tensor-parallel rank's
--   head slice) or from a source written without a checksum, or transfers not ordered with
--   each other filled them, and kvtrace predicts a read's checksum only from the one latest
--   whole-slot copy of a checksummed write
-- requires: read_predict_ids
-- One row: compared (reads whose content the data flow predicts: checksum_mismatch
-- compares their checksum with it) and left_out (reads a transfer filled whose content is
-- not predicted). Reads with no prediction for other reasons are not counted here: a
-- local write concurrent with the transfer (the race checks report it) or no producer at
-- all (read_undelivered reports it). Concurrent transfers into one slot layer are counted:
-- identical TP replicas are legal (overlapping_inflight_writes stays quiet on equal source
-- checksums) and still leave the read unpredicted.
SELECT count(predicted) AS compared,
       count(*) FILTER (WHERE via_xfer AND predicted IS NULL) AS left_out
FROM read_predict_ids
