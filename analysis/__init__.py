"""kvtrace.analysis"""
