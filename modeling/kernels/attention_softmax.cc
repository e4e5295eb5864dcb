// The attention probabilities on CPUs in one pass each way: from the
// scores Q K^T to the context matmul's operand,
//   probs = softmax(scores * scale + (1 - mask) * -10000)
//   dropped = stateless_dropout(probs, rate, seed),
// where the composite (modeling.layers.SelfAttention) scales the scores,
// adds the mask, takes the softmax, draws the dropout's uniforms and drops
// (and in bfloat16 casts to float32 and back): five to seven passes over
// the [B, N, F, T] tensor, the largest of a layer at short sequences. The
// gradient likewise: dropout's, the softmax's and the scale's in one pass.
// - FusedAttentionSoftmax: scores T [B, N, F, T] (float32, or bfloat16
//   between two bfloat16 matmuls), mask float32 [B, M, T] (M is 1 or F; 1
//   where attending is allowed), the dropout's Philox key and counter
//   (StatelessRandomGetKeyCounter of its seed), and where each score's
//   uniform lies in the stream: row_starts int64 [B * N * F] and columns
//   int64 [T], increasing (uniform of row r, column j: element
//   row_starts[r] + columns[j]), or both empty for the scores' own layout
//   (r * T + j) -> probs float32, kept for the gradient: the softmax,
//   negated where dropped (its sign is the mask, so the gradient draws
//   nothing again); dropped T. An example's attention on its real tokens
//   alone (modeling.layers.SelfAttention) passes its rows' and columns'
//   places in the padded batch, so it drops what the padded batch drops.
// - FusedAttentionSoftmaxGrad: d(dropped) T, probs -> d(scores) T.
// The masks are stateless_dropout's on the [B, N, F, T] probabilities
// (philox.h), as the composite draws them; rate 0 drops nothing.
//
// Numerics, its own: float32 throughout, the row's maximum subtracted
// before exp (libmvec's), the sums vectorized; bfloat16 results rounded to
// nearest even. Within 1e-6 (float32) of the formulas in float64
// (tests/test_fused_kernels.py).

#include <cmath>
#include <limits>
#include <vector>

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
using bert_kernels::Data;
using bert_kernels::FromFloat;
using bert_kernels::Philox;
using bert_kernels::ReadPhilox;
using bert_kernels::Shard;
using bert_kernels::Storage;
using bert_kernels::ToFloat;
using bert_kernels::UniformsAt;

// modeling.layers.MASK_ADDER.
constexpr float kMaskAdder = -10000.0f;

// One row of T scores: probs = the softmax of the scaled, masked scores;
// dropped = probs dropped (uniform < rate: 0, else * keep_scale), stored
// as S (float, or bfloat16 bits). uniform is null where nothing is dropped.
template <typename S>
CPU_CLONES void SoftmaxRow(const S* scores, const float* mask,
                           const float* uniform, float scale, float rate,
                           float keep_scale, int64_t width, float* probs,
                           S* dropped) {
  float max = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : max)
  for (int64_t i = 0; i < width; ++i) {
    const float s =
        ToFloat(scores[i]) * scale + (1.0f - mask[i]) * kMaskAdder;
    probs[i] = s;
    max = s > max ? s : max;
  }
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < width; ++i) {
    const float e = std::exp(probs[i] - max);
    probs[i] = e;
    sum += e;
  }
  const float inverse = 1.0f / sum;
  if (uniform == nullptr) {
#pragma omp simd
    for (int64_t i = 0; i < width; ++i) {
      const float p = probs[i] * inverse;
      probs[i] = p;
      dropped[i] = FromFloat<S>(p);
    }
    return;
  }
#pragma omp simd
  for (int64_t i = 0; i < width; ++i) {
    const float p = probs[i] * inverse;
    const bool keep = uniform[i] >= rate;
    probs[i] = keep ? p : -p;
    dropped[i] = FromFloat<S>(keep ? p * keep_scale : 0.0f);
  }
}

// One row's gradient from the forward pass's signed probs (negative where
// dropped): dp = dropout's gradient of upstream (0 where dropped, else
// upstream * keep_scale); d(scores) = p * (dp - sum(dp * p)) * scale,
// stored as S. (Where p is 0 the mask does not matter: both terms vanish.)
template <typename S>
CPU_CLONES void SoftmaxGradRow(const S* upstream, const float* probs,
                               float scale, float keep_scale, int64_t width,
                               S* out) {
  float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
  for (int64_t i = 0; i < width; ++i) {
    const float dp = probs[i] < 0.0f
                         ? 0.0f
                         : ToFloat(upstream[i]) * keep_scale;
    dot += dp * std::fabs(probs[i]);
  }
#pragma omp simd
  for (int64_t i = 0; i < width; ++i) {
    const float dp = probs[i] < 0.0f
                         ? 0.0f
                         : ToFloat(upstream[i]) * keep_scale;
    out[i] = FromFloat<S>(std::fabs(probs[i]) * (dp - dot) * scale);
  }
}

template <typename T>
class FusedAttentionSoftmaxOp : public OpKernel {
 public:
  explicit FusedAttentionSoftmaxOp(OpKernelConstruction* context)
      : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("scale", &scale_));
    OP_REQUIRES_OK(context, context->GetAttr("rate", &rate_));
    OP_REQUIRES_OK(context, context->GetAttr("keep_scale", &keep_scale_));
  }

  void Compute(OpKernelContext* context) override {
    const Tensor& scores = context->input(0);
    const Tensor& mask = context->input(1);
    // mask [B, M, T], M 1 (every from-position alike) or F.
    OP_REQUIRES(
        context,
        scores.dims() == 4 && mask.dims() == 3 &&
            mask.dim_size(0) == scores.dim_size(0) &&
            (mask.dim_size(1) == 1 || mask.dim_size(1) == scores.dim_size(2)) &&
            mask.dim_size(2) == scores.dim_size(3),
        tensorflow::errors::InvalidArgument(
            "mask must be [batch, 1 or from, to] for scores [batch, heads, "
            "from, to]: mask is ",
            mask.shape().DebugString(), ", scores ",
            scores.shape().DebugString()));
    Philox philox;
    OP_REQUIRES_OK(context,
                   ReadPhilox(context->input(2), context->input(3), &philox));
    const Tensor& row_starts = context->input(4);
    const Tensor& columns = context->input(5);
    const int64_t rows = scores.dim_size(3) ? scores.NumElements() /
                                                  scores.dim_size(3)
                                            : 0;
    const bool own_layout =
        row_starts.NumElements() == 0 && columns.NumElements() == 0;
    OP_REQUIRES(
        context,
        own_layout || (row_starts.NumElements() == rows &&
                       columns.NumElements() == scores.dim_size(3)),
        tensorflow::errors::InvalidArgument(
            "row_starts and columns must be empty, or have one element per "
            "row of scores (", rows, ") and per column (", scores.dim_size(3),
            "): they have ", row_starts.NumElements(), " and ",
            columns.NumElements()));
    const int64_t* starts_data =
        own_layout ? nullptr : row_starts.flat<int64_t>().data();
    const int64_t* columns_data =
        own_layout ? nullptr : columns.flat<int64_t>().data();
    // The stream's elements a row's uniforms span: columns[0] ..
    // columns[T - 1] (the row's own width in its own layout).
    int64_t span = scores.dim_size(3);
    if (!own_layout && span > 0) {
      for (int64_t j = 1; j < span; ++j) {
        OP_REQUIRES(context, columns_data[j] > columns_data[j - 1],
                    tensorflow::errors::InvalidArgument(
                        "columns must increase: columns[", j, "] is ",
                        columns_data[j], " after ", columns_data[j - 1]));
      }
      span = columns_data[span - 1] - columns_data[0] + 1;
    }
    Tensor *probs = nullptr, *dropped = nullptr;
    OP_REQUIRES_OK(context,
                   context->allocate_output(0, scores.shape(), &probs));
    OP_REQUIRES_OK(context,
                   context->allocate_output(1, scores.shape(), &dropped));
    using S = typename Storage<T>::type;
    const S* in = Data<T>(scores);
    const float* mask_data = mask.flat<float>().data();
    float* probs_data = probs->flat<float>().data();
    S* out = Data<T>(dropped);
    const int64_t heads = scores.dim_size(1), from = scores.dim_size(2);
    const int64_t width = scores.dim_size(3), mask_rows = mask.dim_size(1);
    const float scale = scale_, rate = rate_, keep_scale = keep_scale_;
    const bool drop = rate > 0.0f;
    Shard(context, width ? scores.NumElements() / width : 0, 40 * width,
          [=, &philox](int64_t begin, int64_t end) {
            std::vector<float> scratch(drop ? span + 8 : 0);
            std::vector<float> picked(drop && !own_layout ? width : 0);
            for (int64_t r = begin; r < end; ++r) {
              const int64_t batch = r / (heads * from);
              const int64_t mask_row =
                  batch * mask_rows + (mask_rows == 1 ? 0 : r % from);
              // Element r * width + i of [B, N, F, T], as stateless_dropout
              // numbers the probabilities it draws for; or of the layout
              // that row_starts and columns give.
              const float* uniform = nullptr;
              if (drop && own_layout) {
                uniform = UniformsAt(philox, r * width, width, scratch.data());
              } else if (drop) {
                const float* spanned =
                    UniformsAt(philox, starts_data[r] + columns_data[0], span,
                               scratch.data());
                for (int64_t j = 0; j < width; ++j) {
                  picked[j] = spanned[columns_data[j] - columns_data[0]];
                }
                uniform = picked.data();
              }
              SoftmaxRow<S>(in + r * width, mask_data + mask_row * width,
                         uniform, scale, rate, keep_scale, width,
                         probs_data + r * width, out + r * width);
            }
          });
  }

 private:
  float scale_;
  float rate_;
  float keep_scale_;
};

template <typename T>
class FusedAttentionSoftmaxGradOp : public OpKernel {
 public:
  explicit FusedAttentionSoftmaxGradOp(OpKernelConstruction* context)
      : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("scale", &scale_));
    OP_REQUIRES_OK(context, context->GetAttr("keep_scale", &keep_scale_));
  }

  void Compute(OpKernelContext* context) override {
    const Tensor& dy = context->input(0);
    const Tensor& probs = context->input(1);
    OP_REQUIRES(context, dy.shape() == probs.shape() && dy.dims() == 4,
                tensorflow::errors::InvalidArgument(
                    "dy and probs must be [batch, heads, from, to] alike: ",
                    dy.shape().DebugString(), " and ",
                    probs.shape().DebugString()));
    Tensor* dx = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, dy.shape(), &dx));
    using S = typename Storage<T>::type;
    const S* upstream = Data<T>(dy);
    const float* probs_data = probs.flat<float>().data();
    S* out = Data<T>(dx);
    const int64_t width = dy.dim_size(3);
    const float scale = scale_, keep_scale = keep_scale_;
    Shard(context, width ? dy.NumElements() / width : 0, 20 * width,
          [=](int64_t begin, int64_t end) {
            for (int64_t r = begin; r < end; ++r) {
              SoftmaxGradRow<S>(upstream + r * width, probs_data + r * width,
                             scale, keep_scale, width, out + r * width);
            }
          });
  }

 private:
  float scale_;
  float keep_scale_;
};

}  // namespace

REGISTER_OP("FusedAttentionSoftmax")
    .Attr("T: {float, bfloat16}")
    .Input("scores: T")
    .Input("mask: float")
    .Input("key: uint64")
    .Input("counter: uint64")
    .Input("row_starts: int64")
    .Input("columns: int64")
    .Attr("scale: float")
    .Attr("rate: float")
    .Attr("keep_scale: float")
    .Output("probs: float")
    .Output("dropped: T")
    .SetShapeFn([](tensorflow::shape_inference::InferenceContext* c) {
      c->set_output(0, c->input(0));
      c->set_output(1, c->input(0));
      return tensorflow::OkStatus();
    });
REGISTER_OP("FusedAttentionSoftmaxGrad")
    .Attr("T: {float, bfloat16}")
    .Input("dy: T")
    .Input("probs: float")
    .Attr("scale: float")
    .Attr("keep_scale: float")
    .Output("dx: T")
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape);
REGISTER_FLOAT_AND_BFLOAT16("FusedAttentionSoftmax", FusedAttentionSoftmaxOp);
REGISTER_FLOAT_AND_BFLOAT16("FusedAttentionSoftmaxGrad",
                            FusedAttentionSoftmaxGradOp);
