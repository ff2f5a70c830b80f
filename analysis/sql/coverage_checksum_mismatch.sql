-- coverage: checksum_mismatch
-- items: read slot layers with a checksum
-- left_out: nothing recorded predicts what they hold: a transfer filled them with part of a
--   slot (e.g. one tensor-parallel rank's head slice) or from a source written without a
--   checksum, or transfers not ordered with each other filled them, or no write or transfer
--   into them is recorded; kvtrace predicts a read's checksum only from the latest
--   checksummed write into it or the one latest copy of whole slots of one
-- requires: read_predict_ids
-- One row: compared (reads whose content the data flow predicts: checksum_mismatch
-- compares their checksum with it) and left_out (every other read with a checksum, but
-- one: a local write not ordered with the transfer into the slot makes the prediction
-- ambiguous on purpose, and the race checks report that pair). Identical TP replicas
-- sent into one slot are legal and still leave the read unpredicted, so they count here.
SELECT count(predicted) AS compared,
       count(*) FILTER (WHERE predicted IS NULL AND NOT (via_xfer IS NULL AND x_post IS NOT NULL)) AS left_out
FROM read_predict_ids
