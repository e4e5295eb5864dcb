// Residual add and LayerNorm over the last axis in float32 for CPUs,
// rounded bit for bit as TensorFlow's graph of Keras' LayerNormalization
// (its non-fused path: moments, then the batch normalization formula)
// rounds it, after grappler's rewrites: one pass forward, two backward
// (one over rows, one over columns for gamma's and beta's sums), where the
// composite takes about eight forward and fifteen backward. So float32
// training, whose weights must not change by a bit, can use it
// (modeling/fused_kernels.py, add_layer_norm with composite).
//
// What the graph computes for a row s = x + residual of width W, with
// TensorFlow 2.20's x86-64 kernels (Eigen, AVX packets of 8, no FMA;
// pinned by tests/test_fused_kernels.py against the composite):
//   mean = Sum(s) / W;  var = Sum((s - mean)^2) / W
//   r = Rsqrt(epsilon + var);  m = gamma * r
//   y = s * m + (beta - m * mean)
// and backward, with q = 1/W rounded (grappler's reciprocal of the
// division in Mean's gradient):
//   n = s * dy + mean * -dy
//   dbeta = column sums of dy;  dgamma = column sums of n * r
//   g = RsqrtGrad(r, Sum(n * gamma))
//   ds = (m * dy + (2 * (q * g)) * (s - mean)) + q * Sum(m * -dy)
// Sum is Eigen's vectorized reduction (EigenSum), the column sums its
// reduction over rows (ColumnSums); Rsqrt and RsqrtGrad differ between
// Eigen's packets and its scalar tail, the last rows % 8 rows (RowRsqrt,
// RowRsqrtGrad). Compiled without contracting a * b + c and without
// -ffast-math (fused_kernels.EXACT_SOURCES).

// Only for x86-64, the build whose rounding it repeats: elsewhere the
// ops are not registered and the composite runs.
#if defined(__x86_64__)

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "common.h"
#include "eigen_sum.h"
#include "layer_norm_io.h"

namespace {

using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using bert_kernels::GetLayerNormBackward;
using bert_kernels::GetLayerNormForward;
using bert_kernels::LayerNormBackward;
using bert_kernels::LayerNormForward;
using bert_kernels::Shard;
using bert_kernels::EigenSum;
using bert_kernels::kLanes;

// Eigen's packet rsqrt: the CPU's approximate vrsqrtps (AVX's, whose
// table is the CPU's own, as TensorFlow's) and one Newton step.
__attribute__((target("avx"))) float PacketRsqrt(float value) {
  const __m256 a = _mm256_set1_ps(value);
  const __m256 approx = _mm256_rsqrt_ps(a);
  const __m256 h = _mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(a, approx),
                                               approx),
                                 _mm256_set1_ps(-1.f));
  const __m256 refined = _mm256_add_ps(
      _mm256_mul_ps(_mm256_mul_ps(approx, _mm256_set1_ps(-0.5f)), h), approx);
  const __m256 nan = _mm256_cmp_ps(refined, refined, _CMP_UNORD_Q);
  return _mm256_cvtss_f32(_mm256_blendv_ps(refined, approx, nan));
}

// Rsqrt of a row's epsilon + var: in a packet, or in the scalar tail.
inline float RowRsqrt(float value, bool packet) {
  return packet ? PacketRsqrt(value) : 1.f / std::sqrt(value);
}

// RsqrtGrad(r, g): its packet form, products no-NaN (0 where the second
// factor is 0), and its scalar form.
inline float RowRsqrtGrad(float r, float g, bool packet) {
  if (packet) {
    const float rg = g == 0.f ? 0.f : r * g;
    return rg == 0.f ? 0.f : (-0.5f * (r * r)) * rg;
  }
  return g == 0.f ? 0.f : (-0.5f * (g * r)) * (r * r);
}

// Whether row r of rows is in Eigen's packets (not the scalar tail).
inline bool InPacket(int64_t r, int64_t rows) {
  return r < rows - rows % kLanes;
}

// s = x + residual (residual may be null) into row[0, width).
CPU_CLONES void RowOfSum(const float* x, const float* residual, float* row,
                         int64_t width) {
  if (residual == nullptr) {
    std::copy(x, x + width, row);
    return;
  }
#pragma omp simd
  for (int64_t i = 0; i < width; ++i) row[i] = residual[i] + x[i];
}

CPU_CLONES void Squares(const float* row, float mean, float* out,
                        int64_t width) {
#pragma omp simd
  for (int64_t i = 0; i < width; ++i) {
    const float centered = row[i] - mean;
    out[i] = centered * centered;
  }
}

CPU_CLONES void Normalize(const float* row, const float* gamma,
                          const float* beta, float mean, float r,
                          float* out, int64_t width) {
#pragma omp simd
  for (int64_t i = 0; i < width; ++i) {
    const float m = gamma[i] * r;
    out[i] = row[i] * m + (beta[i] - m * mean);
  }
}

// The two row sums' summands: n * gamma and m * -dy.
CPU_CLONES void GradientTerms(const float* row, const float* dy,
                              const float* gamma, float mean, float r,
                              float* n_gamma, float* m_dy, int64_t width) {
#pragma omp simd
  for (int64_t i = 0; i < width; ++i) {
    const float n = row[i] * dy[i] + mean * -dy[i];
    n_gamma[i] = n * gamma[i];
    m_dy[i] = (gamma[i] * r) * -dy[i];
  }
}

CPU_CLONES void RowGradient(const float* row, const float* dy,
                            const float* gamma, float mean, float r,
                            float twice_qg, float q_sum, float* out,
                            int64_t width) {
#pragma omp simd
  for (int64_t i = 0; i < width; ++i) {
    out[i] = ((gamma[i] * r) * dy[i] + twice_qg * (row[i] - mean)) + q_sum;
  }
}

// dgamma and dbeta over columns [begin, end), which are packet columns
// (Eigen sums each over the rows with four accumulators, row j into
// j % 4, where there are 16 rows or more) or the scalar tail (in order).
void ColumnSums(const float* x, const float* residual, const float* dy,
                const float* mean, const float* r, int64_t rows,
                int64_t width, int64_t begin, int64_t end, bool packet,
                float* dgamma, float* dbeta) {
  const int64_t columns = end - begin;
  const int ways = packet && rows >= 16 ? 4 : 1;
  const int64_t unrolled = rows / ways * ways;
  std::vector<float> acc(2 * ways * columns, 0.f);
  auto add = [&](int64_t j, int k) {
    float* gamma_acc = acc.data() + 2 * k * columns;
    float* beta_acc = gamma_acc + columns;
    const float* x_row = x + j * width + begin;
    const float* r_row = residual ? residual + j * width + begin : nullptr;
    const float* dy_row = dy + j * width + begin;
    for (int64_t c = 0; c < columns; ++c) {
      const float s = r_row ? r_row[c] + x_row[c] : x_row[c];
      gamma_acc[c] += (s * dy_row[c] + mean[j] * -dy_row[c]) * r[j];
      beta_acc[c] += dy_row[c];
    }
  };
  for (int64_t j = 0; j < unrolled; ++j) add(j, j % ways);
  for (int k = 1; k < ways; ++k) {
    for (int64_t c = 0; c < 2 * columns; ++c) acc[c] += acc[2 * k * columns + c];
  }
  for (int64_t j = unrolled; j < rows; ++j) add(j, 0);
  std::copy(acc.begin(), acc.begin() + columns, dgamma + begin);
  std::copy(acc.begin() + columns, acc.begin() + 2 * columns, dbeta + begin);
}

class CompositeAddLayerNormOp : public OpKernel {
 public:
  explicit CompositeAddLayerNormOp(OpKernelConstruction* context)
      : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("epsilon", &epsilon_));
  }

  void Compute(OpKernelContext* context) override {
    LayerNormForward io;
    OP_REQUIRES_OK(context, GetLayerNormForward(context, &io));
    const int64_t rows = io.rows, width = io.width;
    const float epsilon = epsilon_;
    Shard(context, rows, 16 * width, [=](int64_t begin, int64_t end) {
      std::vector<float> row(width), squares(width);
      for (int64_t r = begin; r < end; ++r) {
        RowOfSum(io.x + r * width,
                 io.residual ? io.residual + r * width : nullptr, row.data(),
                 width);
        const float row_mean = EigenSum(row.data(), width) / width;
        Squares(row.data(), row_mean, squares.data(), width);
        const float var = EigenSum(squares.data(), width) / width;
        const float row_rstd = RowRsqrt(epsilon + var, InPacket(r, rows));
        Normalize(row.data(), io.gamma, io.beta, row_mean, row_rstd,
                  io.y + r * width, width);
        io.mean[r] = row_mean;
        io.rstd[r] = row_rstd;
      }
    });
  }

 private:
  float epsilon_;
};

class CompositeAddLayerNormGradOp : public OpKernel {
 public:
  explicit CompositeAddLayerNormGradOp(OpKernelConstruction* context)
      : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    LayerNormBackward io;
    OP_REQUIRES_OK(context, GetLayerNormBackward(context, &io));
    const int64_t rows = io.rows, width = io.width;
    const float q = 1.f / static_cast<float>(width);
    Shard(context, rows, 20 * width, [=](int64_t begin, int64_t end) {
      std::vector<float> row(width), n_gamma(width), m_dy(width);
      for (int64_t r = begin; r < end; ++r) {
        RowOfSum(io.x + r * width,
                 io.residual ? io.residual + r * width : nullptr, row.data(),
                 width);
        const float* dy_row = io.dy + r * width;
        GradientTerms(row.data(), dy_row, io.gamma, io.mean[r], io.rstd[r],
                      n_gamma.data(), m_dy.data(), width);
        const float g = RowRsqrtGrad(
            io.rstd[r], EigenSum(n_gamma.data(), width), InPacket(r, rows));
        RowGradient(row.data(), dy_row, io.gamma, io.mean[r], io.rstd[r],
                    2.f * (q * g), q * EigenSum(m_dy.data(), width),
                    io.dx + r * width, width);
      }
    });
    // Columns in blocks of 8 (Eigen's packets), then the tail's.
    const int64_t blocks = width / kLanes;
    Shard(context, blocks, 6 * kLanes * rows, [=](int64_t begin, int64_t end) {
      ColumnSums(io.x, io.residual, io.dy, io.mean, io.rstd, rows, width,
                 begin * kLanes, end * kLanes, true, io.dgamma, io.dbeta);
    });
    if (width % kLanes) {
      ColumnSums(io.x, io.residual, io.dy, io.mean, io.rstd, rows, width,
                 blocks * kLanes, width, false, io.dgamma, io.dbeta);
    }
  }
};

}  // namespace

REGISTER_ADD_LAYER_NORM("CompositeAddLayerNorm", CompositeAddLayerNormOp,
                        CompositeAddLayerNormGradOp);

#endif  // defined(__x86_64__)
