// The gradient of the attention's y = softmax(x * scale + mask adder) over
// the last axis with respect to x, in float32 for CPUs, in one pass over
// memory, rounded bit for bit as TensorFlow's graph of it (the softmax's
// gradient, four ops, then the scale's, each a pass of its own) rounds
// it after grappler has pushed the constant scale down the product
// (dy - Sum(dy * y)) * y, pairing it with the factor it orders second,
// the greater name first: with the attribute scale_on_probs (the
// softmax's name, in the model's scope, sorts before the gradient's
// gradient_tape/..., as in a model named classifier_model)
//   dx = (dy - Sum(dy * y)) * (y * scale),
// otherwise (as in pretrainer) dx = y * ((dy - Sum(dy * y)) * scale);
// the Sum over each row in Eigen's order (eigen_sum.h). So float32
// training, whose weights must not change by a bit, can use it
// (modeling/fused_kernels.py, scaled_softmax). Compiled without
// contracting a * b + c (fused_kernels.EXACT_SOURCES).

// Only for x86-64, the build whose rounding it repeats: elsewhere the
// ops are not registered and the composite runs.
#if defined(__x86_64__)

#include <vector>

#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "common.h"
#include "eigen_sum.h"

namespace {

using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;
using bert_kernels::EigenSum;
using bert_kernels::Shard;

CPU_CLONES void Products(const float* dy, const float* y, float* out,
                         int64_t width) {
#pragma omp simd
  for (int64_t i = 0; i < width; ++i) out[i] = dy[i] * y[i];
}

template <bool kScaleOnProbs>
CPU_CLONES void RowGradient(const float* dy, const float* y, float sum,
                            float scale, float* out, int64_t width) {
#pragma omp simd
  for (int64_t i = 0; i < width; ++i) {
    out[i] = kScaleOnProbs ? (dy[i] - sum) * (y[i] * scale)
                           : y[i] * ((dy[i] - sum) * scale);
  }
}

class CompositeSoftmaxGradOp : public OpKernel {
 public:
  explicit CompositeSoftmaxGradOp(OpKernelConstruction* context)
      : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("scale", &scale_));
    OP_REQUIRES_OK(context,
                   context->GetAttr("scale_on_probs", &scale_on_probs_));
  }

  void Compute(OpKernelContext* context) override {
    const Tensor& dy = context->input(0);
    const Tensor& y = context->input(1);
    OP_REQUIRES(context, dy.shape() == y.shape() && y.dims() >= 1,
                tensorflow::errors::InvalidArgument(
                    "dy and y must be of one shape, of rank 1 or more: ",
                    dy.shape().DebugString(), " and ",
                    y.shape().DebugString()));
    Tensor* dx = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, y.shape(), &dx));
    const int64_t width = y.dim_size(y.dims() - 1);
    const int64_t rows = width == 0 ? 0 : y.NumElements() / width;
    const float* upstream = dy.flat<float>().data();
    const float* probs = y.flat<float>().data();
    float* out = dx->flat<float>().data();
    const float scale = scale_;
    const auto row_gradient =
        scale_on_probs_ ? RowGradient<true> : RowGradient<false>;
    Shard(context, rows, 6 * width, [=](int64_t begin, int64_t end) {
      std::vector<float> products(width);
      for (int64_t r = begin; r < end; ++r) {
        Products(upstream + r * width, probs + r * width, products.data(),
                 width);
        row_gradient(upstream + r * width, probs + r * width,
                    EigenSum(products.data(), width), scale,
                    out + r * width, width);
      }
    });
  }

 private:
  float scale_;
  bool scale_on_probs_;
};

}  // namespace

REGISTER_OP("CompositeSoftmaxGrad")
    .Attr("scale: float")
    .Attr("scale_on_probs: bool")
    .Input("dy: float")
    .Input("y: float")
    .Output("dx: float")
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape);
REGISTER_KERNEL_BUILDER(
    Name("CompositeSoftmaxGrad").Device(tensorflow::DEVICE_CPU),
    CompositeSoftmaxGradOp);

#endif  // defined(__x86_64__)
