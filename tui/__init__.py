"""kvtrace.tui"""
