"""A parent makes a NIXL agent, then a fork-started child makes its own; each notifies itself.

The child inherits the parent's recorder object and must write its own shard instead.
Usage: forked.py
"""
import multiprocessing as mp
import sys
import time

from nixl._api import nixl_agent, nixl_agent_config


def make(name):
    return nixl_agent(name, nixl_agent_config(backends=["UCX"]))


def ping(a, timeout=10.0):
    a.send_notif(a.name, f"{a.name}:1".encode())
    got, deadline = [], time.time() + timeout
    while not got and time.time() < deadline:
        for msgs in a.get_new_notifs().values():
            got += msgs
    print(a.name, got)
    sys.stdout.flush()


def child():
    ping(make("child"), timeout=0.5)  # UCX after fork does not deliver it; do not wait long


if __name__ == "__main__":
    parent = make("parent")
    p = mp.get_context("fork").Process(target=child)
    p.start()
    p.join(30)
    ping(parent)
    sys.exit(p.exitcode)
