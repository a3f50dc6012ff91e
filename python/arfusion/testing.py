"""Test-only: local groups of several ranks in this process (several may share one GPU), so that
multi-rank calls can be tested on a single GPU. Needs the test build's libarfusion_testkit.so
(ARFUSION_LIBRARY=<build>/libarfusion_testkit.so before importing arfusion); never for production.

Such a group has no NCCL path. Its fused kernels spin-wait on each other, so every rank's call must
be in flight at once: issue each rank's call on its own stream (they return before the kernels
finish) and keep world * max_blocks within the GPU's SM count.
"""
import ctypes

from . import Communicator, _check, _config, library


def available():
    """Whether the loaded library carries the test entry points."""
    return hasattr(library, "arfusion_testing_create_group")


def create_group(world, devices=None, max_blocks=16, **config):
    """`world` Communicators, rank r on CUDA device devices[r] (default: all on the current device).
    config: Communicator's keyword arguments (strategy, sync_mode, timeout_seconds, ...)."""
    if not available():
        raise RuntimeError("arfusion.testing needs libarfusion_testkit.so (set ARFUSION_LIBRARY to it before importing arfusion)")
    if devices is None:
        import torch
        devices = [torch.cuda.current_device()] * world
    if len(devices) != world:
        raise ValueError(f"{len(devices)} devices for {world} ranks")
    cfg = _config(**config)
    handles = (ctypes.c_void_p * world)()
    _check(library.arfusion_testing_create_group(int(world), (ctypes.c_int * world)(*devices), ctypes.byref(cfg), int(max_blocks),
                                                 handles))
    return [Communicator._adopt(h) for h in handles]
