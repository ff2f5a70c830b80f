"""kvtrace.replay"""
