"""Thin adapters from each framework's lifecycle onto the shared Recorder.

`base.Adapter` is what every hook shares; `session.Session` is what a hook composes around
its Recorder (the store, the profiler, the live watcher). Only these modules, and the public
shims (`mldbg.torch`, ...), import a framework; nothing else in mldbg does.
"""
