"""arfusion's calls as torch custom ops (torch.library), so that torch.compile traces them and CUDA
graphs capture them. Importing this module registers, in the namespace ``torch.ops.arfusion``:

    allreduce(int comm, Tensor input, Tensor(a!) out) -> ()
    allreduce_add(int comm, Tensor input, Tensor? residual_in, Tensor(a!) residual_out) -> ()
    allreduce_add_rmsnorm(int comm, Tensor input, Tensor? residual_in, Tensor(a!)? residual_out,
                          Tensor gamma, Tensor(b!)? norm_out, Tensor(c!)? quant_values,
                          Tensor(d!)? quant_scales, float eps=1e-6, int quant=0, int layout=0,
                          Tensor? quant_scale=None, bool pow2_scales=False, bool gemma=False) -> ()
    add_rmsnorm(Tensor input, Tensor? residual_in, ... as above without comm) -> ()

Every tensor an op writes is a required argument (pass None for an output you do not want): torch
bumps the version counter of each mutated argument by its position, so a mutated argument left to a
default would not be there to bump.

``comm`` is ``Communicator.handle``. Every op writes into tensors the caller passes (outputs are
preallocated, as engines keep them across layers; ``residual_out`` may be ``residual_in``), so the
fake implementations have nothing to compute. ``quant`` and ``layout`` are the values of
``arfusion.QUANT_FORMATS`` and ``arfusion.SCALE_LAYOUTS``. The ops run on
``torch.cuda.current_stream()``; errors raise ``arfusion.Error`` (or ValueError/TypeError for a
tensor of the wrong shape, dtype, device or layout) before anything is written.
"""
from typing import Optional

import torch

from . import NormArgs, add_rmsnorm as _add_rmsnorm, allreduce as _allreduce, allreduce_add as _allreduce_add
from . import allreduce_add_rmsnorm as _allreduce_add_rmsnorm

__all__ = ["allreduce", "allreduce_add", "allreduce_add_rmsnorm", "add_rmsnorm"]


def _options(quant, layout, quant_values, quant_scales, quant_scale, pow2_scales, gemma):
    return NormArgs(quant=int(quant), layout=int(layout), values=quant_values, scales=quant_scales, scale=quant_scale,
                    pow2_scales=pow2_scales, gemma=gemma)


@torch.library.custom_op("arfusion::allreduce", mutates_args=("out",))
def allreduce(comm: int, input: torch.Tensor, out: torch.Tensor) -> None:
    _allreduce(comm, input, out)


@torch.library.custom_op("arfusion::allreduce_add", mutates_args=("residual_out",))
def allreduce_add(comm: int, input: torch.Tensor, residual_in: Optional[torch.Tensor], residual_out: torch.Tensor) -> None:
    _allreduce_add(comm, input, residual_in, residual_out)


@torch.library.custom_op("arfusion::allreduce_add_rmsnorm",
                         mutates_args=("residual_out", "norm_out", "quant_values", "quant_scales"))
def allreduce_add_rmsnorm(comm: int, input: torch.Tensor, residual_in: Optional[torch.Tensor],
                          residual_out: Optional[torch.Tensor], gamma: torch.Tensor, norm_out: Optional[torch.Tensor],
                          quant_values: Optional[torch.Tensor], quant_scales: Optional[torch.Tensor], eps: float = 1e-6,
                          quant: int = 0, layout: int = 0, quant_scale: Optional[torch.Tensor] = None,
                          pow2_scales: bool = False, gemma: bool = False) -> None:
    _allreduce_add_rmsnorm(comm, input, residual_in, residual_out, gamma, norm_out, eps,
                           _options(quant, layout, quant_values, quant_scales, quant_scale, pow2_scales, gemma))


@torch.library.custom_op("arfusion::add_rmsnorm", mutates_args=("residual_out", "norm_out", "quant_values", "quant_scales"))
def add_rmsnorm(input: torch.Tensor, residual_in: Optional[torch.Tensor], residual_out: Optional[torch.Tensor],
                gamma: torch.Tensor, norm_out: Optional[torch.Tensor], quant_values: Optional[torch.Tensor],
                quant_scales: Optional[torch.Tensor], eps: float = 1e-6, quant: int = 0, layout: int = 0,
                quant_scale: Optional[torch.Tensor] = None, pow2_scales: bool = False, gemma: bool = False) -> None:
    _add_rmsnorm(input, residual_in, residual_out, gamma, norm_out, eps,
                 _options(quant, layout, quant_values, quant_scales, quant_scale, pow2_scales, gemma))


# The ops return nothing and change no metadata: tracing needs no computation.
@allreduce.register_fake
def _(comm, input, out):
    return None


@allreduce_add.register_fake
def _(comm, input, residual_in, residual_out):
    return None


@allreduce_add_rmsnorm.register_fake
def _(comm, input, residual_in, residual_out, gamma, norm_out, quant_values, quant_scales, eps=1e-6, quant=0, layout=0,
      quant_scale=None, pow2_scales=False, gemma=False):
    return None


@add_rmsnorm.register_fake
def _(input, residual_in, residual_out, gamma, norm_out, quant_values, quant_scales, eps=1e-6, quant=0, layout=0,
      quant_scale=None, pow2_scales=False, gemma=False):
    return None
