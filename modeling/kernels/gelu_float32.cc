// The feed-forward's bias add and the original's GELU (tanh form) in
// float32 for CPUs, forward and gradient (the bias's included) each in
// one pass over memory, rounded bit for bit as TensorFlow's graph of
// tf.nn.bias_add and modeling.layers.gelu rounds them: the same products
// and sums in the same association, after TensorFlow's graph optimizer
// (grappler) has rewritten the composite, tanh as Eigen computes it in
// TensorFlow's CPU kernels, and the bias's gradient summed over the rows
// in BiasAddGrad's order. So float32 training, whose weights must not
// change by a bit, can use it (modeling/fused_kernels.py,
// composite_bias_gelu).
//
// What the graph computes for x = the matmul's product + bias
// (TensorFlow 2.20 on x86-64; pinned by tests/test_fused_kernels.py
// against the composite, and by the pre-training step's weights after 4
// steps), for tensors of known shape above 100 KiB (grappler's
// kMaxConstantSize):
//   forward:  s = x * x;  u = (c + x) * sqrt(2 / pi);  t = tanh(u)
//             cdf = (t + 1) * 0.5;  y = cdf * x
//   gradient: du = (h * (1 - t * t)) * sqrt(2 / pi)
//             dx = (s * (0.134145 * du) + du) + dy * cdf
//             dbias = BiasAddGrad(dx), each column summed in row order
// where grappler, pushing each constant down a product of three, pairs it
// with the second of the two other factors as it orders them, by name,
// the greater first: the input x (named in the model's scope) against
// the gradient's tensors (named gradient_tape/...). So with the
// attribute input_first (x's name sorts before the gradient's, as in a
// model named classifier_model) c = (0.044715 * x) * s and
// h = (x * 0.5) * dy; otherwise (as in pretrainer) c = (0.044715 * s) * x
// and h = (dy * 0.5) * x (fused_kernels.composite_bias_gelu). At or below
// 100 KiB, or of unknown shape, grappler associates the gradient's cubic
// term otherwise too: the composite runs there
// (fused_kernels.composite_bias_gelu_applies).
// Compiled without contracting a * b + c and without -ffast-math
// (fused_kernels.EXACT_SOURCES): IEEE products, sums and quotients round
// alike at every vector width, so the loops vectorize and stay exact.

// Only for x86-64, the build whose rounding it repeats: elsewhere the
// ops are not registered and the composite runs.
#if defined(__x86_64__)

#include <algorithm>
#include <vector>

#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "common.h"

namespace {

using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;
using bert_kernels::BiasGradOutputs;
using bert_kernels::BiasOpOutput;
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

// tanh(u) for the input x, and x * x (both passes need them); with
// kInputFirst grappler has paired 0.044715 with x, not with x * x.
template <bool kInputFirst>
inline float TanhOfGelu(float x, float* square) {
  *square = x * x;
  const float cubic = kInputFirst ? (kCubic * x) * *square
                                  : (kCubic * *square) * x;
  return EigenTanh((cubic + x) * kSqrt2OverPi);
}

// One row: y = gelu(x + bias).
template <bool kInputFirst>
CPU_CLONES void ForwardRow(const float* in, const float* bias, float* out,
                           int64_t width) {
#pragma omp simd
  for (int64_t i = 0; i < width; ++i) {
    const float v = in[i] + bias[i];
    float square;
    const float t = TanhOfGelu<kInputFirst>(v, &square);
    out[i] = ((t + 1.f) * 0.5f) * v;
  }
}

// One row's span of columns: dx, also added into sums (bias's gradient).
template <bool kInputFirst>
CPU_CLONES void BackwardSpan(const float* upstream, const float* in,
                             const float* bias, float* out, float* sums,
                             int64_t count) {
#pragma omp simd
  for (int64_t i = 0; i < count; ++i) {
    const float v = in[i] + bias[i], dy = upstream[i];
    float square;
    const float t = TanhOfGelu<kInputFirst>(v, &square);
    const float half = kInputFirst ? (v * 0.5f) * dy : (dy * 0.5f) * v;
    const float du = (half * (1.f - t * t)) * kSqrt2OverPi;
    const float dx =
        (square * (kCubicSlope * du) + du) + dy * ((t + 1.f) * 0.5f);
    out[i] = dx;
    sums[i] += dx;
  }
}

// dx over columns [begin, end) of every row, and their sums over the rows
// in TensorFlow's BiasAddGrad's order: each column's in row order from 0.
template <bool kInputFirst>
void BackwardColumns(const float* upstream, const float* in,
                     const float* bias, float* out, float* dbias,
                     int64_t rows, int64_t width, int64_t begin,
                     int64_t end) {
  const int64_t count = end - begin;
  std::fill(dbias + begin, dbias + end, 0.f);
  for (int64_t j = 0; j < rows; ++j) {
    const int64_t at = j * width + begin;
    BackwardSpan<kInputFirst>(upstream + at, in + at, bias + begin,
                              out + at, dbias + begin, count);
  }
}

class CompositeBiasGeluOp : public OpKernel {
 public:
  explicit CompositeBiasGeluOp(OpKernelConstruction* context)
      : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("input_first", &input_first_));
  }

  void Compute(OpKernelContext* context) override {
    int64_t rows = 0, width = 0;
    Tensor* y = nullptr;
    OP_REQUIRES_OK(context, BiasOpOutput(context, &rows, &width, &y));
    const float* in = context->input(0).flat<float>().data();
    const float* bias_data = context->input(1).flat<float>().data();
    float* out = y->flat<float>().data();
    const auto row = input_first_ ? ForwardRow<true> : ForwardRow<false>;
    Shard(context, rows, 30 * width, [=](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        row(in + r * width, bias_data, out + r * width, width);
      }
    });
  }

 private:
  bool input_first_;
};

class CompositeBiasGeluGradOp : public OpKernel {
 public:
  explicit CompositeBiasGeluGradOp(OpKernelConstruction* context)
      : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("input_first", &input_first_));
  }

  void Compute(OpKernelContext* context) override {
    int64_t rows = 0, width = 0;
    Tensor *dx = nullptr, *dbias = nullptr;
    OP_REQUIRES_OK(context,
                   BiasGradOutputs(context, &rows, &width, &dx, &dbias));
    const float* upstream = context->input(0).flat<float>().data();
    const float* in = context->input(1).flat<float>().data();
    const float* bias_data = context->input(2).flat<float>().data();
    float* out = dx->flat<float>().data();
    float* dbias_data = dbias->flat<float>().data();
    const auto columns =
        input_first_ ? BackwardColumns<true> : BackwardColumns<false>;
    // In spans of 256 columns (each sum's order is the same in any span).
    constexpr int64_t kSpan = 256;
    Shard(context, (width + kSpan - 1) / kSpan, 50 * kSpan * rows,
          [=](int64_t begin, int64_t end) {
            columns(upstream, in, bias_data, out, dbias_data, rows, width,
                    begin * kSpan, std::min(width, end * kSpan));
          });
  }

 private:
  bool input_first_;
};

}  // namespace

REGISTER_OP("CompositeBiasGelu")
    .Attr("input_first: bool")
    .Input("x: float")
    .Input("bias: float")
    .Output("y: float")
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape);
REGISTER_OP("CompositeBiasGeluGrad")
    .Attr("input_first: bool")
    .Input("dy: float")
    .Input("x: float")
    .Input("bias: float")
    .Output("dx: float")
    .Output("dbias: float")
    .SetShapeFn(bert_kernels::BiasGradShapes);
REGISTER_KERNEL_BUILDER(
    Name("CompositeBiasGelu").Device(tensorflow::DEVICE_CPU),
    CompositeBiasGeluOp);
REGISTER_KERNEL_BUILDER(
    Name("CompositeBiasGeluGrad").Device(tensorflow::DEVICE_CPU),
    CompositeBiasGeluGradOp);

#endif  // defined(__x86_64__)
