-- slot_sizes: every distinct slot size of the layouts (poison needs one checksum per size).
-- Columns: slot_bytes UBIGINT
SELECT DISTINCT slot_bytes FROM lay WHERE slot_bytes > 0
