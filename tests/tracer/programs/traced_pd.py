"""pd_two_procs.py with TracedAgent used explicitly, the way an engine integrates it:
each process opens its own Recorder shard ("prefill", "decode") in one trace directory.

Usage: traced_pd.py TRACE_DIR
"""
import atexit
import os
import sys

import pd_two_procs as base


def traced_agent(name, port):
    from nixl._api import nixl_agent_config

    from kvtrace.tracer import Recorder
    from kvtrace.tracer.agent import TracedAgent
    rec = Recorder(os.environ["TRACED_PD_DIR"], name)  # set by main, inherited by the child
    atexit.register(rec.close)
    cfg = nixl_agent_config(backends=["UCX"], enable_listen_thread=True, listen_port=port, capture_telemetry=True)
    return TracedAgent(name, cfg, recorder=rec, request_tags="auto")


base.agent = traced_agent  # runs again in the spawned child, which re-imports this module

if __name__ == "__main__":
    os.environ["TRACED_PD_DIR"] = sys.argv[1]
    sys.exit(base.main())
