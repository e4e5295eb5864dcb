// The original's GELU (tanh form) for CPUs, forward and gradient each in
// one pass over memory, where TensorFlow's composite of it takes about a
// dozen elementwise ops, each a pass of its own (3x to 3.9x faster at
// BERT-Base's feed-forward width: benchmarks/profiling/elementwise.py);
// with the attribute exact, the erf form (modeling.layers.gelu_exact, the
// GELU of HuggingFace's models such as all-MiniLM-L6-v2) likewise:
// - FusedGelu: float32 in and out.
// - FusedBiasGelu: the feed-forward layer's bias add and GELU between its
//   two bfloat16 matmuls: the first's bfloat16 products in, the second's
//   bfloat16 operand out (rounded as TensorFlow's Cast rounds), where the
//   composite casts to float32, adds the bias, computes the GELU and casts
//   back; its gradient likewise, the bias gradient summed in float32.
// - FusedBiasAdd: the same without the GELU, for the attention's query,
//   key and value projections (products and result bfloat16, the add in
//   float32); its gradient is the bias's alone (the products' is the
//   upstream gradient itself).
// Built by modeling/fused_kernels.py (make setup) and used by the
// bfloat16 training path on CPUs only (modeling.layers.set_fused_kernels);
// float32 keeps the original's composite, op for op.
//
// tanh(u) is computed as 1 - 2 / (1 + exp(2u)), and as +-1 where float32's
// tanh is (|u| >= 9.02); erf is libmvec's (glibc's vector math, which
// -ffast-math lets the loops call). Values within 2e-6 and gradients
// within 2e-5 of the formulas in float64 (tests/test_fused_kernels.py).

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
using bert_kernels::Bfloat16Bits;
using bert_kernels::Bfloat16ToFloat;
using bert_kernels::FloatToBfloat16;
using bert_kernels::BiasGradOutputs;
using bert_kernels::BiasOpOutput;
using bert_kernels::RowsWithColumnSums;
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

constexpr float kSqrtHalf = 0.7071067811865476f;
constexpr float kOneOverSqrt2Pi = 0.3989422804014327f;

// The tanh form (kExact false) or the erf form, x * Phi(x).
template <bool kExact>
inline float Gelu(float v) {
  if (kExact) return 0.5f * v * (1.f + std::erf(kSqrtHalf * v));
  const float t = Tanh(kSqrt2OverPi * (v + kCubic * v * v * v));
  return 0.5f * v * (1.f + t);
}

// d Gelu(v) / dv; for the erf form Phi(v) + v * phi(v).
template <bool kExact>
inline float GeluSlope(float v) {
  if (kExact) {
    return 0.5f * (1.f + std::erf(kSqrtHalf * v)) +
           v * kOneOverSqrt2Pi * std::exp(-0.5f * v * v);
  }
  const float t = Tanh(kSqrt2OverPi * (v + kCubic * v * v * v));
  return 0.5f * (1.f + t) + 0.5f * v * (1.f - t * t) * kSqrt2OverPi *
                                (1.f + 3.f * kCubic * v * v);
}

template <bool kExact>
CPU_CLONES void GeluForward(const float* in, float* out, int64_t begin,
                            int64_t end) {
#pragma omp simd
  for (int64_t i = begin; i < end; ++i) out[i] = Gelu<kExact>(in[i]);
}

template <bool kExact>
CPU_CLONES void GeluBackward(const float* upstream, const float* in,
                             float* out, int64_t begin, int64_t end) {
#pragma omp simd
  for (int64_t i = begin; i < end; ++i) {
    out[i] = upstream[i] * GeluSlope<kExact>(in[i]);
  }
}

// One row of bfloat16 matmul products x: gelu(x + bias), rounded to
// bfloat16 (the next matmul's operand).
template <bool kExact>
CPU_CLONES void BiasGeluRow(const uint16_t* in, const float* bias,
                            uint16_t* out, int64_t width) {
#pragma omp simd
  for (int64_t i = 0; i < width; ++i) {
    out[i] = FloatToBfloat16(Gelu<kExact>(Bfloat16ToFloat(in[i]) + bias[i]));
  }
}

// One row's gradient: g = dy * gelu'(x + bias) in float32, added to dbias
// and rounded to bfloat16 into dx (the matmul's gradient operand).
template <bool kExact>
CPU_CLONES void BiasGeluGradRow(const uint16_t* upstream, const uint16_t* in,
                                const float* bias, uint16_t* out,
                                float* dbias, int64_t width) {
#pragma omp simd
  for (int64_t i = 0; i < width; ++i) {
    const float g = Bfloat16ToFloat(upstream[i]) *
                    GeluSlope<kExact>(Bfloat16ToFloat(in[i]) + bias[i]);
    dbias[i] += g;
    out[i] = FloatToBfloat16(g);
  }
}

// One row of bfloat16 matmul products x: x + bias in float32, rounded to
// bfloat16 (the next matmul's operand).
CPU_CLONES void BiasRow(const uint16_t* in, const float* bias, uint16_t* out,
                        int64_t width) {
#pragma omp simd
  for (int64_t i = 0; i < width; ++i) {
    out[i] = FloatToBfloat16(Bfloat16ToFloat(in[i]) + bias[i]);
  }
}

// One row's bias gradient: dy added to dbias in float32.
CPU_CLONES void BiasGradRow(const uint16_t* upstream, float* dbias,
                            int64_t width) {
#pragma omp simd
  for (int64_t i = 0; i < width; ++i) dbias[i] += Bfloat16ToFloat(upstream[i]);
}

// The (x bfloat16, bias float) -> y bfloat16 ops' pass: row(x's row, bias,
// y's row, width) over x's rows on the op's threads; cost: rough cycles
// per element.
template <typename Row>
void BfloatBiasRows(OpKernelContext* context, int64_t cost, Row row) {
  int64_t rows = 0, width = 0;
  Tensor* y = nullptr;
  OP_REQUIRES_OK(context, BiasOpOutput(context, &rows, &width, &y));
  const uint16_t* in = Bfloat16Bits(context->input(0));
  const float* bias_data = context->input(1).flat<float>().data();
  uint16_t* out = Bfloat16Bits(y);
  Shard(context, rows, cost * width, [=](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      row(in + r * width, bias_data, out + r * width, width);
    }
  });
}

class FusedGeluOp : public OpKernel {
 public:
  explicit FusedGeluOp(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("exact", &exact_));
  }

  void Compute(OpKernelContext* context) override {
    const Tensor& x = context->input(0);
    Tensor* y = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, x.shape(), &y));
    const float* in = x.flat<float>().data();
    float* out = y->flat<float>().data();
    const auto forward = exact_ ? GeluForward<true> : GeluForward<false>;
    Shard(context, x.NumElements(), exact_ ? 30 : 20,
          [=](int64_t begin, int64_t end) { forward(in, out, begin, end); });
  }

 private:
  bool exact_;
};

class FusedGeluGradOp : public OpKernel {
 public:
  explicit FusedGeluGradOp(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("exact", &exact_));
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
    const auto backward = exact_ ? GeluBackward<true> : GeluBackward<false>;
    Shard(context, x.NumElements(), 30, [=](int64_t begin, int64_t end) {
      backward(upstream, in, out, begin, end);
    });
  }

 private:
  bool exact_;
};

class FusedBiasGeluOp : public OpKernel {
 public:
  explicit FusedBiasGeluOp(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("exact", &exact_));
  }

  void Compute(OpKernelContext* context) override {
    BfloatBiasRows(context, 25,
                   exact_ ? BiasGeluRow<true> : BiasGeluRow<false>);
  }

 private:
  bool exact_;
};

class FusedBiasGeluGradOp : public OpKernel {
 public:
  explicit FusedBiasGeluGradOp(OpKernelConstruction* context)
      : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("exact", &exact_));
  }

  void Compute(OpKernelContext* context) override {
    int64_t rows = 0, width = 0;
    Tensor *dx = nullptr, *dbias = nullptr;
    OP_REQUIRES_OK(context,
                   BiasGradOutputs(context, &rows, &width, &dx, &dbias));
    const uint16_t* upstream = Bfloat16Bits(context->input(0));
    const uint16_t* in = Bfloat16Bits(context->input(1));
    const float* bias_data = context->input(2).flat<float>().data();
    uint16_t* out = Bfloat16Bits(dx);
    const auto row = exact_ ? BiasGeluGradRow<true> : BiasGeluGradRow<false>;
    RowsWithColumnSums(
        context, rows, width, 1, 35 * width,
        [=](int64_t r, float* partial, float*) {
          row(upstream + r * width, in + r * width, bias_data,
              out + r * width, partial, width);
        },
        dbias->flat<float>().data());
  }

 private:
  bool exact_;
};

class FusedBiasAddOp : public OpKernel {
 public:
  explicit FusedBiasAddOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    BfloatBiasRows(context, 4, BiasRow);
  }
};

class FusedBiasAddGradOp : public OpKernel {
 public:
  explicit FusedBiasAddGradOp(OpKernelConstruction* context)
      : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const Tensor& dy = context->input(0);
    const Tensor& bias = context->input(1);
    int64_t rows = 0, width = 0;
    OP_REQUIRES_OK(context, bert_kernels::RowsAndWidth(dy, bias, "bias",
                                                       &rows, &width));
    Tensor* dbias = nullptr;
    OP_REQUIRES_OK(context,
                   context->allocate_output(0, bias.shape(), &dbias));
    const uint16_t* upstream = Bfloat16Bits(dy);
    RowsWithColumnSums(
        context, rows, width, 1, 2 * width,
        [=](int64_t r, float* partial, float*) {
          BiasGradRow(upstream + r * width, partial, width);
        },
        dbias->flat<float>().data());
  }
};

}  // namespace

REGISTER_OP("FusedBiasAdd")
    .Input("x: bfloat16")
    .Input("bias: float")
    .Output("y: bfloat16")
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape);
REGISTER_OP("FusedBiasAddGrad")
    .Input("dy: bfloat16")
    .Input("bias: float")
    .Output("dbias: float")
    .SetShapeFn([](tensorflow::shape_inference::InferenceContext* c) {
      c->set_output(0, c->input(1));
      return tensorflow::OkStatus();
    });
REGISTER_KERNEL_BUILDER(Name("FusedBiasAdd").Device(tensorflow::DEVICE_CPU),
                        FusedBiasAddOp);
REGISTER_KERNEL_BUILDER(
    Name("FusedBiasAddGrad").Device(tensorflow::DEVICE_CPU),
    FusedBiasAddGradOp);
REGISTER_OP("FusedBiasGelu")
    .Attr("exact: bool = false")
    .Input("x: bfloat16")
    .Input("bias: float")
    .Output("y: bfloat16")
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape);
REGISTER_OP("FusedBiasGeluGrad")
    .Attr("exact: bool = false")
    .Input("dy: bfloat16")
    .Input("x: bfloat16")
    .Input("bias: float")
    .Output("dx: bfloat16")
    .Output("dbias: float")
    .SetShapeFn(bert_kernels::BiasGradShapes);
REGISTER_KERNEL_BUILDER(Name("FusedBiasGelu").Device(tensorflow::DEVICE_CPU),
                        FusedBiasGeluOp);
REGISTER_KERNEL_BUILDER(
    Name("FusedBiasGeluGrad").Device(tensorflow::DEVICE_CPU),
    FusedBiasGeluGradOp);
REGISTER_OP("FusedGelu")
    .Attr("exact: bool = false")
    .Input("x: float")
    .Output("y: float")
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape);
REGISTER_OP("FusedGeluGrad")
    .Attr("exact: bool = false")
    .Input("dy: float")
    .Input("x: float")
    .Output("dx: float")
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape);
REGISTER_KERNEL_BUILDER(Name("FusedGelu").Device(tensorflow::DEVICE_CPU),
                        FusedGeluOp);
REGISTER_KERNEL_BUILDER(Name("FusedGeluGrad").Device(tensorflow::DEVICE_CPU),
                        FusedGeluGradOp);
