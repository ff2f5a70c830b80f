"""kvtrace: record/replay and trace analysis for PD KV-cache transfers."""
__version__ = "0.1.0"
