// Inverted dropout in one pass over memory, with exactly the masks of
// TensorFlow's stateless ops: where tf.nn.experimental.stateless_dropout
// draws a float uniform tensor (StatelessRandomUniformV2, Philox-4x32-10),
// compares it, scales and selects (four passes, and the uniform tensor
// written and read), this computes each element's uniform in registers
// from its index and drops or scales it there. The gradient is the same op
// on the upstream gradient (the mask is computed again from the same key,
// counter and indices: nothing is kept for the backward pass). Outputs and
// gradients are bit-identical to the composite's (tests/test_fused_kernels.py
// compares them with tf.random.stateless_uniform's masks), so float32
// training may use it too.
// (The uniforms: philox.h.)

#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "common.h"
#include "philox.h"

namespace {

using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;
using bert_kernels::Philox;
using bert_kernels::ReadPhilox;
using bert_kernels::Shard;
using bert_kernels::UniformsAt;

// Elements per chunk whose uniforms are computed into a buffer on the
// stack (in L1) before the pass over x.
constexpr int64_t kChunk = 1024;

CPU_CLONES void Apply(const float* uniform, const float* in, float* out,
                      int64_t n, float rate, float scale) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    out[i] = uniform[i] >= rate ? in[i] * scale : 0.0f;
  }
}

// Drops in[0, n), whose elements have indices index .. index + n - 1 in
// the drawn tensor, into out.
void DropSegment(const Philox& philox, const float* in, float* out,
                 uint64_t index, int64_t n, float rate, float scale) {
  alignas(64) float uniform[kChunk + 8];
  while (n > 0) {
    const int64_t length = n < kChunk ? n : kChunk;
    Apply(UniformsAt(philox, index, length, uniform), in, out, length, rate,
          scale);
    in += length;
    out += length;
    index += length;
    n -= length;
  }
}

class FusedDropoutOp : public OpKernel {
 public:
  explicit FusedDropoutOp(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("rate", &rate_));
    OP_REQUIRES_OK(context, context->GetAttr("scale", &scale_));
  }

  void Compute(OpKernelContext* context) override {
    const Tensor& x = context->input(0);
    const Tensor& key = context->input(1);
    const Tensor& counter = context->input(2);
    const Tensor& rows = context->input(3);
    Philox philox;
    OP_REQUIRES_OK(context, ReadPhilox(key, counter, &philox));
    Tensor* y = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, x.shape(), &y));
    const float* in = x.flat<float>().data();
    float* out = y->flat<float>().data();
    const float rate = rate_, scale = scale_;
    if (rows.NumElements() == 0 || x.NumElements() == 0) {
      // Element i of x is element i of the drawn tensor.
      Shard(context, x.NumElements(), 8,
            [&philox, in, out, rate, scale](int64_t begin, int64_t end) {
              DropSegment(philox, in + begin, out + begin, begin, end - begin,
                          rate, scale);
            });
      return;
    }
    // x holds rows of a [rows', width] tensor drawn whole: row r of x is
    // row rows[r] there.
    OP_REQUIRES(context, x.dims() == 2 && x.dim_size(0) == rows.NumElements(),
                tensorflow::errors::InvalidArgument(
                    "with rows, x must be [len(rows), width]: x is ",
                    x.shape().DebugString(), ", rows has ",
                    rows.NumElements(), " elements"));
    const int64_t width = x.dim_size(1);
    const auto row_index = rows.flat<int64_t>();
    Shard(context, x.dim_size(0), 8 * width,
          [&philox, &row_index, in, out, width, rate, scale](int64_t begin,
                                                             int64_t end) {
            for (int64_t r = begin; r < end; ++r) {
              DropSegment(philox, in + r * width, out + r * width,
                          static_cast<uint64_t>(row_index(r)) * width, width,
                          rate, scale);
            }
          });
  }

 private:
  float rate_;
  float scale_;
};

}  // namespace

REGISTER_OP("FusedDropout")
    .Input("x: float")
    .Input("key: uint64")
    .Input("counter: uint64")
    .Input("rows: int64")
    .Attr("rate: float")
    .Attr("scale: float")
    .Output("y: float")
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape);
REGISTER_KERNEL_BUILDER(Name("FusedDropout").Device(tensorflow::DEVICE_CPU),
                        FusedDropoutOp);
