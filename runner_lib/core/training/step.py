"""What one training step computes, under a tf.distribute strategy: the
loss and its gradients, clipped and averaged over replicas as the original
does, and the optimizer's update. The loop that runs the steps, saves and
stops is trainer.py's (orbit's Runner and Controller, split the same way).
"""

import dataclasses

import tensorflow as tf

import modeling
from runner_lib.core.training import optimization
from runner_lib.core.training import precision

# The original clips the global gradient norm at 1.0 before each update.
CLIP_NORM = 1.0

# Dynamic loss scaling (float16): start high, halve on overflow, double
# after this many good steps.
INITIAL_LOSS_SCALE = 2.0**15
LOSS_SCALE_PERIOD = 2000


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
  """How a Trainer trains: schedule, step loop, checkpoints and update.

  The fields are the original BERT's flags of the same names, where it has
  them (flags.py defines them for every runner).

  Attributes:
    output_dir: str, where checkpoints and summaries are written.
    learning_rate: float, the peak learning rate: reached after the warm-up,
      then decayed linearly to 0 at num_train_steps
      (optimization.learning_rate_at).
    num_train_steps: int, updates to train in all: train() stops when
      global_step reaches it.
    num_warmup_steps: int, updates over which the learning rate rises
      linearly from 0 to learning_rate.
    iterations_per_loop: int, steps per call into the graph.
    save_checkpoints_steps: int, steps between checkpoints (global_step a
      multiple of it); the last step is saved too.
    keep_checkpoint_max: int, how many of the newest checkpoints are kept.
    jit_compile: bool, compile forward and backward passes with XLA
      (--use_xla).
    gradient_accumulation_steps: int, micro-batches per update; the
      per-replica batch is split into this many.
    optimizer: "adamw" (the original), "adamw_corrected" or "lamb"
      (optimization.OPTIMIZERS).
    loss_scaling: bool, dynamic loss scaling for float16: the loss is
      scaled up before the backward pass; a step whose gradients overflow
      is skipped (global_step does not move) and the scale halved; after
      LOSS_SCALE_PERIOD good steps it doubles.
    update: how the optimizer updates a weight (optimization.UPDATES):
      "exact", the original's float32 ops; "kernel", the fused CPU kernel
      (the same numbers in one pass); "fused", TensorFlow's ApplyAdam
      (faster, rounded otherwise: for reduced-precision training only).
      precision.optimizer_update picks it for a run.
  """
  output_dir: str
  learning_rate: float
  num_train_steps: int
  num_warmup_steps: int
  iterations_per_loop: int = 1000
  save_checkpoints_steps: int = 1000
  keep_checkpoint_max: int = 5
  jit_compile: bool = False
  gradient_accumulation_steps: int = 1
  optimizer: str = "adamw"
  loss_scaling: bool = False
  update: str = "exact"


def _numbers(grad):
  """A gradient's numbers: a Tensor itself, an IndexedSlices' values."""
  return grad.values if isinstance(grad, tf.IndexedSlices) else grad


def _on_values(function, grads):
  """function on each gradient's numbers, an IndexedSlices' rows kept
  apart; None stays None."""
  def apply(grad):
    if isinstance(grad, tf.IndexedSlices):
      return tf.IndexedSlices(function(grad.values), grad.indices,
                              grad.dense_shape)
    return function(grad)
  return [None if g is None else apply(g) for g in grads]


def _add(grad, other):
  """The gradient of two micro-batches together: a sum, or for an
  IndexedSlices the rows of both (as one batch would have them)."""
  if isinstance(grad, tf.IndexedSlices):
    return tf.IndexedSlices(tf.concat([grad.values, other.values], 0),
                            tf.concat([grad.indices, other.indices], 0),
                            grad.dense_shape)
  return grad + other


def clip_gradients(grads, clip_norm=CLIP_NORM, leave_scale=False):
  """Clips as the original does, then makes every gradient dense.

  The original's word embeddings are a tf.gather (without
  use_one_hot_embeddings), so their gradient is an IndexedSlices with one
  row per position, repeated ids not summed; tf.clip_by_global_norm takes
  its norm over those rows and scales them; the optimizer's arithmetic
  then sums them into a dense [V, H]. The same here, in the same order.

  With leave_scale, the dense gradients are returned unscaled, with the
  scale each still awaits, for the optimizer to multiply as it reads them
  (optimizer.apply_gradients' grad_scales): the same numbers, one pass
  over the gradients (BERT-Base: 440 MB read and written) fewer.

  Args:
    grads: list of Tensor, IndexedSlices or None.
    clip_norm: float.
    leave_scale: bool.

  Returns:
    list of dense Tensors (None stays None); with leave_scale, a pair of
    that list and a list like it of the float32 scalar scale each gradient
    still awaits (None where it is already scaled, the IndexedSlices, or
    None).
  """
  norm = tf.linalg.global_norm(grads)
  # tf.clip_by_global_norm's scale and multiplies, op for op (NaN where
  # the norm is not finite); tests/test_training.py compares the two bit
  # for bit.
  scale = clip_norm * tf.minimum(
      1.0 / norm, tf.constant(1.0, dtype=norm.dtype) / clip_norm)
  scale = scale + (norm - norm)
  dense, scales = [], []
  for g in grads:
    if isinstance(g, tf.IndexedSlices):  # scaled row by row, then summed
      dense.append(tf.convert_to_tensor(tf.IndexedSlices(
          g.values * scale, g.indices, g.dense_shape)))
      scales.append(None)
    else:
      dense.append(g)
      scales.append(None if g is None else scale)
  if leave_scale:
    return dense, scales
  return [g if s is None else g * s for g, s in zip(dense, scales)]


def _check_all_mapped(model):
  """Refuses a model with trainable variables outside the checkpoint map.

  Raises:
    modeling.CheckpointError: naming each such variable.
  """
  unmapped = modeling.unmapped_variables(model)
  if unmapped:
    raise modeling.CheckpointError(
        "%s has %d trainable variable(s) that no checkpoint name covers; "
        "they would be trained but never saved or restored:\n  %s\nGive "
        "their head class an entry in HEAD_VARIABLES (modeling/"
        "checkpoint.py)." % (model.name, len(unmapped), "\n  ".join(unmapped)))


def first_oom_line(message):
  """The allocator's own line of an out-of-memory message ("OOM when
  allocating tensor with shape[...] ... on DEVICE"), past TensorFlow's
  "Graph execution error:" and the trace of where the op was made."""
  for line in message.splitlines():
    if line.strip().startswith("OOM"):
      return line.strip()
  return message.strip().splitlines()[0] if message.strip() else "OOM"


class TrainStep(object):
  """The model, its optimizer and the step's state; called on a
  per-replica batch under strategy.run, it makes one update.

  The loss function returns, per replica, the loss the original computes
  on its (per-core) batch; gradients are clipped as the original clips them,
  then averaged over replicas, as the original's CrossShardOptimizer does.

  Attributes:
    config: TrainingConfig.
    model: the Keras model model_fn built.
    options: the model's modeling.ComputeOptions.
    names: list of str, the original names of the trained variables.
    trainable: list of tf.Variable, those variables, in that order.
    optimizer: optimization.OPTIMIZERS[config.optimizer].
    global_step: int64 scalar tf.Variable, the updates done.
    loss_scale: float32 scalar tf.Variable, the dynamic loss scale (1.0
      without config.loss_scaling).
    good_steps: int64 scalar tf.Variable, the steps since the scale last
      changed.
  """

  def __init__(self, strategy, model_fn, loss_fn, config):
    """Builds model, optimizer slots and global_step under the strategy.

    Args:
      strategy: tf.distribute.Strategy.
      model_fn: function () -> Keras model accepted by modeling.variable_map.
      loss_fn: function (model, batch, training) -> float32 scalar loss.
      config: TrainingConfig.

    Raises:
      ValueError: config.jit_compile with a model whose options choose a
        fused CPU kernel (XLA cannot compile a custom op).
    """
    self.loss_fn = loss_fn
    self.config = config
    with strategy.scope():
      self.model = model_fn()
      self.options = self.model.bert.options
      if config.jit_compile and self.options.kernels:
        raise ValueError(
            "XLA cannot compile the fused CPU kernels %s: build the model "
            "with options without them (precision.training_options with "
            "jit_compile does)." % sorted(self.options.kernels))
      _check_all_mapped(self.model)
      # The model's trainable variables, not each variable's own flag: a
      # layer frozen with `layer.trainable = False` (a feature-based task's
      # BERT) keeps variables whose flag still says trainable.
      trainable = {id(v) for v in self.model.trainable_variables}
      weights = {name: v for name, v in modeling.variable_map(self.model).items()
                 if id(v) in trainable}
      self.names = list(weights)
      self.trainable = [weights[n] for n in self.names]
      self.optimizer = optimization.OPTIMIZERS[config.optimizer](
          weights, update=config.update)
      self.global_step = tf.Variable(
          0, dtype=tf.int64, trainable=False, name="global_step",
          aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
      self.loss_scale = tf.Variable(
          INITIAL_LOSS_SCALE if config.loss_scaling else 1.0, trainable=False,
          aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
      self.good_steps = tf.Variable(
          0, dtype=tf.int64, trainable=False,
          aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
    # AutoGraph off below the step loop (no tensor-dependent Python control
    # flow there): converting the model's and the optimizer's code costs
    # seconds of every run's start and changes no op.
    self.loss_and_grads = tf.function(self._loss_and_grads,
                                      jit_compile=config.jit_compile,
                                      autograph=False)

  def variables(self):
    """dict original name -> tf.Variable: everything a checkpoint holds
    (the model, the optimizer's slots, dropout's state, global_step and,
    with loss scaling, its state)."""
    variables = dict(modeling.variable_map(self.model))
    if self.config.loss_scaling:
      variables["loss_scale"] = self.loss_scale
      variables["loss_scale_good_steps"] = self.good_steps
    variables.update(self.optimizer.slot_variables())
    variables.update(modeling.dropout_state_variables(self.model))
    variables["global_step"] = self.global_step
    return variables

  def _loss_and_grads(self, batch):
    with tf.GradientTape() as tape:
      loss = self.loss_fn(self.model, batch, True)
      scaled_loss = (loss * self.loss_scale if self.config.loss_scaling else
                     loss)
    grads = tape.gradient(scaled_loss, self.trainable)
    if self.config.loss_scaling:
      grads = _on_values(lambda x: x / self.loss_scale, grads)
    # The word embeddings' gradient stays an IndexedSlices until clipped
    # (clip_gradients). None (a weight the loss does not use, such as the
    # pooler without NSP) stays None and its update is skipped, as the
    # original skips it.
    return loss, grads

  def __call__(self, batch):
    """One update from a per-replica batch; run it under strategy.run.

    Returns:
      float32 scalar, this replica's loss before the update.
    """
    accumulation = self.config.gradient_accumulation_steps
    if accumulation == 1:
      loss, grads = self.loss_and_grads(batch)
    else:
      micro_batches = [dict(zip(batch, parts)) for parts in zip(*[
          tf.split(v, accumulation) for v in batch.values()])]
      loss, grads = self.loss_and_grads(micro_batches[0])
      for micro in micro_batches[1:]:
        micro_loss, micro_grads = self.loss_and_grads(micro)
        loss += micro_loss
        grads = [None if g is None else _add(g, h)
                 for g, h in zip(grads, micro_grads)]
      loss /= accumulation
      grads = _on_values(lambda x: x / accumulation, grads)
    context = tf.distribute.get_replica_context()
    finite = None
    if self.config.loss_scaling:
      finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(_numbers(g)))
                              for g in grads if g is not None])
      # Skipped everywhere if any replica overflowed.
      overflows = context.all_reduce(tf.distribute.ReduceOp.SUM,
                                     1.0 - tf.cast(finite, tf.float32))
      finite = overflows == 0.0
      # Zeroed so that clipping and the all-reduce stay finite; the update
      # is skipped anyway.
      grads = _on_values(lambda x: tf.where(finite, x, tf.zeros_like(x)),
                         grads)
    if context.num_replicas_in_sync > 1:
      grads, grad_scales = clip_gradients(grads), None
      used = [i for i, g in enumerate(grads) if g is not None]
      reduced = context.all_reduce(tf.distribute.ReduceOp.MEAN,
                                   [grads[i] for i in used])
      for i, g in zip(used, reduced):
        grads[i] = g
    else:
      # Nothing between clipping and the update: the optimizer multiplies.
      grads, grad_scales = clip_gradients(grads, leave_scale=True)
    learning_rate = optimization.learning_rate_at(
        self.global_step, self.config.learning_rate,
        self.config.num_train_steps, self.config.num_warmup_steps)
    self.optimizer.apply_gradients(grads, learning_rate, self.global_step,
                                   finite, grad_scales)
    increment = 1 if finite is None else tf.cast(finite, tf.int64)
    context.merge_call(lambda strategy: strategy.extended.update(
        self.global_step, lambda v: v.assign_add(increment)))
    if finite is not None:
      context.merge_call(self._update_loss_scale, args=(finite,))
    return loss

  def _update_loss_scale(self, strategy, finite):

    def update(scale, finite, good_steps):
      good = tf.where(finite, good_steps + 1, tf.zeros_like(good_steps))
      grow = good >= LOSS_SCALE_PERIOD
      good_steps.assign(tf.where(grow, tf.zeros_like(good), good))
      return scale.assign(tf.where(
          finite, tf.where(grow, scale * 2.0, scale),
          tf.maximum(scale / 2.0, 1.0)))

    strategy.extended.update(self.loss_scale, update,
                             args=(finite, self.good_steps))

  def memory_cuts(self, micro_batch):
    """The flags not yet used that cut this step's memory, as phrases for
    an out-of-memory message; micro_batch: int, examples per replica and
    micro-batch."""
    cuts = []
    if not getattr(getattr(self.model, "bert", None),
                   "gradient_checkpointing", True):
      cuts.append("--gradient_checkpointing (recompute activations)")
    if micro_batch > 1:
      cuts.append("--gradient_accumulation_steps=%d (the same update from "
                  "smaller micro-batches)" % (
                      self.config.gradient_accumulation_steps * 2))
    if precision.computes_in_float32(self.options):
      cuts.append("--precision=bfloat16")
    cuts.append("a smaller --train_batch_size or --max_seq_length")
    return cuts
