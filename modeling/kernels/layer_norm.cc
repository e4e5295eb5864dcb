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
#include "layer_norm_io.h"

namespace {

using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using bert_kernels::GetLayerNormBackward;
using bert_kernels::GetLayerNormForward;
using bert_kernels::LayerNormBackward;
using bert_kernels::LayerNormForward;
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

REGISTER_ADD_LAYER_NORM("FusedAddLayerNorm", FusedAddLayerNormOp,
                        FusedAddLayerNormGradOp);
