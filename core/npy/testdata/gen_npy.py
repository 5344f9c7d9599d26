# Writes the small .npy fixtures used by core/npy tests with NumPy itself.
# Regenerate: cd core/npy/testdata && /usr/bin/python3 gen_npy.py
import numpy as np
np.save("f32_2x3.npy", np.arange(6, dtype=np.float32).reshape(2, 3) / np.float32(3))
np.save("f64_4.npy", np.array([1.5, -2.25, np.pi, 1e300], dtype=np.float64))
np.save("u8_2x2x3.npy", np.arange(12, dtype=np.uint8).reshape(2, 2, 3) * 20)
np.save("i32_3.npy", np.array([-1, 0, 2147483647], dtype=np.int32))
np.save("i64_2x1.npy", np.array([[-9223372036854775808], [42]], dtype=np.int64))
np.save("bool_3.npy", np.array([True, False, True]))
np.save("f32_scalar.npy", np.float32(7.25))
np.save("f32_empty_0x4.npy", np.zeros((0, 4), dtype=np.float32))
np.save("f32_fortran.npy", np.asfortranarray(np.ones((2, 3), dtype=np.float32)))
np.save("f32_bigendian.npy", np.ones(3, dtype=">f4"))
np.lib.format.write_array(open("f32_v2.npy", "wb"), np.arange(3, dtype=np.float32), version=(2, 0))
