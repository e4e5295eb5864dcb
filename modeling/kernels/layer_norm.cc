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
// Numerics, its own: float32, the sums vectorized (the mean first, then
// the centered squares: two passes over the row in L1, no cancellation);
// within 1e-6 (values) and 1e-4 (gradients) of the formulas in float64
// (tests/test_fused_kernels.py). Both precisions' training uses it
// (modeling.layers.LayerNorm).

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
using bert_kernels::Residual;
using bert_kernels::RowsAndWidth;
using bert_kernels::RowsWithColumnSums;
using bert_kernels::Shard;

// Forward: (x [..., W], residual like x or empty, gamma [W], beta [W]) ->
// (y like x, mean [rows], rstd [rows]).
struct LayerNormForward {
  int64_t rows = 0, width = 0;
  const float *x, *residual, *gamma, *beta;  // residual null where empty
  float *y, *mean, *rstd;
};

inline tensorflow::Status GetLayerNormForward(
    tensorflow::OpKernelContext* context, LayerNormForward* io) {
  const tensorflow::Tensor& x = context->input(0);
  const tensorflow::Tensor& gamma = context->input(2);
  const tensorflow::Tensor& beta = context->input(3);
  TF_RETURN_IF_ERROR(RowsAndWidth(x, gamma, "gamma", &io->rows, &io->width));
  if (beta.shape() != gamma.shape()) {
    return tensorflow::errors::InvalidArgument("beta must be [width]");
  }
  TF_RETURN_IF_ERROR(Residual(x, context->input(1), &io->residual));
  tensorflow::Tensor *y = nullptr, *mean = nullptr, *rstd = nullptr;
  const tensorflow::TensorShape rows({io->rows});
  TF_RETURN_IF_ERROR(context->allocate_output(0, x.shape(), &y));
  TF_RETURN_IF_ERROR(context->allocate_output(1, rows, &mean));
  TF_RETURN_IF_ERROR(context->allocate_output(2, rows, &rstd));
  io->x = x.flat<float>().data();
  io->gamma = gamma.flat<float>().data();
  io->beta = beta.flat<float>().data();
  io->y = y->flat<float>().data();
  io->mean = mean->flat<float>().data();
  io->rstd = rstd->flat<float>().data();
  return tensorflow::OkStatus();
}

// Backward: (dy, x, residual, gamma, mean, rstd) -> (dx like x,
// dgamma [W], dbeta [W]).
struct LayerNormBackward {
  int64_t rows = 0, width = 0;
  const float *dy, *x, *residual, *gamma, *mean, *rstd;
  float *dx, *dgamma, *dbeta;
};

inline tensorflow::Status GetLayerNormBackward(
    tensorflow::OpKernelContext* context, LayerNormBackward* io) {
  const tensorflow::Tensor& dy = context->input(0);
  const tensorflow::Tensor& x = context->input(1);
  const tensorflow::Tensor& gamma = context->input(3);
  const tensorflow::Tensor& mean = context->input(4);
  const tensorflow::Tensor& rstd = context->input(5);
  TF_RETURN_IF_ERROR(RowsAndWidth(x, gamma, "gamma", &io->rows, &io->width));
  if (dy.shape() != x.shape() || mean.NumElements() != io->rows ||
      rstd.NumElements() != io->rows) {
    return tensorflow::errors::InvalidArgument(
        "dy must be shaped as x, mean and rstd [rows]");
  }
  TF_RETURN_IF_ERROR(Residual(x, context->input(2), &io->residual));
  tensorflow::Tensor *dx = nullptr, *dgamma = nullptr, *dbeta = nullptr;
  TF_RETURN_IF_ERROR(context->allocate_output(0, x.shape(), &dx));
  TF_RETURN_IF_ERROR(context->allocate_output(1, gamma.shape(), &dgamma));
  TF_RETURN_IF_ERROR(context->allocate_output(2, gamma.shape(), &dbeta));
  io->dy = dy.flat<float>().data();
  io->x = x.flat<float>().data();
  io->gamma = gamma.flat<float>().data();
  io->mean = mean.flat<float>().data();
  io->rstd = rstd.flat<float>().data();
  io->dx = dx->flat<float>().data();
  io->dgamma = dgamma->flat<float>().data();
  io->dbeta = dbeta->flat<float>().data();
  return tensorflow::OkStatus();
}

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
    LayerNormForward io;
    OP_REQUIRES_OK(context, GetLayerNormForward(context, &io));
    const int64_t width = io.width;
    const float epsilon = epsilon_;
    Shard(context, io.rows, 12 * width, [=](int64_t begin, int64_t end) {
      std::vector<float> row(width);
      for (int64_t r = begin; r < end; ++r) {
        RowSum(io.x + r * width,
               io.residual ? io.residual + r * width : nullptr, row.data(),
               width);
        NormalizeRow(row.data(), io.gamma, io.beta, epsilon, width,
                     io.y + r * width, io.mean + r, io.rstd + r);
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
    LayerNormBackward io;
    OP_REQUIRES_OK(context, GetLayerNormBackward(context, &io));
    const int64_t width = io.width;
    // [2, width]: dgamma, then dbeta.
    std::vector<float> sums(2 * width);
    RowsWithColumnSums(
        context, io.rows, width, 2, 20 * width,
        [=](int64_t r, float* partial, float* row) {
          RowSum(io.x + r * width,
                 io.residual ? io.residual + r * width : nullptr, row, width);
          RowGradient(row, io.dy + r * width, io.gamma, io.mean[r],
                      io.rstd[r], width, io.dx + r * width, partial,
                      partial + width);
        },
        sums.data());
    std::copy(sums.begin(), sums.begin() + width, io.dgamma);
    std::copy(sums.begin() + width, sums.end(), io.dbeta);
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
