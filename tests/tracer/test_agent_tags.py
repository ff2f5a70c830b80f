"""Notification tag parsers (tracer/tags.py): SGLang and vLLM presets, user patterns."""
import pytest

from kvtrace.tracer.tags import make_parser


@pytest.mark.parametrize("msg, key", [
    (b"7_kv_0_1_0", "7"), (b"123456789012_kv_3_0_1", "123456789012"), (b"7_aux", "7"),
    (b"7_state_0_2", "7"), (b"-5_kv_0_1_0", "-5"), (b"room_kv_0", None), (b"7:2", None), (b"", None), (None, None),
])
def test_sglang(msg, key):
    assert make_parser("sglang")(msg) == key


@pytest.mark.parametrize("msg, key", [
    (b"cmpl-abc123-0:2", "cmpl-abc123-0"), (b"a:b:4", "a:b"), (b"nocolon", None), (b"x:y", None),
])
def test_vllm(msg, key):
    assert make_parser("vllm")(msg) == key


def test_auto_tries_sglang_then_vllm():
    p = make_parser("auto")
    assert (p(b"9_aux"), p(b"req-1:8"), p(b"hello")) == ("9", "req-1", None)


def test_user_pattern_and_callable():
    assert make_parser(r"job=(?P<request>\w+)")(b"job=alpha;x") == "alpha"
    assert make_parser(r"job=(?P<request>\w+)")("job=beta") == "beta"  # str payloads work too
    assert make_parser(lambda m: "k")(b"anything") == "k"
    assert make_parser(None) is None and make_parser("none") is None


@pytest.mark.parametrize("bad, words", [("(open", "regular expression"), (r"\d+", "named group")])
def test_bad_patterns_say_what_is_wrong(bad, words):
    with pytest.raises(ValueError, match=words):
        make_parser(bad)


_TRICKY = [b"7_kv_0_1_0", b"7_kv", b"7_kv_", b"7_kvx", b"7_kv\n", b"7_aux_\n", b"7_state", b"7_stat", b"-_kv", b"-",
           b"--5_kv", b"-5_kv_0", b"5", b"_kv", b"5_", b"5__kv", b"05_aux", b"\xff_kv", b"7_kv_\xff\xfe", b"a:1",
           b":1", b"a:", b"a:1x", b"a:12\n", b"a\n:3", b"\xff\xfe:3", b"a:b:c:42", b"a::42", b"::", b":", b"x",
           b"1:2", b"7_aux:3", b"7_auxx:3", "\u00e9:3".encode(), b"\x00_kv\x00:1", b"12_kv_0_1_0:4"]


@pytest.mark.parametrize("presets, bits", [("sglang", 1), ("vllm", 2), ("auto", 3)])
def test_presets_in_c_match_the_regex(presets, bits):
    """The NIXL tap's C calls match the presets without the regex engine (tracer/_rows.c
    tag_parse): the same request for every message, matching or not."""
    from kvtrace.tracer.recorder import _c_rows
    if _c_rows is None or not hasattr(_c_rows, "tag_parse"):
        pytest.skip("the C rows are not built")
    parse = make_parser(presets)
    assert parse.presets == {"sglang": ("sglang",), "vllm": ("vllm",), "auto": ("sglang", "vllm")}[presets]
    for msg in _TRICKY:
        assert _c_rows.tag_parse(bits, msg) == parse(msg), msg
    assert make_parser(r"(?P<request>\d+)").presets == ()   # a user pattern: its own regex, no preset
