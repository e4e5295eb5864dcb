// A float32 matrix's transpose, [rows, columns] -> [columns, rows], as a
// kernel of its own: TensorFlow's graph optimizer folds its Transpose op
// into the MatMul that consumes it (as transpose_b), which is what the
// dense layers' input gradient must avoid where oneDNN's kernel for a
// transposed operand is the slower one (modeling/fused_kernels.py,
// transposed). A copy: exact in any build.

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "common.h"

namespace {

using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;
using bert_kernels::Shard;

// Tiles of kTile x kTile elements: both the rows read and the rows
// written stay in L1.
constexpr int64_t kTile = 32;

// Rows [begin, end) of in (whole tiles of them) into out's columns, tile
// by tile: each out row's span written contiguously.
CPU_CLONES void TransposeRows(const float* in, float* out, int64_t rows,
                              int64_t columns, int64_t begin, int64_t end) {
  for (int64_t c0 = 0; c0 < columns; c0 += kTile) {
    const int64_t c1 = std::min(columns, c0 + kTile);
    for (int64_t r0 = begin; r0 < end; r0 += kTile) {
      const int64_t r1 = std::min(end, r0 + kTile);
      for (int64_t c = c0; c < c1; ++c) {
        float* column = out + c * rows;
#pragma omp simd
        for (int64_t r = r0; r < r1; ++r) column[r] = in[r * columns + c];
      }
    }
  }
}

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
