// The original's GELU (tanh form) for CPUs, forward and gradient each in
// one pass over memory, where TensorFlow's composite of it takes about a
// dozen elementwise ops, each a pass of its own (3x to 3.9x faster at
// BERT-Base's feed-forward width: benchmarks/profiling/elementwise.py).
// Built by modeling/fused_kernels.py (make setup) and used by the
// bfloat16 training path on CPUs only (modeling.layers.set_fused_kernels);
// float32 keeps the original's composite, op for op.
//
// tanh(u) is computed as 1 - 2 / (1 + exp(2u)), and as +-1 where float32's
// tanh is (|u| >= 9.02): values within 2e-6 and gradients within 2e-5 of
// the formula in float64 (tests/test_fused_kernels.py).

#include <cmath>

#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "common.h"

namespace {

using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;
using bert_kernels::Shard;

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

inline float Tanh(float u) {
  // Exactly +-1 where float32's tanh is (|u| >= 9.02), as the composite's
  // is: the vectorized exp and division round differently from the
  // scalar ones, and the tails' values and gradients must be 0 and x, 1.
  const float clamped = std::fmin(std::fmax(u, -9.1f), 9.1f);
  const float t = 1.f - 2.f / (1.f + std::exp(2.f * clamped));
  return std::fabs(u) >= 9.02f ? std::copysign(1.f, u) : t;
}

CPU_CLONES void GeluForward(const float* in, float* out, int64_t begin,
                            int64_t end) {
#pragma omp simd
  for (int64_t i = begin; i < end; ++i) {
    const float v = in[i];
    const float t = Tanh(kSqrt2OverPi * (v + kCubic * v * v * v));
    out[i] = 0.5f * v * (1.f + t);
  }
}

CPU_CLONES void GeluBackward(const float* upstream, const float* in,
                             float* out, int64_t begin, int64_t end) {
#pragma omp simd
  for (int64_t i = begin; i < end; ++i) {
    const float v = in[i];
    const float t = Tanh(kSqrt2OverPi * (v + kCubic * v * v * v));
    const float slope = 0.5f * (1.f + t) + 0.5f * v * (1.f - t * t) *
                        kSqrt2OverPi * (1.f + 3.f * kCubic * v * v);
    out[i] = upstream[i] * slope;
  }
}

class FusedGeluOp : public OpKernel {
 public:
  explicit FusedGeluOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const Tensor& x = context->input(0);
    Tensor* y = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, x.shape(), &y));
    const float* in = x.flat<float>().data();
    float* out = y->flat<float>().data();
    Shard(context, x.NumElements(), 20, [in, out](int64_t begin, int64_t end) {
      GeluForward(in, out, begin, end);
    });
  }
};

class FusedGeluGradOp : public OpKernel {
 public:
  explicit FusedGeluGradOp(OpKernelConstruction* context)
      : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const Tensor& dy = context->input(0);
    const Tensor& x = context->input(1);
    OP_REQUIRES(context, dy.shape() == x.shape(),
                tensorflow::errors::InvalidArgument(
                    "dy and x differ in shape: ", dy.shape().DebugString(),
                    " and ", x.shape().DebugString()));
    Tensor* dx = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, x.shape(), &dx));
    const float* upstream = dy.flat<float>().data();
    const float* in = x.flat<float>().data();
    float* out = dx->flat<float>().data();
    Shard(context, x.NumElements(), 30,
          [upstream, in, out](int64_t begin, int64_t end) {
            GeluBackward(upstream, in, out, begin, end);
          });
  }
};

}  // namespace

REGISTER_OP("FusedGelu")
    .Input("x: float")
    .Output("y: float")
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape);
REGISTER_OP("FusedGeluGrad")
    .Input("dy: float")
    .Input("x: float")
    .Output("dx: float")
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape);
REGISTER_KERNEL_BUILDER(Name("FusedGelu").Device(tensorflow::DEVICE_CPU),
                        FusedGeluOp);
REGISTER_KERNEL_BUILDER(Name("FusedGeluGrad").Device(tensorflow::DEVICE_CPU),
                        FusedGeluGradOp);
