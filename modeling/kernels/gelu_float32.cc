// The original's GELU (tanh form) in float32 for CPUs, forward and
// gradient each in one pass over memory, rounded bit for bit as
// TensorFlow's graph of modeling.layers.gelu rounds it: the same products
// and sums in the same association, after TensorFlow's graph optimizer
// (grappler) has rewritten the composite, and tanh as Eigen computes it
// in TensorFlow's CPU kernels. So float32 training, whose weights must
// not change by a bit, can use it (modeling/fused_kernels.py,
// composite_gelu).
//
// What the graph computes (TensorFlow 2.20 on x86-64; pinned by
// tests/test_fused_kernels.py against the composite on both sides of the
// size below, and by the pre-training step's weights after 4 steps):
//   forward:  s = x * x;  u = ((0.044715 * s) * x + x) * sqrt(2 / pi);
//             t = tanh(u);  cdf = (t + 1) * 0.5;  y = cdf * x
//   gradient: du = (((dy * 0.5) * x) * (1 - t * t)) * sqrt(2 / pi)
//             dx = (cubic + du) + dy * cdf, where cubic, the cubic
//             term's share, is s * (0.134145 * du) for tensors of known
//             shape above 100 KiB and (s * 0.134145) * du otherwise
//             (attribute constant_with_square): grappler folds
//             0.044715 * 3 into one constant and puts it on either side.
// Compiled without contracting a * b + c and without -ffast-math
// (fused_kernels.EXACT_SOURCES): IEEE products, sums and quotients round
// alike at every vector width, so the loops vectorize and stay exact.

// Only for x86-64, the build whose rounding it repeats: elsewhere the
// ops are not registered and the composite runs.
#if defined(__x86_64__)

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

// The composite's constants as float32: 0.044715, np.sqrt(2 / np.pi)
// rounded, and grappler's fold of 0.044715 * 3.
constexpr float kCubic = 0.044715f;
constexpr float kSqrt2OverPi = 0.7978845834732056f;
constexpr float kCubicSlope = 0.13414499163627625f;

// tanh as TensorFlow's Tanh kernel computes it: Eigen's ptanh_float, a
// [9/8] rational function of the input clamped to +-7.907..., evaluated
// by Horner's rule; TensorFlow's x86 build has no FMA, so each step of
// it rounds the product and the sum apart (as here).
inline float EigenTanh(float a) {
  constexpr float kClamp = 7.90738964080810547f;
  const float x = a > kClamp ? kClamp : (a < -kClamp ? -kClamp : a);
  const float x2 = x * x;
  float p = 1.394553628e-8f;
  p = p * x2 + 2.102733560e-5f;
  p = p * x2 + 3.520756727e-3f;
  p = p * x2 + 1.340216100e-1f;
  float q = 8.015776984e-7f;
  q = q * x2 + 3.326951409e-4f;
  q = q * x2 + 2.597254514e-2f;
  q = q * x2 + 4.673548340e-1f;
  q = q * x2 + 1.0f;
  return ((x2 * x) * p + x) / q;
}

// tanh(u) for the input x, and x * x (both passes need them).
inline float TanhOfGelu(float x, float* square) {
  *square = x * x;
  return EigenTanh(((kCubic * *square) * x + x) * kSqrt2OverPi);
}

CPU_CLONES void Forward(const float* in, float* out, int64_t begin,
                        int64_t end) {
#pragma omp simd
  for (int64_t i = begin; i < end; ++i) {
    float square;
    const float t = TanhOfGelu(in[i], &square);
    out[i] = ((t + 1.f) * 0.5f) * in[i];
  }
}

template <bool kConstantWithSquare>
CPU_CLONES void Backward(const float* upstream, const float* in, float* out,
                         int64_t begin, int64_t end) {
#pragma omp simd
  for (int64_t i = begin; i < end; ++i) {
    const float x = in[i], dy = upstream[i];
    float square;
    const float t = TanhOfGelu(x, &square);
    const float du = (((dy * 0.5f) * x) * (1.f - t * t)) * kSqrt2OverPi;
    const float cubic = kConstantWithSquare ? (square * kCubicSlope) * du
                                            : square * (kCubicSlope * du);
    out[i] = (cubic + du) + dy * ((t + 1.f) * 0.5f);
  }
}

class CompositeGeluOp : public OpKernel {
 public:
  explicit CompositeGeluOp(OpKernelConstruction* context)
      : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const Tensor& x = context->input(0);
    Tensor* y = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, x.shape(), &y));
    const float* in = x.flat<float>().data();
    float* out = y->flat<float>().data();
    Shard(context, x.NumElements(), 30,
          [=](int64_t begin, int64_t end) { Forward(in, out, begin, end); });
  }
};

class CompositeGeluGradOp : public OpKernel {
 public:
  explicit CompositeGeluGradOp(OpKernelConstruction* context)
      : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("constant_with_square",
                                             &constant_with_square_));
  }

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
    const auto backward =
        constant_with_square_ ? Backward<true> : Backward<false>;
    Shard(context, x.NumElements(), 45, [=](int64_t begin, int64_t end) {
      backward(upstream, in, out, begin, end);
    });
  }

 private:
  bool constant_with_square_;
};

}  // namespace

REGISTER_OP("CompositeGelu")
    .Input("x: float")
    .Output("y: float")
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape);
REGISTER_OP("CompositeGeluGrad")
    .Attr("constant_with_square: bool")
    .Input("dy: float")
    .Input("x: float")
    .Output("dx: float")
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape);
REGISTER_KERNEL_BUILDER(Name("CompositeGelu").Device(tensorflow::DEVICE_CPU),
                        CompositeGeluOp);
REGISTER_KERNEL_BUILDER(
    Name("CompositeGeluGrad").Device(tensorflow::DEVICE_CPU),
    CompositeGeluGradOp);

#endif  // defined(__x86_64__)
