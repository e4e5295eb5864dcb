// Residual add and LayerNorm over the last axis in one pass over memory
// each way, where Keras' LayerNormalization (moments, then the batch
// normalization formula) and the add before it take about seven passes
// forward and a dozen backward (benchmarks/profiling/elementwise.py).
//
// Forward, each row s = x + residual (W wide) is read once into L1, and
//   y = (s - mean) * rstd * gamma + beta,  rstd = 1 / sqrt(var + epsilon),
// with the row's mean and rstd kept for the backward pass. Backward, s is
// formed again from x and residual (nothing W wide is kept), and
//   ds = rstd * (g - mean(g) - xhat * mean(g * xhat)),  g = dy * gamma,
//   xhat = (s - mean) * rstd; dgamma = sum over rows of dy * xhat,
//   dbeta = sum of dy (per block of rows, then summed).
// The sums are vectorized, so they round differently from Keras' (~1e-7
// relative): bfloat16 training only (modeling.layers.LayerNorm).

#include <algorithm>
#include <cmath>
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
using tensorflow::TensorShape;
using bert_kernels::Residual;
using bert_kernels::RowsAndWidth;
using bert_kernels::RowsWithColumnSums;
using bert_kernels::Shard;

// s = x + residual (residual may be null) into row[0, width).
CPU_CLONES void RowSum(const float* x, const float* residual, float* row,
                       int64_t width) {
  if (residual == nullptr) {
    std::copy(x, x + width, row);
    return;
  }
#pragma omp simd
  for (int64_t i = 0; i < width; ++i) row[i] = x[i] + residual[i];
}

CPU_CLONES void NormalizeRow(const float* row, const float* gamma,
                             const float* beta, float epsilon, int64_t width,
                             float* out, float* mean_out, float* rstd_out) {
  float sum = 0.f;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < width; ++i) sum += row[i];
  const float mean = sum / width;
  float squares = 0.f;
#pragma omp simd reduction(+ : squares)
  for (int64_t i = 0; i < width; ++i) {
    const float centered = row[i] - mean;
    squares += centered * centered;
  }
  const float rstd = 1.f / std::sqrt(squares / width + epsilon);
#pragma omp simd
  for (int64_t i = 0; i < width; ++i) {
    out[i] = (row[i] - mean) * rstd * gamma[i] + beta[i];
  }
  *mean_out = mean;
  *rstd_out = rstd;
}

// One row's ds into out, its dy * xhat and dy added to dgamma and dbeta.
CPU_CLONES void RowGradient(const float* row, const float* dy,
                            const float* gamma, float mean, float rstd,
                            int64_t width, float* out, float* dgamma,
                            float* dbeta) {
  float sum_g = 0.f, sum_gx = 0.f;
#pragma omp simd reduction(+ : sum_g, sum_gx)
  for (int64_t i = 0; i < width; ++i) {
    const float xhat = (row[i] - mean) * rstd;
    const float g = dy[i] * gamma[i];
    sum_g += g;
    sum_gx += g * xhat;
    dgamma[i] += dy[i] * xhat;
    dbeta[i] += dy[i];
  }
  const float mean_g = sum_g / width, mean_gx = sum_gx / width;
#pragma omp simd
  for (int64_t i = 0; i < width; ++i) {
    const float xhat = (row[i] - mean) * rstd;
    out[i] = rstd * (dy[i] * gamma[i] - mean_g - xhat * mean_gx);
  }
}

class FusedAddLayerNormOp : public OpKernel {
 public:
  explicit FusedAddLayerNormOp(OpKernelConstruction* context)
      : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("epsilon", &epsilon_));
  }

  void Compute(OpKernelContext* context) override {
    const Tensor& x = context->input(0);
    const Tensor& gamma = context->input(2);
    const Tensor& beta = context->input(3);
    int64_t rows = 0, width = 0;
    OP_REQUIRES_OK(context, RowsAndWidth(x, gamma, "gamma", &rows, &width));
    OP_REQUIRES(context, beta.shape() == gamma.shape(),
                tensorflow::errors::InvalidArgument("beta must be [width]"));
    const float* residual = nullptr;
    OP_REQUIRES_OK(context, Residual(x, context->input(1), &residual));
    Tensor *y = nullptr, *mean = nullptr, *rstd = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, x.shape(), &y));
    OP_REQUIRES_OK(context,
                   context->allocate_output(1, TensorShape({rows}), &mean));
    OP_REQUIRES_OK(context,
                   context->allocate_output(2, TensorShape({rows}), &rstd));
    const float* in = x.flat<float>().data();
    const float* gamma_data = gamma.flat<float>().data();
    const float* beta_data = beta.flat<float>().data();
    float* out = y->flat<float>().data();
    float* mean_data = mean->flat<float>().data();
    float* rstd_data = rstd->flat<float>().data();
    const float epsilon = epsilon_;
    Shard(context, rows, 12 * width, [=](int64_t begin, int64_t end) {
      std::vector<float> row(width);
      for (int64_t r = begin; r < end; ++r) {
        RowSum(in + r * width, residual ? residual + r * width : nullptr,
               row.data(), width);
        NormalizeRow(row.data(), gamma_data, beta_data, epsilon, width,
                     out + r * width, mean_data + r, rstd_data + r);
      }
    });
  }

 private:
  float epsilon_;
};

class FusedAddLayerNormGradOp : public OpKernel {
 public:
  explicit FusedAddLayerNormGradOp(OpKernelConstruction* context)
      : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const Tensor& dy = context->input(0);
    const Tensor& x = context->input(1);
    const Tensor& gamma = context->input(3);
    const Tensor& mean = context->input(4);
    const Tensor& rstd = context->input(5);
    int64_t rows = 0, width = 0;
    OP_REQUIRES_OK(context, RowsAndWidth(x, gamma, "gamma", &rows, &width));
    OP_REQUIRES(context, dy.shape() == x.shape() &&
                    mean.NumElements() == rows && rstd.NumElements() == rows,
                tensorflow::errors::InvalidArgument(
                    "dy must be shaped as x, mean and rstd [rows]"));
    const float* residual = nullptr;
    OP_REQUIRES_OK(context, Residual(x, context->input(2), &residual));
    Tensor *dx = nullptr, *dgamma = nullptr, *dbeta = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, x.shape(), &dx));
    OP_REQUIRES_OK(context,
                   context->allocate_output(1, gamma.shape(), &dgamma));
    OP_REQUIRES_OK(context,
                   context->allocate_output(2, gamma.shape(), &dbeta));
    const float* upstream = dy.flat<float>().data();
    const float* in = x.flat<float>().data();
    const float* gamma_data = gamma.flat<float>().data();
    const float* mean_data = mean.flat<float>().data();
    const float* rstd_data = rstd.flat<float>().data();
    float* out = dx->flat<float>().data();
    // [2, width]: dgamma, then dbeta.
    std::vector<float> sums(2 * width);
    RowsWithColumnSums(
        context, rows, width, 2, 20 * width,
        [=](int64_t r, float* partial, float* row) {
          RowSum(in + r * width, residual ? residual + r * width : nullptr,
                 row, width);
          RowGradient(row, upstream + r * width, gamma_data, mean_data[r],
                      rstd_data[r], width, out + r * width, partial,
                      partial + width);
        },
        sums.data());
    std::copy(sums.begin(), sums.begin() + width,
              dgamma->flat<float>().data());
    std::copy(sums.begin() + width, sums.end(), dbeta->flat<float>().data());
  }
};

}  // namespace

REGISTER_OP("FusedAddLayerNorm")
    .Input("x: float")
    .Input("residual: float")
    .Input("gamma: float")
    .Input("beta: float")
    .Attr("epsilon: float")
    .Output("y: float")
    .Output("mean: float")
    .Output("rstd: float")
    .SetShapeFn([](tensorflow::shape_inference::InferenceContext* c) {
      c->set_output(0, c->input(0));
      c->set_output(1, c->Vector(c->UnknownDim()));
      c->set_output(2, c->Vector(c->UnknownDim()));
      return tensorflow::OkStatus();
    });
REGISTER_OP("FusedAddLayerNormGrad")
    .Input("dy: float")
    .Input("x: float")
    .Input("residual: float")
    .Input("gamma: float")
    .Input("mean: float")
    .Input("rstd: float")
    .Output("dx: float")
    .Output("dgamma: float")
    .Output("dbeta: float")
    .SetShapeFn([](tensorflow::shape_inference::InferenceContext* c) {
      c->set_output(0, c->input(1));
      c->set_output(1, c->input(3));
      c->set_output(2, c->input(3));
      return tensorflow::OkStatus();
    });
REGISTER_KERNEL_BUILDER(
    Name("FusedAddLayerNorm").Device(tensorflow::DEVICE_CPU),
    FusedAddLayerNormOp);
REGISTER_KERNEL_BUILDER(
    Name("FusedAddLayerNormGrad").Device(tensorflow::DEVICE_CPU),
    FusedAddLayerNormGradOp);
