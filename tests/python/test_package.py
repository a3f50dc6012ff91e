"""The Python package on a machine without a GPU: it loads the library, names and sizes agree with
the C ABI, and bad input raises before anything runs (ValueError/TypeError in Python, arfusion.Error
with the library's message from C). Run by ctest (entry `python`) with the build tree's package."""
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


if __name__ == "__main__":
    unittest.main()
