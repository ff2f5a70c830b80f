-- visible_ords: the ords the current filter keeps (tui_visible, see filter_ords), in order.
SELECT ord FROM tui_visible ORDER BY ord
