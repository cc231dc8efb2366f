# Gradients of MatMul and Gemm against central finite differences (float64,
# onnx.reference): test/lib/gradcheck.py.
#
# RUN: %python %s %t

from onnx import helper

from gradcheck import Cases, rng

r = rng(0)
cases = Cases()


def matmul(name, a, b):
    cases.add(name, nodes=[helper.make_node("MatMul", ["a", "b"], ["y"])],
              params={"a": r.standard_normal(a), "b": r.standard_normal(b)}, outputs=["y"])


matmul("matmul_2d", (2, 3), (3, 4))
matmul("matmul_batched", (2, 2, 3), (2, 3, 4))
matmul("matmul_broadcast_rhs", (2, 2, 3), (3, 4))
matmul("matmul_broadcast_batch", (2, 1, 2, 3), (3, 3, 2))
matmul("matmul_vector_lhs", (3,), (3, 4))
matmul("matmul_vector_rhs", (2, 3), (3,))

for trans_a in (0, 1):
    for trans_b in (0, 1):
        a = (3, 2) if trans_a else (2, 3)
        b = (4, 3) if trans_b else (3, 4)
        cases.add(f"gemm_ta{trans_a}_tb{trans_b}",
                  nodes=[helper.make_node("Gemm", ["a", "b", "c"], ["y"], alpha=0.5, beta=2.0,
                                          transA=trans_a, transB=trans_b)],
                  params={"a": r.standard_normal(a), "b": r.standard_normal(b),
                          "c": r.standard_normal((4,))},
                  outputs=["y"])
cases.add("gemm_no_bias", nodes=[helper.make_node("Gemm", ["a", "b"], ["y"], transB=1)],
          params={"a": r.standard_normal((2, 3)), "b": r.standard_normal((4, 3))},
          outputs=["y"])

if __name__ == "__main__":
    cases.main()
