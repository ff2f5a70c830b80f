"""The model's derived objects: one object per SQL file, build order from declarations."""
import pytest

from kvtrace.model.derived import Derived, RegistryError
from kvtrace.model.registry import BASE, build_order, on_demand, parse_sql, registry


def test_every_object_declares_known_requirements_and_sorts():
    objs = registry()
    order = build_order(objs, sorted(objs))
    assert sorted(order) == sorted(objs)
    pos = {n: i for i, n in enumerate(order)}
    for d in objs.values():
        for r in d.requires:
            assert r in BASE or pos[r] < pos[d.name], (d.name, r)


def test_python_builders_register_through_the_same_mechanism():
    objs = registry()
    for name in ("shards", "clocks", "xfer_seen_raw", "poison"):
        assert objs[name].build is not None and objs[name].sql is None
    assert "clocks" in objs["xfers"].requires


def test_sql_file_must_create_exactly_its_one_object():
    with pytest.raises(RegistryError, match="exactly one object named a"):
        parse_sql("a", "-- requires: events\nCREATE TABLE a AS SELECT 1;\nCREATE TABLE b AS SELECT 2;")
    with pytest.raises(RegistryError, match="requires"):
        parse_sql("a", "CREATE TABLE a AS SELECT 1;")
    assert parse_sql("a", "-- a: x\n-- requires: events, b\nCREATE OR REPLACE TABLE a AS SELECT 1").requires == (
        "events", "b")


def test_cycle_and_missing_requirement_are_clear_errors():
    objs = {"a": Derived("a", ("b",)), "b": Derived("b", ("a",))}
    with pytest.raises(RegistryError, match="cycle: a -> b -> a"):
        build_order(objs)
    with pytest.raises(RegistryError, match="a requires 'zz'"):
        build_order({"a": Derived("a", ("zz",))})


def test_targets_pull_only_their_requirements():
    objs = registry()
    order = build_order(objs, ["sync_pairs"])
    assert order == ["shards", "sync_pairs"]


def test_on_demand_objects_and_their_dependents_wait_to_be_asked_for():
    objs = registry()
    lazy = on_demand(objs)
    assert {"timeline", "xfer_span", "slot_history"} <= lazy and "holdings" not in lazy
    assert not lazy & set(build_order(objs))
    assert "timeline" in build_order(objs, ["slot_history"])
    assert "prog_order" in lazy and objs["prog_order"].sql        # a SQL file's "-- on demand:" header
    assert parse_sql("a", "-- requires: events\n-- on demand: no check reads it\nCREATE TABLE a AS SELECT 1").on_demand
    assert not parse_sql("a", "-- requires: events\nCREATE TABLE a AS SELECT 1").on_demand


def test_table_query_is_the_select_a_table_file_stores():
    """Past the memory share a SQL table is written straight from its query to Parquet
    (TraceModel._write_out): the query is what follows "CREATE ... TABLE name AS"."""
    from kvtrace.model.registry import table_query
    assert table_query(parse_sql("a", "-- a: x\n-- requires: events\nCREATE OR REPLACE TABLE a AS\nWITH t AS (SELECT 1 AS v)\nSELECT v FROM t;\n")) \
        == "WITH t AS (SELECT 1 AS v)\nSELECT v FROM t"
    assert table_query(parse_sql("m", "-- requires:\nCREATE OR REPLACE MACRO m(x) AS x + 1;")) is None
    assert table_query(parse_sql("v", "-- requires: events\nCREATE VIEW v AS SELECT 1;")) is None
    objs = registry()
    tables = [n for n, d in objs.items() if d.sql and "TABLE " + n in d.sql]
    assert {"desc_hold_ids", "read_predict_ids", "desc_match_ids"} <= set(tables)
    for n in tables:
        q = table_query(objs[n])
        assert q and not q.upper().startswith("CREATE") and not q.endswith(";")
    assert table_query(objs["shards"]) is None                # a Python builder
