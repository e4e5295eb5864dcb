// The original BERT optimizer's update (AdamWeightDecay, no bias
// correction) in one pass over each weight and its slots:
//   g = grad * grad_scale;
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
//   w -= lr * (m / (sqrt(v) + eps) + weight_decay_rate * w),
// each operation rounded to float32 in the order TensorFlow's ops compute
// it in runner_lib/core/training/optimization.py (AdamWeightDecay._step, a
// dozen ops and passes), so the weights and slots come out bit-identical
// to them (tests/test_fused_kernels.py). grad_scale is
// tf.clip_by_global_norm's scale, the same one rounding of grad * scale
// as its multiply, done here as the gradient is read instead of in a pass
// of its own (runner_lib/core/training/step.py, clip_gradients); 1 where
// the gradient comes already clipped. This file is compiled without
// -ffast-math and without contracting a * b + c into one rounding
// (modeling/fused_kernels.py, EXACT_SOURCES); sqrt and division
// vectorize as IEEE's correctly rounded instructions.
// Built by modeling/fused_kernels.py (make setup) and used by training on
// CPUs in both precisions (modeling.ComputeOptions' "adam_weight_decay").

#include <algorithm>
#include <cmath>
#include <vector>

#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/framework/resource_var.h"
#include "common.h"

namespace {

using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;
using tensorflow::Var;
using bert_kernels::Shard;

struct Coefficients {
  float beta_1, one_minus_beta_1, beta_2, one_minus_beta_2, epsilon,
      weight_decay_rate;
  bool decay;
};

CPU_CLONES void Update(float* w, float* m, float* v, const float* grad,
                       int64_t n, float lr, float scale, Coefficients c) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i] * scale;
    const float mi = c.beta_1 * m[i] + c.one_minus_beta_1 * g;
    const float vi = c.beta_2 * v[i] + c.one_minus_beta_2 * (g * g);
    float update = mi / (std::sqrt(vi) + c.epsilon);
    if (c.decay) update = update + c.weight_decay_rate * w[i];
    m[i] = mi;
    v[i] = vi;
    w[i] = w[i] - lr * update;
  }
}

tensorflow::Status CheckScalar(const Tensor& tensor, const char* name) {
  if (tensor.NumElements() == 1) return tensorflow::OkStatus();
  return tensorflow::errors::InvalidArgument(
      name, " must be a scalar, not ", tensor.shape().DebugString());
}

class FusedAdamWeightDecayOp : public OpKernel {
 public:
  explicit FusedAdamWeightDecayOp(OpKernelConstruction* context)
      : OpKernel(context) {
    float beta_1, beta_2;
    OP_REQUIRES_OK(context, context->GetAttr("beta_1", &beta_1));
    OP_REQUIRES_OK(context, context->GetAttr("one_minus_beta_1",
                                             &coefficients_.one_minus_beta_1));
    OP_REQUIRES_OK(context, context->GetAttr("beta_2", &beta_2));
    OP_REQUIRES_OK(context, context->GetAttr("one_minus_beta_2",
                                             &coefficients_.one_minus_beta_2));
    OP_REQUIRES_OK(context,
                   context->GetAttr("epsilon", &coefficients_.epsilon));
    OP_REQUIRES_OK(context, context->GetAttr(
                                "weight_decay_rate",
                                &coefficients_.weight_decay_rate));
    OP_REQUIRES_OK(context, context->GetAttr("decay", &coefficients_.decay));
    coefficients_.beta_1 = beta_1;
    coefficients_.beta_2 = beta_2;
  }

  void Compute(OpKernelContext* context) override {
    const Tensor& grad = context->input(3);
    const Tensor& lr = context->input(4);
    const Tensor& grad_scale = context->input(5);
    OP_REQUIRES_OK(context, CheckScalar(lr, "learning_rate"));
    OP_REQUIRES_OK(context, CheckScalar(grad_scale, "grad_scale"));
    tensorflow::core::RefCountPtr<Var> vars[3];
    for (int i = 0; i < 3; ++i) {
      OP_REQUIRES_OK(context,
                     tensorflow::LookupResource(
                         context, tensorflow::HandleFromInput(context, i),
                         &vars[i]));
    }
    // Each distinct variable's lock, in address order (as TensorFlow's
    // own training ops take them).
    std::vector<tsl::mutex*> mutexes;
    for (auto& var : vars) mutexes.push_back(var->mu());
    std::sort(mutexes.begin(), mutexes.end());
    mutexes.erase(std::unique(mutexes.begin(), mutexes.end()),
                  mutexes.end());
    std::vector<std::unique_ptr<tsl::mutex_lock>> locks;
    for (tsl::mutex* mu : mutexes) {
      locks.push_back(std::make_unique<tsl::mutex_lock>(*mu));
    }
    float* data[3];
    const char* names[3] = {"var", "m", "v"};
    for (int i = 0; i < 3; ++i) {
      Tensor* tensor = vars[i]->tensor();
      OP_REQUIRES(context,
                  vars[i]->is_initialized &&
                      tensor->dtype() == tensorflow::DT_FLOAT &&
                      tensor->shape() == grad.shape(),
                  tensorflow::errors::InvalidArgument(
                      names[i], " must be an initialized float32 variable "
                      "shaped as grad ", grad.shape().DebugString(), ", not ",
                      tensor->shape().DebugString()));
      // Copy on write, as TensorFlow's training ops: a buffer that a read
      // still holds is not updated in place.
      if (vars[i]->copy_on_read_mode.load() || !tensor->RefCountIsOne()) {
        Tensor copy;
        OP_REQUIRES_OK(context, context->allocate_temp(
                                    tensorflow::DT_FLOAT, tensor->shape(),
                                    &copy));
        std::copy_n(tensor->flat<float>().data(), tensor->NumElements(),
                    copy.flat<float>().data());
        *tensor = copy;
      }
      data[i] = tensor->flat<float>().data();
    }
    const float* g = grad.flat<float>().data();
    const float rate = lr.flat<float>()(0);
    const float scale = grad_scale.flat<float>()(0);
    const Coefficients c = coefficients_;
    float* w = data[0];
    float* m = data[1];
    float* v = data[2];
    Shard(context, grad.NumElements(), 30,
          [=](int64_t begin, int64_t end) {
            Update(w + begin, m + begin, v + begin, g + begin, end - begin,
                   rate, scale, c);
          });
  }

 private:
  Coefficients coefficients_;
};

}  // namespace

REGISTER_OP("FusedAdamWeightDecay")
    .Input("var: resource")
    .Input("m: resource")
    .Input("v: resource")
    .Input("grad: float")
    .Input("learning_rate: float")
    .Input("grad_scale: float")
    .Attr("beta_1: float")
    .Attr("one_minus_beta_1: float")
    .Attr("beta_2: float")
    .Attr("one_minus_beta_2: float")
    .Attr("epsilon: float")
    .Attr("weight_decay_rate: float")
    .Attr("decay: bool")
    .SetShapeFn(tensorflow::shape_inference::NoOutputs);
REGISTER_KERNEL_BUILDER(
    Name("FusedAdamWeightDecay").Device(tensorflow::DEVICE_CPU),
    FusedAdamWeightDecayOp);
