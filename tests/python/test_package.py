"""The Python package on a machine without a GPU: it loads the library, names and sizes agree with
the C ABI, and bad input raises before anything runs (ValueError/TypeError in Python, arfusion.Error
with the library's message from C). Run by ctest (entry `python`) with the build tree's package."""
import ast
import os
import unittest

import arfusion


class FakeCuda:
    """An object with __cuda_array_interface__ and no memory behind it: enough for the checks that
    run before a pointer is used."""

    def __init__(self, shape, typestr="<f2", ptr=0, strides=None):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False), "version": 3,
                                         "strides": strides}


class Package(unittest.TestCase):
    def test_version_matches_the_library(self):
        major, minor, _ = arfusion.version()
        self.assertEqual((major, minor), (0, 5))

    def test_quant_buffer_bytes(self):
        self.assertEqual(arfusion.quant_buffer_bytes("nvfp4", "swizzled-128x4", 1, 4096), (2048, 128 * 256))
        self.assertEqual(arfusion.quant_buffer_bytes("fp8-token", "linear", 5, 1024), (5 * 1024, 5 * 4))
        with self.assertRaises(ValueError):
            arfusion.quant_buffer_bytes("fp7", "linear", 1, 4096)
        with self.assertRaises(arfusion.Error) as e:
            arfusion.quant_buffer_bytes("nvfp4", "column-major", 1, 4096)
        self.assertEqual(e.exception.status, 1)
        self.assertIn("cannot hold", str(e.exception))

    def test_communicator_refuses_bad_arguments(self):
        with self.assertRaises(ValueError):
            arfusion.Communicator(None, 2, 0)
        with self.assertRaises(arfusion.Error) as e:
            arfusion.Communicator(bytes(128), 2, 5)
        self.assertIn("rank 5 of world size 2", str(e.exception))
        with self.assertRaises(ValueError):
            arfusion.Communicator(bytes(128), 2, 0, strategy="fastest")

    def test_tensor_checks_run_before_the_call(self):
        x = FakeCuda((4, 4096))
        gamma = FakeCuda((4096,))
        with self.assertRaises(ValueError):  # gamma of the wrong length
            arfusion.add_rmsnorm(x, x, x, FakeCuda((4095,)), FakeCuda((4, 4096)))
        with self.assertRaises(ValueError):  # norm_out of another shape
            arfusion.add_rmsnorm(x, x, x, gamma, FakeCuda((2, 4096)))
        with self.assertRaises(TypeError):  # bf16 has no typestr: the dtype must be given
            arfusion.add_rmsnorm(FakeCuda((4, 4096), "<V2"), None, None, gamma, None)
        with self.assertRaises(ValueError):  # strided
            arfusion.add_rmsnorm(FakeCuda((4, 4096), strides=(16384, 4)), None, None, gamma, None)
        with self.assertRaises(TypeError):
            arfusion.add_rmsnorm(object(), None, None, gamma, None)

    def test_the_library_refuses_null_tensors_with_its_message(self):
        x = FakeCuda((4, 4096))
        with self.assertRaises(arfusion.Error) as e:
            arfusion.add_rmsnorm(x, None, FakeCuda((4, 4096)), FakeCuda((4096,)), FakeCuda((4, 4096)))
        self.assertEqual(e.exception.status, 1)
        self.assertIn("null", e.exception.message)

    def test_custom_ops_take_every_output_without_a_default(self):
        # torch (absent here) finds a mutated argument by its position in the call: one left to a
        # default is not there, and every call without it fails inside torch. Read from the source.
        path = os.path.join(os.path.dirname(arfusion.__file__), "torch_ops.py")
        with open(path) as f:
            tree = ast.parse(f.read())
        ops = 0
        for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef)):
            for deco in fn.decorator_list:
                if not (isinstance(deco, ast.Call) and getattr(deco.func, "attr", "") == "custom_op"):
                    continue
                ops += 1
                mutated = next(ast.literal_eval(k.value) for k in deco.keywords if k.arg == "mutates_args")
                args = [a.arg for a in fn.args.args]
                required = args[:len(args) - len(fn.args.defaults)]
                for name in mutated:
                    self.assertIn(name, required, f"{fn.name}: the output {name} must be a required argument")
        self.assertEqual(ops, 4)


if __name__ == "__main__":
    unittest.main()
