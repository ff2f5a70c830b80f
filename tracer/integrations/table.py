"""Hook points as data: which engine classes and methods ``--hooks NAME`` wraps.

Each engine names the module whose import triggers it, how to read its version, the
versions the hooks were written and tested against, and one row per hook point:
(module, class, attribute, when, handler, group). ``when`` is ``before`` (the handler
sees the arguments; runs before the engine acts, so what it records precedes the
engine's own effects), ``after`` (sees the result too) or ``around`` (wraps the call).
``group`` lets a user switch a kind of fact off (``--hooks sglang:-messages``):
layout | pages | content | messages | request | setup | trigger (the engine's own failure
reports, which dump a ``--ring`` recording). Handlers live in the engine's module
(sglang.py) under the names given here. A ``lazy`` row's module is not imported to hook it
(the engine's scheduler: heavy, imported by the engine itself); it is hooked when the
engine imports it.
"""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Hook:
    module: str
    cls: str | None        # None: a module-level function
    attr: str
    when: str              # before | after | around
    handler: str           # function name in the engine's handler module
    group: str
    lazy: bool = False     # hooked when the engine imports the module, never imported for it
    #: an ``after`` row's filter: the handler module's function (no arguments) returning the
    #: results the handler acts on; the others skip it (a poll the scheduler makes every step
    #: costs the engine one set lookup instead of the handler's frames)
    results: str | None = None


@dataclasses.dataclass(frozen=True)
class Engine:
    name: str
    title: str             # how users call it
    trigger: str           # the module whose import installs the hooks
    version_module: str    # module.attribute holding the version string
    version_attr: str
    supported: tuple[str, ...]
    handlers: str          # module (relative to this package) with the handler functions
    hooks: tuple[Hook, ...]


_SGL = "sglang.srt.disaggregation.nixl.conn"
_SGL_UTILS = "sglang.srt.disaggregation.common.utils"

SGLANG = Engine(
    name="sglang", title="SGLang's NIXL connector", trigger=_SGL,
    version_module="sglang.version", version_attr="__version__",
    supported=("0.5.21", "0.5.23"), handlers="sglang",
    hooks=(
        Hook(_SGL, "NixlKVManager", "__init__", "around", "manager_init", "setup"),
        Hook(_SGL, "NixlKVManager", "register_buffer_to_engine", "after", "regions", "layout"),
        Hook(_SGL, "NixlKVManager", "_build_transfer_dst_indices", "after", "entry_map", "layout"),
        Hook(_SGL, "NixlKVSender", "init", "after", "sender_init", "pages"),
        Hook(_SGL, "NixlKVSender", "send", "before", "sender_send", "pages"),
        Hook(_SGL, "NixlKVSender", "clear", "after", "sender_clear", "pages"),
        Hook(_SGL, "NixlKVReceiver", "send_metadata", "before", "receiver_metadata", "pages"),
        Hook(_SGL, "NixlKVReceiver", "poll", "after", "receiver_poll", "content", results="terminal_states"),
        # a room's Success/Failed handed from the thread that sets it to the one that polls it
        Hook(_SGL, "NixlKVManager", "update_status", "before", "status_set", "messages"),
        Hook(_SGL, "NixlKVSender", "poll", "after", "sender_poll", "messages", results="handed_states"),
        Hook(_SGL, "NixlKVReceiver", "clear", "before", "receiver_clear", "pages"),
        Hook(_SGL, "TransferInfo", "from_zmq", "after", "transfer_info", "messages"),
        Hook(_SGL, "NixlKVManager", "send_kv_status_message", "before", "status_send", "messages"),
        Hook(_SGL, "NixlKVManager", "apply_prefill_status", "before", "status_recv", "messages"),
        Hook(_SGL_UTILS, "FastQueue", "get", "after", "queue_get", "request"),
        # --disaggregation-enable-kv-checksum: decode's scheduler found a request's KV differs
        Hook("sglang.srt.disaggregation.decode", "SchedulerDisaggregationDecodeMixin",
             "_handle_kv_checksum_mismatch", "before", "checksum_mismatch", "trigger", lazy=True),
    ),
)

_VN = "vllm.distributed.kv_transfer.kv_connector.v1.nixl"

VLLM = Engine(
    name="vllm", title="vLLM's NIXL connector", trigger=f"{_VN}.connector",
    version_module="vllm.version", version_attr="__version__",
    supported=("0.34.0",), handlers="vllm",
    hooks=(
        Hook(f"{_VN}.base_worker", "NixlBaseConnectorWorker", "__init__", "around", "worker_init", "setup"),
        Hook(f"{_VN}.base_worker", "NixlBaseConnectorWorker", "register_kv_caches", "around", "regions", "layout"),
        # the scheduler class: request_finished and request_finished_all_groups (HMA) both end here
        Hook(f"{_VN}.pull_scheduler", "NixlPullConnectorScheduler", "request_finished", "after",
             "request_finished", "pages"),
        Hook(f"{_VN}.connector", "NixlPullConnector", "start_load_kv", "before", "finished_before_load", "pages"),
        Hook(f"{_VN}.connector", "NixlBaseConnector", "get_transfer_results", "before", "finished_with_results",
             "pages"),
        Hook(f"{_VN}.pull_worker", "NixlPullConnectorWorker", "start_load_kv", "before", "start_load_kv", "pages"),
        # vLLM's engine scheduler returns a finished request's blocks to its pool (an aborted
        # load's once the worker reported it): decode's blocks are free from then on
        Hook("vllm.v1.core.sched.scheduler", "Scheduler", "_free_blocks", "after", "scheduler_free", "pages",
             lazy=True),
        # the scheduler half in another process (multiprocess executor): prefill's blocks and
        # writes from the scheduler output the model runner's connector glue gets each step
        Hook(f"{_VN}.base_scheduler", "NixlBaseConnectorScheduler", "__init__", "after",
             "vllm_worker.scheduler_here", "pages"),
        *(Hook(f"vllm.v1.worker.{dev}.kv_connector", "ActiveKVConnector", step, "before", f"vllm_worker.{step}",
               "pages", lazy=True) for dev in ("cpu", "gpu") for step in ("pre_forward", "post_forward")),
        Hook(f"{_VN}.pull_worker", "NixlPullConnectorWorker", "_read_blocks_for_req", "before",
             "read_blocks_for_req", "request"),
        # what vLLM's model runner calls each step (get_finished is a wrapper around it)
        Hook(f"{_VN}.base_worker", "NixlBaseConnectorWorker", "get_transfer_results", "after", "transfer_results",
             "content"),
        # vLLM verifies no KV digest; what it reports going wrong with KV data: a transfer
        # that failed, and a decode read of blocks whose lease had expired (vllm #52234)
        Hook(f"{_VN}.base_worker", "NixlBaseConnectorWorker", "_handle_failed_transfer", "before",
             "failed_transfer", "trigger"),
        Hook(f"{_VN}.stats", "NixlKVConnectorStats", "record_notification_after_expiry", "before",
             "read_after_expiry", "trigger"),
    ),
)

ENGINES: dict[str, Engine] = {e.name: e for e in (SGLANG, VLLM)}
GROUPS = ("layout", "pages", "content", "messages", "request", "setup", "trigger")
