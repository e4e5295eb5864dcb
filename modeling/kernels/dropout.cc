// Inverted dropout in one pass over memory, with exactly the masks of
// TensorFlow's stateless ops: where tf.nn.experimental.stateless_dropout
// draws a float uniform tensor (StatelessRandomUniformV2, Philox-4x32-10),
// compares it, scales and selects (four passes, and the uniform tensor
// written and read), this computes each element's uniform in registers
// from its index and drops or scales it there. It also writes which
// elements it kept, one bit each (1/32 of x's size), for the gradient
// (FusedDropoutGrad): the upstream gradient scaled where kept, without
// computing the uniforms again. Outputs and gradients are bit-identical
// to the composite's (tests/test_fused_kernels.py compares them with
// tf.random.stateless_uniform's masks).
// (The uniforms: philox.h.)

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
using bert_kernels::Philox;
using bert_kernels::ReadPhilox;
using bert_kernels::Shard;
using bert_kernels::UniformsAt;

// Elements per chunk whose uniforms are computed into a buffer on the
// stack (in L1) before the pass over x.
constexpr int64_t kChunk = 1024;

// Elements per word of the kept mask a shard starts at: shards never
// share a byte of it.
constexpr int64_t kWord = 64;

CPU_CLONES void Apply(const float* uniform, const float* in, float* out,
                      int64_t n, float rate, float scale) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    out[i] = uniform[i] >= rate ? in[i] * scale : 0.0f;
  }
}

// Sets bit (position + i) % 8 of byte (position + i) / 8 of keep where
// uniform[i] >= rate, for i in [0, n); keep's bytes there start zeroed.
CPU_CLONES void SetKeptBits(const float* uniform, int64_t n, float rate,
                            int64_t position, uint8_t* keep) {
  int64_t i = 0;
  for (; i < n && (position + i) % 8 != 0; ++i) {
    keep[(position + i) / 8] |= (uniform[i] >= rate ? 1 : 0)
                                << ((position + i) % 8);
  }
  uint8_t* bytes = keep + (position + i) / 8;
  const int64_t whole = (n - i) / 8;
#pragma omp simd
  for (int64_t b = 0; b < whole; ++b) {
    const float* u = uniform + i + 8 * b;
    bytes[b] = static_cast<uint8_t>(
        (u[0] >= rate) | (u[1] >= rate) << 1 | (u[2] >= rate) << 2 |
        (u[3] >= rate) << 3 | (u[4] >= rate) << 4 | (u[5] >= rate) << 5 |
        (u[6] >= rate) << 6 | (u[7] >= rate) << 7);
  }
  for (i += 8 * whole; i < n; ++i) {
    keep[(position + i) / 8] |= (uniform[i] >= rate ? 1 : 0)
                                << ((position + i) % 8);
  }
}

// Drops in[0, n), elements position .. position + n - 1 of x whose
// indices in the drawn tensor are index .. index + n - 1, into out, and
// marks the kept ones in keep.
void DropSegment(const Philox& philox, const float* in, float* out,
                 uint64_t index, int64_t position, int64_t n, float rate,
                 float scale, uint8_t* keep) {
  alignas(64) float scratch[kChunk + 8];
  while (n > 0) {
    const int64_t length = n < kChunk ? n : kChunk;
    const float* uniform = UniformsAt(philox, index, length, scratch);
    Apply(uniform, in, out, length, rate, scale);
    SetKeptBits(uniform, length, rate, position, keep);
    in += length;
    out += length;
    index += length;
    position += length;
    n -= length;
  }
}

// dx = dy * scale where kept, 0 where dropped, for the elements of keep's
// bytes [begin, end) (of n elements in all).
CPU_CLONES void ApplyKept(const float* dy, const uint8_t* keep, float* dx,
                          int64_t begin, int64_t end, int64_t n,
                          float scale) {
  const int64_t whole = std::min(end, n / 8);
  for (int64_t b = begin; b < whole; ++b) {
    const uint32_t bits = keep[b];
    const float* in = dy + 8 * b;
    float* out = dx + 8 * b;
#pragma omp simd
    for (int j = 0; j < 8; ++j) {
      out[j] = (bits >> j) & 1u ? in[j] * scale : 0.0f;
    }
  }
  for (int64_t i = 8 * std::max(begin, whole); i < std::min(8 * end, n);
       ++i) {
    dx[i] = (keep[i / 8] >> (i % 8)) & 1 ? dy[i] * scale : 0.0f;
  }
}

// The kept mask's bytes for n elements.
int64_t KeepBytes(int64_t n) { return (n + 7) / 8; }

class FusedDropoutOp : public OpKernel {
 public:
  explicit FusedDropoutOp(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("rate", &rate_));
    OP_REQUIRES_OK(context, context->GetAttr("scale", &scale_));
  }

  void Compute(OpKernelContext* context) override {
    const Tensor& x = context->input(0);
    const Tensor& key = context->input(1);
    const Tensor& counter = context->input(2);
    const Tensor& rows = context->input(3);
    Philox philox;
    OP_REQUIRES_OK(context, ReadPhilox(key, counter, &philox));
    const bool gathered = rows.NumElements() != 0 && x.NumElements() != 0;
    // x holds rows of a [rows', width] tensor drawn whole: row r of x is
    // row rows[r] there. Otherwise element i of x is element i of the
    // drawn tensor.
    OP_REQUIRES(context,
                !gathered ||
                    (x.dims() == 2 && x.dim_size(0) == rows.NumElements()),
                tensorflow::errors::InvalidArgument(
                    "with rows, x must be [len(rows), width]: x is ",
                    x.shape().DebugString(), ", rows has ",
                    rows.NumElements(), " elements"));
    Tensor* y = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, x.shape(), &y));
    const int64_t n = x.NumElements();
    Tensor* kept = nullptr;
    OP_REQUIRES_OK(context,
                   context->allocate_output(
                       1, tensorflow::TensorShape({KeepBytes(n)}), &kept));
    const float* in = x.flat<float>().data();
    float* out = y->flat<float>().data();
    uint8_t* keep = kept->flat<uint8_t>().data();
    const float rate = rate_, scale = scale_;
    const int64_t width = gathered ? x.dim_size(1) : n;
    const int64_t* row_index =
        gathered ? rows.flat<int64_t>().data() : nullptr;
    // Shards of whole words of the mask; each runs over its elements in
    // segments that end where x's rows do.
    Shard(context, (n + kWord - 1) / kWord, 8 * kWord,
          [=, &philox](int64_t begin, int64_t end) {
            const int64_t first = begin * kWord;
            const int64_t last = std::min(end * kWord, n);
            std::fill(keep + first / 8, keep + KeepBytes(last), 0);
            for (int64_t e = first; e < last;) {
              const int64_t r = e / width, column = e % width;
              const int64_t length = std::min(width - column, last - e);
              const uint64_t index =
                  gathered ? static_cast<uint64_t>(row_index[r]) * width +
                                 column
                           : static_cast<uint64_t>(e);
              DropSegment(philox, in + e, out + e, index, e, length, rate,
                          scale, keep);
              e += length;
            }
          });
  }

 private:
  float rate_;
  float scale_;
};

class FusedDropoutGradOp : public OpKernel {
 public:
  explicit FusedDropoutGradOp(OpKernelConstruction* context)
      : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("scale", &scale_));
  }

  void Compute(OpKernelContext* context) override {
    const Tensor& dy = context->input(0);
    const Tensor& kept = context->input(1);
    const int64_t n = dy.NumElements();
    OP_REQUIRES(context, kept.NumElements() == KeepBytes(n),
                tensorflow::errors::InvalidArgument(
                    "keep must have (size of dy + 7) / 8 = ", KeepBytes(n),
                    " bytes (FusedDropout's second output), not ",
                    kept.NumElements()));
    Tensor* dx = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, dy.shape(), &dx));
    const float* in = dy.flat<float>().data();
    const uint8_t* keep = kept.flat<uint8_t>().data();
    float* out = dx->flat<float>().data();
    const float scale = scale_;
    Shard(context, KeepBytes(n), 16, [=](int64_t begin, int64_t end) {
      ApplyKept(in, keep, out, begin, end, n, scale);
    });
  }

 private:
  float scale_;
};

}  // namespace

REGISTER_OP("FusedDropout")
    .Input("x: float")
    .Input("key: uint64")
    .Input("counter: uint64")
    .Input("rows: int64")
    .Attr("rate: float")
    .Attr("scale: float")
    .Output("y: float")
    .Output("keep: uint8")
    .SetShapeFn([](tensorflow::shape_inference::InferenceContext* c) {
      c->set_output(0, c->input(0));
      c->set_output(1, c->Vector(c->UnknownDim()));
      return tensorflow::OkStatus();
    });
REGISTER_KERNEL_BUILDER(Name("FusedDropout").Device(tensorflow::DEVICE_CPU),
                        FusedDropoutOp);

REGISTER_OP("FusedDropoutGrad")
    .Input("dy: float")
    .Input("keep: uint8")
    .Attr("scale: float")
    .Output("dx: float")
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape);
REGISTER_KERNEL_BUILDER(
    Name("FusedDropoutGrad").Device(tensorflow::DEVICE_CPU),
    FusedDropoutGradOp);
