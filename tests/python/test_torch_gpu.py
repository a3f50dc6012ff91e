"""The Python package on a GPU, through torch (tests/README.md, entry `python_gpu`).

Runs with the test build's libarfusion_testkit.so (ARFUSION_LIBRARY), whose arfusion.testing makes
local groups of several ranks on one GPU. Checks, for the torch custom ops (arfusion.torch_ops):
  - a world-size-1 communicator made from a unique id, and local groups of 2, 3 and 4 ranks;
  - eager, inside captured CUDA graphs (replayed on new inputs) and under torch.compile;
  - bit for bit: every rank's outputs equal; at 2 ranks (and 1) the fused call equals the chain
    "sum in torch, then arfusion's single-GPU add-RMSNorm" (the C++ addRMSNorm: the NCCL path's
    epilogue), quantized bytes and scales included; compiled and captured calls equal eager ones;
  - against a float64 torch reference, within the bound of `reference` (one unit roundoff per
    rounding of the sum, the residual add and the normalised value, twice over);
  - every element written (outputs poisoned with NaN, quantized buffers with two different byte
    patterns for the fused call and the chain);
  - bad tensors raise before anything is written;
  - two processes over torch.distributed, one GPU each, when two GPUs are present.
Each test skips, saying why, without torch, a GPU, the testkit library or a second GPU. Run
directly, the file exits 77 when every test skipped (ctest then reports Skipped).
"""
import os
import sys
import unittest

import arfusion

try:
    import torch
    SKIP = None if torch.cuda.is_available() else "torch sees no CUDA device"
except ImportError:
    torch, SKIP = None, "torch is not installed"

if SKIP is None:
    import arfusion.testing
    import arfusion.torch_ops  # noqa: F401  (registers torch.ops.arfusion)
    if not arfusion.testing.available():
        SKIP = "ARFUSION_LIBRARY is not libarfusion_testkit.so (arfusion.testing unavailable)"

EPS = 1e-6
HIDDEN = 4096


def rand(shape, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(shape, generator=g, device="cuda", dtype=torch.float32).to(dtype)


def nan_like(t):
    return torch.full_like(t, float("nan"))


def reference(inputs, residual, gamma, eps=EPS):
    """float64 (residual_out, norm_out) of sum(inputs) + residual, and each one's error bound."""
    s = sum(x.double() for x in inputs) + (residual.double() if residual is not None else 0)
    rms = torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + eps)
    norm = s * rms * gamma.double()
    # Each rounding (the sum, the residual add, the normalised value) costs at most one unit
    # roundoff u of what it rounds; u = 2^-8 (bf16) is the larger of the two dtypes'.
    u = 2.0 ** -8
    magnitude = sum(x.double().abs() for x in inputs) + (residual.double().abs() if residual is not None else 0)
    res_bound = 2 * u * (magnitude + s.abs()) + 2 ** -20
    norm_bound = res_bound * rms * gamma.double().abs() + 2 * u * norm.abs() + 2 ** -20
    return (s, res_bound), (norm, norm_bound)


def close_to(out, ref, what):
    value, bound = ref
    bad = ((out.double() - value).abs() > bound) | ~torch.isfinite(out.double())
    if bad.any():
        i = tuple(bad.nonzero()[0].tolist())
        raise AssertionError(f"{what}: {int(bad.sum())} elements off the float64 reference, first at {list(i)}: "
                             f"{out[i].item()} vs {value[i].item()} (bound {bound[i].item()})")


def same_bits(a, b, what):
    if a.dtype.is_floating_point and a.element_size() == 2:
        a, b = a.view(torch.int16), b.view(torch.int16)
    elif a.dtype.is_floating_point:
        a, b = a.view(torch.int32), b.view(torch.int32)
    elif a.dtype != torch.uint8 and a.element_size() == 1:
        a, b = a.view(torch.uint8), b.view(torch.uint8)
    diff = (a != b)
    if diff.any():
        raise AssertionError(f"{what}: {int(diff.sum())} of {a.numel()} elements differ, first at {diff.nonzero()[0].tolist()}")


# The quantized outputs are required arguments of the ops (every mutated argument is): None without one.
NO_QUANT = dict(quant_values=None, quant_scales=None)


class Quant:
    """A quantized output's buffers for `tokens` rows, poisoned with `fill`."""

    def __init__(self, fmt, layout, tokens, fill, pow2=False):
        self.fmt, self.layout, self.pow2 = fmt, layout, pow2
        vb, sb = arfusion.quant_buffer_bytes(fmt, layout, tokens, HIDDEN)
        self.values = torch.full((vb,), fill, dtype=torch.uint8, device="cuda")
        self.scales = torch.full((sb,), fill, dtype=torch.uint8, device="cuda")
        self.scale = torch.tensor([0.0173], dtype=torch.float32, device="cuda")  # fp8 static, nvfp4 global

    def op_args(self):
        return dict(quant=arfusion.QUANT_FORMATS[self.fmt], layout=arfusion.SCALE_LAYOUTS[self.layout], quant_values=self.values,
                    quant_scales=self.scales, quant_scale=self.scale, pow2_scales=self.pow2)


class Case:
    """One call's tensors for `world` ranks: inputs per rank, a shared residual and gamma, outputs
    per rank poisoned."""

    def __init__(self, world, tokens, dtype, seed, residual=True):
        self.world, self.tokens, self.dtype = world, tokens, dtype
        self.inputs = [rand((tokens, HIDDEN), dtype, seed + r) for r in range(world)]
        self.residual = rand((tokens, HIDDEN), dtype, seed + 100) if residual else None
        self.gamma = rand((HIDDEN,), dtype, seed + 200) * 0.5 + 1
        self.res_out = [nan_like(self.inputs[0]) for _ in range(world)]
        self.norm_out = [nan_like(self.inputs[0]) for _ in range(world)]

    def chain(self, quant=None):
        """The sum in torch (one rounding, as NCCL's at 2 ranks), then the single-GPU add-RMSNorm."""
        s = self.inputs[0].float()
        for x in self.inputs[1:]:
            s = s + x.float()
        s = s.to(self.dtype)
        res, norm = nan_like(s), nan_like(s)
        torch.ops.arfusion.add_rmsnorm(s, self.residual, res, self.gamma, norm, eps=EPS, **(quant.op_args() if quant else NO_QUANT))
        return res, norm

    def check(self, what, bitwise_chain, quants=None, chain_quant=None):
        ref_res, ref_norm = reference(self.inputs, self.residual, self.gamma)
        for r in range(self.world):
            close_to(self.res_out[r], ref_res, f"{what}: rank {r} residual_out")
            close_to(self.norm_out[r], ref_norm, f"{what}: rank {r} norm_out")
            same_bits(self.res_out[r], self.res_out[0], f"{what}: rank {r} residual_out vs rank 0")
            same_bits(self.norm_out[r], self.norm_out[0], f"{what}: rank {r} norm_out vs rank 0")
            if quants:
                same_bits(quants[r].values, quants[0].values, f"{what}: rank {r} quantized values vs rank 0")
                same_bits(quants[r].scales, quants[0].scales, f"{what}: rank {r} scales vs rank 0")
        if bitwise_chain:
            res, norm = self.chain(chain_quant)
            same_bits(self.res_out[0], res, f"{what}: residual_out vs the single-GPU chain")
            same_bits(self.norm_out[0], norm, f"{what}: norm_out vs the single-GPU chain")
            if quants:
                same_bits(quants[0].values, chain_quant.values, f"{what}: quantized values vs the single-GPU chain")
                same_bits(quants[0].scales, chain_quant.scales, f"{what}: scales vs the single-GPU chain")


def run_group(comms, streams, case, quants=None):
    """Every rank's call on its own stream, all in flight at once (fused kernels wait on each other)."""
    torch.cuda.synchronize()
    for r, comm in enumerate(comms):
        with torch.cuda.stream(streams[r]):
            torch.ops.arfusion.allreduce_add_rmsnorm(comm.handle, case.inputs[r], case.residual, case.res_out[r], case.gamma,
                                                     case.norm_out[r], eps=EPS,
                                                     **(quants[r].op_args() if quants else NO_QUANT))
    torch.cuda.synchronize()


@unittest.skipIf(SKIP is not None, SKIP or "")
class WorldSizeOne(unittest.TestCase):
    """A communicator of one rank made from a unique id, as a process group would."""

    @classmethod
    def setUpClass(cls):
        cls.comm = arfusion.Communicator(arfusion.get_unique_id(), 1, 0)

    @classmethod
    def tearDownClass(cls):
        cls.comm.close()

    def test_eager_equals_the_single_gpu_kernel(self):
        for dtype, tokens, seed in ((torch.bfloat16, 7, 11), (torch.float16, 128, 12)):
            case = Case(1, tokens, dtype, seed)
            run_group([self.comm], [torch.cuda.current_stream()], case)
            case.check(f"world 1 {dtype} x{tokens}", bitwise_chain=True)

    def test_quantized_outputs_equal_the_single_gpu_kernel(self):
        for fmt, layout in (("fp8", "linear"), ("fp8-token", "linear"), ("fp8-group", "column-major"), ("nvfp4", "swizzled-128x4")):
            case = Case(1, 33, torch.bfloat16, 21)
            q = Quant(fmt, layout, case.tokens, 0xAA)
            run_group([self.comm], [torch.cuda.current_stream()], case, [q])
            case.check(f"world 1 {fmt}", bitwise_chain=True, quants=[q], chain_quant=Quant(fmt, layout, case.tokens, 0x55))

    def test_compiled_equals_eager(self):
        def block(comm, x, residual, res_out, gamma, norm_out):
            torch.ops.arfusion.allreduce_add_rmsnorm(comm, x * 2.0, residual, res_out, gamma, norm_out, None, None, EPS)
            return norm_out.float() + 1.0

        compiled = torch.compile(block, fullgraph=True)
        case = Case(1, 16, torch.bfloat16, 31)
        got = compiled(self.comm.handle, case.inputs[0], case.residual, case.res_out[0], case.gamma, case.norm_out[0])
        res, norm = nan_like(case.res_out[0]), nan_like(case.norm_out[0])
        want = block(self.comm.handle, case.inputs[0], case.residual, res, case.gamma, norm)
        torch.cuda.synchronize()
        same_bits(case.res_out[0], res, "compiled residual_out")
        same_bits(case.norm_out[0], norm, "compiled norm_out")
        same_bits(got, want, "compiled result")

    def test_bad_tensors_raise_and_write_nothing(self):
        case = Case(1, 4, torch.bfloat16, 41)
        h = self.comm.handle
        with self.assertRaises(ValueError):  # gamma of another length
            torch.ops.arfusion.allreduce_add_rmsnorm(h, case.inputs[0], case.residual, case.res_out[0], case.gamma[:-16],
                                                     case.norm_out[0], None, None, EPS)
        with self.assertRaises(ValueError):  # a CPU output
            torch.ops.arfusion.allreduce_add_rmsnorm(h, case.inputs[0], case.residual, case.res_out[0].cpu(), case.gamma,
                                                     case.norm_out[0], None, None, EPS)
        with self.assertRaises(ValueError):  # not contiguous
            torch.ops.arfusion.allreduce_add_rmsnorm(h, case.inputs[0].t(), None, None, case.gamma[:4], None, None, None, EPS)
        with self.assertRaises(ValueError):  # a scale buffer too small for the shape
            q = Quant("nvfp4", "swizzled-128x4", 4, 0xAA)
            args = q.op_args()
            args["quant_scales"] = q.scales[:16]
            torch.ops.arfusion.allreduce_add_rmsnorm(h, case.inputs[0], case.residual, case.res_out[0], case.gamma,
                                                     case.norm_out[0], eps=EPS, **args)
        with self.assertRaises(arfusion.Error) as e:  # the library's own check: static FP8 without its scale
            args = Quant("fp8", "linear", 4, 0xAA).op_args()
            args["quant_scale"] = None
            torch.ops.arfusion.allreduce_add_rmsnorm(h, case.inputs[0], case.residual, case.res_out[0], case.gamma,
                                                     case.norm_out[0], eps=EPS, **args)
        self.assertEqual(e.exception.status, 1)
        torch.cuda.synchronize()
        self.assertTrue(torch.isnan(case.res_out[0]).all() and torch.isnan(case.norm_out[0]).all(), "a refused call wrote")


@unittest.skipIf(SKIP is not None, SKIP or "")
class LocalGroups(unittest.TestCase):
    """2, 3 and 4 ranks on one GPU (arfusion.testing), each rank on its own stream."""

    def group(self, world, **config):
        config.setdefault("timeout_seconds", 120)
        comms = arfusion.testing.create_group(world, max_blocks=16, **config)
        self.addCleanup(lambda: [c.close() for c in comms])
        return comms, [torch.cuda.Stream() for _ in range(world)]

    def test_eager(self):
        for world in (2, 3, 4):
            for strategy in ("oneshot", "twoshot"):
                comms, streams = self.group(world, strategy=strategy)
                for dtype, tokens, residual, seed in ((torch.bfloat16, 5, True, 100), (torch.float16, 96, False, 200)):
                    case = Case(world, tokens, dtype, seed + world, residual)
                    run_group(comms, streams, case)
                    case.check(f"{world} ranks {strategy} {dtype} x{tokens}", bitwise_chain=(world == 2))

    def test_quantized_outputs(self):
        comms, streams = self.group(2)
        for fmt, layout in (("fp8-token", "linear"), ("fp8-group", "ue8m0-packed"), ("nvfp4", "swizzled-128x4")):
            case = Case(2, 20, torch.bfloat16, 300)
            quants = [Quant(fmt, layout, case.tokens, 0xAA, pow2=(layout == "ue8m0-packed")) for _ in comms]
            run_group(comms, streams, case, quants)
            chain = Quant(fmt, layout, case.tokens, 0x55, pow2=(layout == "ue8m0-packed"))
            case.check(f"2 ranks {fmt}", bitwise_chain=True, quants=quants, chain_quant=chain)

    def test_cuda_graphs_replay_on_new_inputs(self):
        world = 2
        comms, streams = self.group(world)
        case = Case(world, 24, torch.bfloat16, 400)
        graphs = [torch.cuda.CUDAGraph() for _ in comms]
        torch.cuda.synchronize()
        for r, comm in enumerate(comms):  # capture launches nothing: no rank waits here
            with torch.cuda.graph(graphs[r], stream=streams[r]):
                torch.ops.arfusion.allreduce_add_rmsnorm(comm.handle, case.inputs[r], case.residual, case.res_out[r], case.gamma,
                                                         case.norm_out[r], None, None, EPS)
        for replay in range(3):
            fresh = Case(world, 24, torch.bfloat16, 500 + replay)
            for r in range(world):
                case.inputs[r].copy_(fresh.inputs[r])
                case.res_out[r].fill_(float("nan"))
                case.norm_out[r].fill_(float("nan"))
            case.residual.copy_(fresh.residual)
            torch.cuda.synchronize()
            for r in range(world):
                with torch.cuda.stream(streams[r]):
                    graphs[r].replay()
            torch.cuda.synchronize()
            case.check(f"graph replay {replay}", bitwise_chain=True)
            captured = [(case.res_out[r].clone(), case.norm_out[r].clone()) for r in range(world)]
            for r in range(world):
                case.res_out[r].fill_(float("nan"))
                case.norm_out[r].fill_(float("nan"))
            run_group(comms, streams, case)
            for r in range(world):
                same_bits(captured[r][0], case.res_out[r], f"replay {replay} rank {r} residual_out vs eager")
                same_bits(captured[r][1], case.norm_out[r], f"replay {replay} rank {r} norm_out vs eager")

    def test_compiled(self):
        world = 2
        comms, streams = self.group(world)

        def block(comm, x, residual, res_out, gamma, norm_out):
            torch.ops.arfusion.allreduce_add_rmsnorm(comm, x, residual, res_out, gamma, norm_out, None, None, EPS)
            return norm_out.float() * 0.5

        compiled = torch.compile(block, fullgraph=True, dynamic=True)
        case = Case(world, 12, torch.bfloat16, 600)
        with torch.cuda.stream(streams[0]):  # compile once on a world-size-1 group, so the ranks' calls launch back to back
            solo = arfusion.testing.create_group(1, max_blocks=16)[0]
            self.addCleanup(solo.close)
            one = Case(1, 12, torch.bfloat16, 601)
            compiled(solo.handle, one.inputs[0], one.residual, one.res_out[0], one.gamma, one.norm_out[0])
        torch.cuda.synchronize()
        outs = []
        for r, comm in enumerate(comms):
            with torch.cuda.stream(streams[r]):
                outs.append(compiled(comm.handle, case.inputs[r], case.residual, case.res_out[r], case.gamma, case.norm_out[r]))
        torch.cuda.synchronize()
        case.check("compiled, 2 ranks", bitwise_chain=True)
        for r in range(world):
            same_bits(outs[r], case.norm_out[r].float() * 0.5, f"compiled rank {r} result")


def _two_process_rank(rank, port):
    import torch.distributed as dist
    torch.cuda.set_device(rank)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", world_size=2, rank=rank)
    uid = [arfusion.get_unique_id() if rank == 0 else None]
    dist.broadcast_object_list(uid, src=0)
    with arfusion.Communicator(uid[0], 2, rank) as comm:
        case = Case(2, 64, torch.bfloat16, 700)  # every rank makes every rank's inputs (same seeds)
        torch.ops.arfusion.allreduce_add_rmsnorm(comm.handle, case.inputs[rank], case.residual, case.res_out[rank], case.gamma,
                                                 case.norm_out[rank], None, None, EPS)
        torch.cuda.synchronize()
        case.res_out, case.norm_out = [case.res_out[rank]] * 2, [case.norm_out[rank]] * 2
        case.check(f"process {rank}", bitwise_chain=True)
    dist.destroy_process_group()


@unittest.skipIf(SKIP is not None, SKIP or "")
class TwoProcesses(unittest.TestCase):
    def test_over_torch_distributed(self):
        if torch.cuda.device_count() < 2:
            self.skipTest(f"needs 2 GPUs, this machine has {torch.cuda.device_count()}")
        import socket
        import torch.multiprocessing as mp
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        mp.spawn(_two_process_rank, args=(port,), nprocs=2, join=True)


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    if not result.wasSuccessful():
        sys.exit(1)
    sys.exit(77 if result.testsRun and len(result.skipped) == result.testsRun else 0)
