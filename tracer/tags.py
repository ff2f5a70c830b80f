"""Request attribution from notification tags.

Engines name the request inside the notification they attach to a transfer, so a trace
recorded without engine hooks can still say which request a transfer belonged to:

- SGLang: ``{room}_kv_{chunk}_{is_last}_{rank}``, ``{room}_aux``, ``{room}_state_{rank}_{i}``
  -> request key ``{room}`` (the bootstrap room, the one id both sides share);
- vLLM NixlConnector: ``{req_id}:{world_size}`` -> request key ``{req_id}``.

A user pattern is a regular expression with a named group ``request`` (matched with
``re.match``, i.e. anchored at the start). ``auto`` tries SGLang, then vLLM.
"""
from __future__ import annotations

import re
from typing import Callable, Optional

#: preset name -> regular expression with a named group ``request``
PRESETS: dict[str, str] = {
    "sglang": r"(?P<request>-?\d+)_(?:kv|aux|state)(?:_.*)?\Z",
    # vLLM puts the prefill-side request id first; ids may themselves contain ':'
    "vllm": r"(?P<request>.+):(?P<world>\d+)\Z",
}

TagParser = Callable[[Optional[bytes]], Optional[str]]


def _compile(pattern: str) -> "re.Pattern[bytes]":
    try:
        rx = re.compile(pattern.encode(), re.DOTALL)
    except re.error as e:
        raise ValueError(f"--request-tag: not a valid regular expression ({e})") from None
    if "request" not in rx.groupindex:
        raise ValueError("--request-tag: the pattern needs a named group (?P<request>...)")
    return rx


def make_parser(spec: "str | TagParser | None") -> Optional[TagParser]:
    """A function ``msg bytes -> request key | None`` for a preset name, regex or callable.

    ``None`` gives ``None`` (no attribution from tags). Raises ValueError for a bad regex.
    """
    if spec is None or spec == "" or spec == "none":
        return None
    if callable(spec):
        return spec
    if spec == "auto":
        names = ("sglang", "vllm")
    elif spec in PRESETS:
        names = (spec,)
    else:
        names = ()
    rxs = [_compile(PRESETS[n]) for n in names] if names else [_compile(spec)]

    def parse(msg: Optional[bytes]) -> Optional[str]:
        if not msg:
            return None
        if isinstance(msg, str):
            msg = msg.encode()
        for rx in rxs:
            m = rx.match(msg)
            if m is not None:
                return m.group("request").decode(errors="replace")
        return None

    parse.spec = spec  # type: ignore[attr-defined]  # shown in `kvtrace info`-style summaries
    # the presets it tries, in order (the NIXL tap's C calls match these without the regex engine)
    parse.presets = names  # type: ignore[attr-defined]
    return parse
