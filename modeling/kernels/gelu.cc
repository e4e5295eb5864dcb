// The feed-forward layer's bias add and GELU for CPUs, forward and
// gradient each in one pass over memory, where TensorFlow's composite of
// them takes about a dozen elementwise ops, each a pass of its own (3x to
// 3.9x faster at BERT-Base's feed-forward width:
// benchmarks/profiling/elementwise.py). The original's GELU (tanh form),
// or with the attribute exact the erf form (modeling.layers.gelu_exact,
// the GELU of HuggingFace's models such as all-MiniLM-L6-v2):
// - FusedBiasGelu: y = gelu(x + bias), x and y of type T: float32, or
//   bfloat16 between two bfloat16 matmuls (the first's products in, the
//   second's operand out, rounded to nearest even), bias float32; the
//   arithmetic is float32 either way. Its gradient likewise: dx of type
//   T, dbias summed over the rows in float32 (per block of rows, then
//   the blocks).
// - FusedBiasAdd: the same without the GELU for bfloat16 (the attention's
//   query, key and value projections): the add in float32, the sum rounded
//   to bfloat16; its gradient is the bias's alone (the products' is the
//   upstream gradient itself). In float32 TensorFlow's BiasAdd is already
//   one pass.
//
// Numerics, its own: tanh(u) = 1 - 2 / (1 + exp(2u)), and exactly +-1
// where |u| >= 9.02 (where float32's tanh is, so the tails' values are 0
// and x and their slopes 0 and 1); erf and exp are libmvec's (glibc's
// vector math, which -ffast-math lets the loops call). Values within 2e-6
// and gradients within 2e-5 of the formulas in float64
// (tests/test_fused_kernels.py).

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
using bert_kernels::BiasGradOutputs;
using bert_kernels::BiasOpOutput;
using bert_kernels::Bfloat16ToFloat;
using bert_kernels::Data;
using bert_kernels::FloatToBfloat16;
using bert_kernels::FromFloat;
using bert_kernels::RowsWithColumnSums;
using bert_kernels::Shard;
using bert_kernels::Storage;
using bert_kernels::ToFloat;

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

inline float Tanh(float u) {
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

// One row of matmul products x (S: float or bfloat16 bits):
// gelu(x + bias), stored as S.
template <bool kExact, typename S>
CPU_CLONES void BiasGeluRow(const S* in, const float* bias, S* out,
                            int64_t width) {
#pragma omp simd
  for (int64_t i = 0; i < width; ++i) {
    out[i] = FromFloat<S>(Gelu<kExact>(ToFloat(in[i]) + bias[i]));
  }
}

// One row's gradient: g = dy * gelu'(x + bias) in float32, added to dbias
// and stored as S into dx.
template <bool kExact, typename S>
CPU_CLONES void BiasGeluGradRow(const S* upstream, const S* in,
                                const float* bias, S* out, float* dbias,
                                int64_t width) {
#pragma omp simd
  for (int64_t i = 0; i < width; ++i) {
    const float g =
        ToFloat(upstream[i]) * GeluSlope<kExact>(ToFloat(in[i]) + bias[i]);
    dbias[i] += g;
    out[i] = FromFloat<S>(g);
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

// The (x T, bias float) -> y T ops' pass: row(x's row, bias, y's row,
// width) over x's rows on the op's threads; cost: rough cycles per
// element.
template <typename T, typename Row>
void BiasRows(OpKernelContext* context, int64_t cost, Row row) {
  int64_t rows = 0, width = 0;
  Tensor* y = nullptr;
  OP_REQUIRES_OK(context, BiasOpOutput(context, &rows, &width, &y));
  const auto* in = Data<T>(context->input(0));
  const float* bias_data = context->input(1).flat<float>().data();
  auto* out = Data<T>(y);
  Shard(context, rows, cost * width, [=](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      row(in + r * width, bias_data, out + r * width, width);
    }
  });
}

template <typename T>
class FusedBiasGeluOp : public OpKernel {
 public:
  explicit FusedBiasGeluOp(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("exact", &exact_));
  }

  void Compute(OpKernelContext* context) override {
    using S = typename Storage<T>::type;
    BiasRows<T>(context, 25,
                exact_ ? BiasGeluRow<true, S> : BiasGeluRow<false, S>);
  }

 private:
  bool exact_;
};

template <typename T>
class FusedBiasGeluGradOp : public OpKernel {
 public:
  explicit FusedBiasGeluGradOp(OpKernelConstruction* context)
      : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("exact", &exact_));
  }

  void Compute(OpKernelContext* context) override {
    using S = typename Storage<T>::type;
    int64_t rows = 0, width = 0;
    Tensor *dx = nullptr, *dbias = nullptr;
    OP_REQUIRES_OK(context,
                   BiasGradOutputs(context, &rows, &width, &dx, &dbias));
    const S* upstream = Data<T>(context->input(0));
    const S* in = Data<T>(context->input(1));
    const float* bias_data = context->input(2).flat<float>().data();
    S* out = Data<T>(dx);
    const auto row =
        exact_ ? BiasGeluGradRow<true, S> : BiasGeluGradRow<false, S>;
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
    BiasRows<tensorflow::bfloat16>(context, 4, BiasRow);
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
    const uint16_t* upstream = Data<tensorflow::bfloat16>(dy);
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
    .Attr("T: {float, bfloat16}")
    .Attr("exact: bool = false")
    .Input("x: T")
    .Input("bias: float")
    .Output("y: T")
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape);
REGISTER_OP("FusedBiasGeluGrad")
    .Attr("T: {float, bfloat16}")
    .Attr("exact: bool = false")
    .Input("dy: T")
    .Input("x: T")
    .Input("bias: float")
    .Output("dx: T")
    .Output("dbias: float")
    .SetShapeFn(bert_kernels::BiasGradShapes);
REGISTER_FLOAT_AND_BFLOAT16("FusedBiasGelu", FusedBiasGeluOp);
REGISTER_FLOAT_AND_BFLOAT16("FusedBiasGeluGrad", FusedBiasGeluGradOp);
