// What the two residual add + LayerNorm kernels share (layer_norm.cc in
// bfloat16 training, layer_norm_float32.cc in float32): their ops'
// inputs, checked, and outputs, allocated, and the ops' registration.

#ifndef BERT_MODELING_KERNELS_LAYER_NORM_IO_H_
#define BERT_MODELING_KERNELS_LAYER_NORM_IO_H_

#include <cstdint>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "common.h"

namespace bert_kernels {

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

inline tensorflow::Status LayerNormShapes(
    tensorflow::shape_inference::InferenceContext* c) {
  c->set_output(0, c->input(0));
  c->set_output(1, c->Vector(c->UnknownDim()));
  c->set_output(2, c->Vector(c->UnknownDim()));
  return tensorflow::OkStatus();
}

inline tensorflow::Status LayerNormGradShapes(
    tensorflow::shape_inference::InferenceContext* c) {
  c->set_output(0, c->input(1));
  c->set_output(1, c->input(3));
  c->set_output(2, c->input(3));
  return tensorflow::OkStatus();
}

}  // namespace bert_kernels

// Registers the op pair NAME (forward) and NAME "Grad" with kernels
// FORWARD and BACKWARD.
#define REGISTER_ADD_LAYER_NORM(NAME, FORWARD, BACKWARD)                   \
  REGISTER_OP(NAME)                                                        \
      .Input("x: float")                                                   \
      .Input("residual: float")                                            \
      .Input("gamma: float")                                               \
      .Input("beta: float")                                                \
      .Attr("epsilon: float")                                              \
      .Output("y: float")                                                  \
      .Output("mean: float")                                               \
      .Output("rstd: float")                                               \
      .SetShapeFn(bert_kernels::LayerNormShapes);                          \
  REGISTER_OP(NAME "Grad")                                                 \
      .Input("dy: float")                                                  \
      .Input("x: float")                                                   \
      .Input("residual: float")                                            \
      .Input("gamma: float")                                               \
      .Input("mean: float")                                                \
      .Input("rstd: float")                                                \
      .Output("dx: float")                                                 \
      .Output("dgamma: float")                                             \
      .Output("dbeta: float")                                              \
      .SetShapeFn(bert_kernels::LayerNormGradShapes);                      \
  REGISTER_KERNEL_BUILDER(Name(NAME).Device(tensorflow::DEVICE_CPU),       \
                          FORWARD);                                        \
  REGISTER_KERNEL_BUILDER(Name(NAME "Grad").Device(tensorflow::DEVICE_CPU), \
                          BACKWARD)

#endif  // BERT_MODELING_KERNELS_LAYER_NORM_IO_H_
