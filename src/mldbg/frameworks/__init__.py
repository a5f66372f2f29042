"""Thin adapters from each framework's lifecycle onto the shared Recorder.

Only these modules import a framework; nothing else in mldbg does.
"""
