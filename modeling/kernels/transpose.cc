// A float32 matrix's transpose, [rows, columns] -> [columns, rows], as a
// kernel of its own: TensorFlow's graph optimizer folds its Transpose op
// into the MatMul that consumes it (as transpose_b), which is what the
// dense layers' input gradient must avoid where oneDNN's kernel for a
// transposed operand is the slower one (modeling/fused_kernels.py,
// matmul_transposed_gradient). A copy, in 8 x 8 blocks through AVX
// registers on x86-64: exact in any build.

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "common.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;
using bert_kernels::Shard;

// Tiles of kTile x kTile elements: both the rows read and the rows
// written stay in L1.
constexpr int64_t kTile = 32;

#if defined(__x86_64__)
// The 8 x 8 block of in at (r, c) into out at (c, r), in AVX registers.
__attribute__((target("avx"))) inline void Transpose8x8(
    const float* in, float* out, int64_t columns, int64_t rows) {
  __m256 a[8], b[8];
  for (int i = 0; i < 8; ++i) a[i] = _mm256_loadu_ps(in + i * columns);
  for (int i = 0; i < 8; i += 2) {
    b[i] = _mm256_unpacklo_ps(a[i], a[i + 1]);
    b[i + 1] = _mm256_unpackhi_ps(a[i], a[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    for (int j = 0; j < 2; ++j) {
      a[i + j] = _mm256_shuffle_ps(b[i + j], b[i + j + 2], 0x44);
      a[i + j + 2] = _mm256_shuffle_ps(b[i + j], b[i + j + 2], 0xEE);
    }
  }
  // a[0..7] now hold, per 128-bit half, rows' columns 0, 2, 1, 3 of each
  // group of four rows; the halves' permutes make the output rows.
  const int order[4] = {0, 2, 1, 3};
  for (int k = 0; k < 4; ++k) {
    const __m256 low = a[order[k]], high = a[4 + order[k]];
    _mm256_storeu_ps(out + k * rows,
                     _mm256_permute2f128_ps(low, high, 0x20));
    _mm256_storeu_ps(out + (k + 4) * rows,
                     _mm256_permute2f128_ps(low, high, 0x31));
  }
}

__attribute__((target("avx"))) void TransposeRows(
    const float* in, float* out, int64_t rows, int64_t columns,
    int64_t begin, int64_t end) {
  // Whole 8 x 8 blocks, then the rest element by element.
  const int64_t row_end = begin + (end - begin) / 8 * 8;
  const int64_t column_end = columns / 8 * 8;
  for (int64_t c0 = 0; c0 < columns; c0 += kTile) {
    const int64_t c1 = std::min(column_end, c0 + kTile);
    for (int64_t r = begin; r < row_end; r += 8) {
      for (int64_t c = c0; c < c1; c += 8) {
        Transpose8x8(in + r * columns + c, out + c * rows + r, columns,
                     rows);
      }
    }
  }
  for (int64_t r = begin; r < end; ++r) {
    const int64_t from = r < row_end ? column_end : 0;
    for (int64_t c = from; c < columns; ++c) {
      out[c * rows + r] = in[r * columns + c];
    }
  }
}
#else
void TransposeRows(const float* in, float* out, int64_t rows,
                   int64_t columns, int64_t begin, int64_t end) {
  for (int64_t r = begin; r < end; ++r) {
    for (int64_t c = 0; c < columns; ++c) out[c * rows + r] = in[r * columns + c];
  }
}
#endif

class TransposeMatrixOp : public OpKernel {
 public:
  explicit TransposeMatrixOp(OpKernelConstruction* context)
      : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const Tensor& x = context->input(0);
    OP_REQUIRES(context, x.dims() == 2,
                tensorflow::errors::InvalidArgument(
                    "x must be a matrix, not ", x.shape().DebugString()));
    const int64_t rows = x.dim_size(0), columns = x.dim_size(1);
    Tensor* y = nullptr;
    OP_REQUIRES_OK(context,
                   context->allocate_output(
                       0, tensorflow::TensorShape({columns, rows}), &y));
    const float* in = x.flat<float>().data();
    float* out = y->flat<float>().data();
    // Shards of whole tiles of rows.
    Shard(context, (rows + kTile - 1) / kTile, 4 * kTile * columns,
          [=](int64_t begin, int64_t end) {
            TransposeRows(in, out, rows, columns, begin * kTile,
                          std::min(rows, end * kTile));
          });
  }
};

}  // namespace

REGISTER_OP("TransposeMatrix")
    .Input("x: float")
    .Output("y: float")
    .SetShapeFn([](tensorflow::shape_inference::InferenceContext* c) {
      tensorflow::shape_inference::ShapeHandle x;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &x));
      c->set_output(0, c->Matrix(c->Dim(x, 1), c->Dim(x, 0)));
      return tensorflow::OkStatus();
    });
REGISTER_KERNEL_BUILDER(
    Name("TransposeMatrix").Device(tensorflow::DEVICE_CPU),
    TransposeMatrixOp);
