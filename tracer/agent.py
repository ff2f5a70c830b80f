"""TracedAgent: a drop-in ``nixl._api.nixl_agent`` that records every NIXL call.

    from kvtrace.tracer.agent import TracedAgent
    rec = Recorder("run.kvtrace", "prefill")
    agent = TracedAgent("prefill", nixl_agent_config(backends=["UCX"]), recorder=rec,
                        request_tags="sglang")

``TracedAgent`` *is* a ``nixl_agent`` (a subclass of the class NIXL installed), so every
method takes the same arguments and returns the same objects; recording happens in a
:class:`~kvtrace.tracer.agent_tap.BindingTap` placed between the Python class and its C++
binding. What lands in the trace (see docs/format.md):

- ``register`` / ``deregister`` per region (addr, nbytes, mem_type, device);
- ``dlists`` once per ``prep_xfer_dlist``;
- per ``transfer()`` a new ``xfer`` id, an ``xfer_post`` and every descriptor in ``descs``
  (src/dst by the direction the bytes move, WRITE and READ alike; prepped lists with
  their list ids and indices);
- ``xfer_done`` / ``xfer_error`` once per posting when a post or ``check_xfer_state``
  reports it (NIXL raising counts as ERR), with ``get_xfer_telemetry`` in ``detail``
  when the agent's config captures telemetry; ``xfer_release``;
- ``notif_send`` and one ``notif_recv`` per delivered message (``xfer`` null).

Requests come from ``recorder.request(key)`` when active, else from the notification
tag parser (``request_tags``: 'sglang', 'vllm', 'auto', a regex with ``(?P<request>...)``
or a callable). Without ``recorder`` the process recorder of ``kvtrace record -- CMD``
is used; with neither, the agent is a plain nixl_agent.
"""
from __future__ import annotations

import importlib

from numpy import ndarray as _ndarray

from .process_recorder import default_recorder, default_request_tags
from .tags import make_parser

_CLASSES: dict = {}


class _TracingMixin:
    """Adds recording to a nixl_agent subclass; see the module docstring."""

    def __init__(self, agent_name, nixl_conf=None, *args, recorder=None, request_tags=None,
                 config=None, **kwargs):
        if config is not None and nixl_conf is None:
            nixl_conf = config
        super().__init__(agent_name, nixl_conf, *args, **kwargs)
        rec = recorder if recorder is not None else default_recorder()
        #: the Recorder this agent writes to (None: untraced)
        self.kvtrace_recorder = rec
        if rec is not None:
            from .agent_tap import BindingTap
            tags = request_tags if request_tags is not None else default_request_tags()
            telemetry = bool(getattr(nixl_conf, "capture_telemetry", False))
            self.agent = BindingTap(self.agent, self.name, rec, make_parser(tags), telemetry)

    def get_xfer_descs(self, descs, mem_type=None):
        out = super().get_xfer_descs(descs, mem_type)
        # an Nx3 array (how SGLang and vLLM pass a posting's descriptors): the tap keeps it,
        # so initialize_xfer records the list's columns without reading the list back
        if out is not None and out is not descs and type(descs) is _ndarray:
            made = getattr(self.agent, "made_list", None)   # None: the binding itself (not recorded)
            if made is not None:
                made(out, descs, self.nixl_mems.get(mem_type))
        return out


def traced_class(base: type) -> type:
    """The TracedAgent class for a given nixl_agent class (one per base, cached)."""
    cls = _CLASSES.get(base)
    if cls is None:
        cls = type("TracedAgent", (_TracingMixin, base),
                   {"__doc__": base.__doc__, "__module__": __name__, "__qualname__": "TracedAgent",
                    "_kvtrace_base": base})
        _CLASSES[base] = cls
    return cls


def original_agent_class() -> type:
    """NIXL's own nixl_agent class, even when ``kvtrace record`` has patched ``nixl._api``."""
    mod = importlib.import_module("nixl._api")
    return getattr(mod, "_kvtrace_original_nixl_agent", mod.nixl_agent)


def __getattr__(name: str):
    # lazy: importing nixl costs ~0.3 s and must happen only for those who use it
    if name == "TracedAgent":
        cls = traced_class(original_agent_class())
        globals()["TracedAgent"] = cls
        return cls
    raise AttributeError(name)
