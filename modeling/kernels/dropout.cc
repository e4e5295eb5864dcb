// Inverted dropout in one pass over memory, with exactly the masks of
// TensorFlow's stateless ops: where tf.nn.experimental.stateless_dropout
// draws a float uniform tensor (StatelessRandomUniformV2, Philox-4x32-10),
// compares it, scales and selects (four passes, and the uniform tensor
// written and read), this computes each element's uniform in registers
// from its index and drops or scales it there. The gradient is the same op
// on the upstream gradient (the mask is computed again from the same key,
// counter and indices: nothing is kept for the backward pass). Outputs and
// gradients are bit-identical to the composite's (tests/test_fused_kernels.py
// compares them with tf.random.stateless_uniform's masks), so float32
// training may use it too.
//
// Philox and the uniform floats follow TensorFlow's PhiloxRandom and
// UniformDistribution<float>: element i of the drawn tensor is lane i % 4
// of the Philox block for counter + i / 4 (a 128-bit addition), its low 23
// bits the mantissa of a float in [1, 2), minus 1.

#include <cstring>

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

constexpr uint32_t kPhiloxW32A = 0x9E3779B9;
constexpr uint32_t kPhiloxW32B = 0xBB67AE85;
constexpr uint32_t kPhiloxM4x32A = 0xD2511F53;
constexpr uint32_t kPhiloxM4x32B = 0xCD9E8D57;

// Elements per chunk whose uniforms are computed into a buffer on the
// stack (in L1) before the pass over x.
constexpr int64_t kChunk = 1024;

struct Philox {
  uint32_t key[2];
  uint32_t counter[4];
};

inline float Uint32ToFloat(uint32_t bits) {
  const uint32_t value = (127u << 23) | (bits & 0x7fffffu);
  float result;
  std::memcpy(&result, &value, sizeof(value));
  return result - 1.0f;
}

// The uniforms of blocks first .. first + blocks - 1 into out[4 * blocks].
CPU_CLONES void Uniforms(const Philox& philox, uint64_t first, int64_t blocks,
                         float* out) {
  const uint32_t c0 = philox.counter[0], c1 = philox.counter[1];
  const uint32_t c2 = philox.counter[2], c3 = philox.counter[3];
  const uint32_t key0 = philox.key[0], key1 = philox.key[1];
#pragma omp simd
  for (int64_t j = 0; j < blocks; ++j) {
    // counter + block, as PhiloxRandom::Skip adds it.
    const uint64_t block = first + static_cast<uint64_t>(j);
    const uint32_t low = static_cast<uint32_t>(block);
    uint32_t high = static_cast<uint32_t>(block >> 32);
    uint32_t x0 = c0 + low;
    high += x0 < low ? 1u : 0u;
    uint32_t x1 = c1 + high;
    const uint32_t carry = x1 < high ? 1u : 0u;
    uint32_t x2 = c2 + carry;
    uint32_t x3 = c3 + ((carry != 0u && x2 == 0u) ? 1u : 0u);
    uint32_t k0 = key0, k1 = key1;
    for (int round = 0; round < 10; ++round) {
      const uint64_t p0 = static_cast<uint64_t>(kPhiloxM4x32A) * x0;
      const uint64_t p1 = static_cast<uint64_t>(kPhiloxM4x32B) * x2;
      const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ x1 ^ k0;
      const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ x3 ^ k1;
      x1 = static_cast<uint32_t>(p1);
      x3 = static_cast<uint32_t>(p0);
      x0 = n0;
      x2 = n2;
      k0 += kPhiloxW32A;
      k1 += kPhiloxW32B;
    }
    out[4 * j] = Uint32ToFloat(x0);
    out[4 * j + 1] = Uint32ToFloat(x1);
    out[4 * j + 2] = Uint32ToFloat(x2);
    out[4 * j + 3] = Uint32ToFloat(x3);
  }
}

CPU_CLONES void Apply(const float* uniform, const float* in, float* out,
                      int64_t n, float rate, float scale) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    out[i] = uniform[i] >= rate ? in[i] * scale : 0.0f;
  }
}

// Drops in[0, n), whose elements have indices index .. index + n - 1 in
// the drawn tensor, into out.
void DropSegment(const Philox& philox, const float* in, float* out,
                 uint64_t index, int64_t n, float rate, float scale) {
  alignas(64) float uniform[kChunk + 8];
  while (n > 0) {
    const int64_t length = n < kChunk ? n : kChunk;
    const uint64_t first = index / 4;
    const int64_t skip = static_cast<int64_t>(index % 4);
    const int64_t blocks = (skip + length + 3) / 4;
    Uniforms(philox, first, blocks, uniform);
    Apply(uniform + skip, in, out, length, rate, scale);
    in += length;
    out += length;
    index += length;
    n -= length;
  }
}

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
    OP_REQUIRES(context, key.NumElements() == 1 && counter.NumElements() == 2,
                tensorflow::errors::InvalidArgument(
                    "key must have 1 element and counter 2 (Philox), not ",
                    key.NumElements(), " and ", counter.NumElements()));
    Philox philox;
    const uint64_t key_value = key.flat<tensorflow::uint64>()(0);
    philox.key[0] = static_cast<uint32_t>(key_value);
    philox.key[1] = static_cast<uint32_t>(key_value >> 32);
    for (int i = 0; i < 2; ++i) {
      const uint64_t value = counter.flat<tensorflow::uint64>()(i);
      philox.counter[2 * i] = static_cast<uint32_t>(value);
      philox.counter[2 * i + 1] = static_cast<uint32_t>(value >> 32);
    }
    Tensor* y = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, x.shape(), &y));
    const float* in = x.flat<float>().data();
    float* out = y->flat<float>().data();
    const float rate = rate_, scale = scale_;
    if (rows.NumElements() == 0 || x.NumElements() == 0) {
      // Element i of x is element i of the drawn tensor.
      Shard(context, x.NumElements(), 8,
            [&philox, in, out, rate, scale](int64_t begin, int64_t end) {
              DropSegment(philox, in + begin, out + begin, begin, end - begin,
                          rate, scale);
            });
      return;
    }
    // x holds rows of a [rows', width] tensor drawn whole: row r of x is
    // row rows[r] there.
    OP_REQUIRES(context, x.dims() == 2 && x.dim_size(0) == rows.NumElements(),
                tensorflow::errors::InvalidArgument(
                    "with rows, x must be [len(rows), width]: x is ",
                    x.shape().DebugString(), ", rows has ",
                    rows.NumElements(), " elements"));
    const int64_t width = x.dim_size(1);
    const auto row_index = rows.flat<int64_t>();
    Shard(context, x.dim_size(0), 8 * width,
          [&philox, &row_index, in, out, width, rate, scale](int64_t begin,
                                                             int64_t end) {
            for (int64_t r = begin; r < end; ++r) {
              DropSegment(philox, in + r * width, out + r * width,
                          static_cast<uint64_t>(row_index(r)) * width, width,
                          rate, scale);
            }
          });
  }

 private:
  float rate_;
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
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape);
REGISTER_KERNEL_BUILDER(Name("FusedDropout").Device(tensorflow::DEVICE_CPU),
                        FusedDropoutOp);
