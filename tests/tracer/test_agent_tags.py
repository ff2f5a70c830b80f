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
