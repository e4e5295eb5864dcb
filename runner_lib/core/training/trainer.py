"""The train / eval loop every runner shares, on any tf.distribute strategy."""

import dataclasses
import signal
import time

from absl import logging
import numpy as np
import tensorflow as tf

import modeling
from runner_lib.core import errors
from runner_lib.core.training import checkpointing
from runner_lib.core.training import interrupt
from runner_lib.core.training import optimization
from runner_lib.core.training import precision

# The original clips the global gradient norm at 1.0 before each update.
CLIP_NORM = 1.0

# Dynamic loss scaling (float16): start high, halve on overflow, double
# after this many good steps.
INITIAL_LOSS_SCALE = 2.0**15
LOSS_SCALE_PERIOD = 2000


# A stop request (interrupt.py) ends the step loop a step or two after it
# arrives. A graph call that goes on this many seconds plus STOP_STEPS
# times the slowest step seen after the request is given up (its steps
# may wait for a worker that is gone), with an error instead of a hang;
# before a step has been timed (the first call also traces and optimizes
# the graph), STOP_SECONDS_UNTIMED.
STOP_SECONDS = 120
STOP_STEPS = 5
STOP_SECONDS_UNTIMED = 600


class TrainingError(errors.InputError):
  """Training cannot go on (e.g. the loss is no longer finite)."""


class OutOfMemoryError(TrainingError):
  """A training step needed more memory than the device has."""


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


def _first_oom_line(message):
  """The allocator's own line of an out-of-memory message ("OOM when
  allocating tensor with shape[...] ... on DEVICE"), past TensorFlow's
  "Graph execution error:" and the trace of where the op was made."""
  for line in message.splitlines():
    if line.strip().startswith("OOM"):
      return line.strip()
  return message.strip().splitlines()[0] if message.strip() else "OOM"


def is_chief(strategy):
  """Whether this process writes checkpoints and summaries."""
  resolver = getattr(strategy, "cluster_resolver", None)
  if resolver is None or not resolver.task_type:
    return True
  if resolver.task_type == "chief":
    return True
  has_chief = "chief" in (resolver.cluster_spec().as_dict() or {})
  return resolver.task_type == "worker" and resolver.task_id == 0 and (
      not has_chief)


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
    fused_update: bool, the optimizer's fused kernel where it has one
      (optimization.AdamWeightDecay's `fused`): faster, not the original's
      float32 rounding, so for reduced-precision training only. Where
      the model's options choose the CPU kernel "adam_weight_decay",
      AdamWeightDecay uses that exact one instead.
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
  fused_update: bool = False


class Trainer(object):
  """Holds a model, the original optimizer and their checkpoints.

  The loss function returns, per replica, the loss the original computes
  on its (per-core) batch; gradients are clipped as the original clips them,
  then averaged over replicas, as the original's CrossShardOptimizer does.

  Attributes:
    config: TrainingConfig.
    strategy: tf.distribute.Strategy.
    chief: bool, whether this process writes checkpoints and summaries.
    model: the Keras model model_fn built.
    names: list of str, the original names of the trained variables.
    trainable: list of tf.Variable, those variables, in that order.
    optimizer: optimization.OPTIMIZERS[config.optimizer].
    global_step: int64 scalar tf.Variable, the updates done.
    loss_scale: float32 scalar tf.Variable, the dynamic loss scale (1.0
      without config.loss_scaling).
    checkpoint: checkpointing.TrainingCheckpoint on config.output_dir.
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
    self.strategy = strategy
    self.loss_fn = loss_fn
    self.config = config
    self.chief = is_chief(strategy)
    with strategy.scope():
      self.model = model_fn()
      self.options = self.model.bert.options
      if config.jit_compile and self.options.kernels:
        raise ValueError(
            "XLA cannot compile the fused CPU kernels %s: build the model "
            "with options without them (precision.set_policy with "
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
          weights, fused=config.fused_update,
          fused_kernel=self.options.uses("adam_weight_decay"))
      self.global_step = tf.Variable(
          0, dtype=tf.int64, trainable=False, name="global_step",
          aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
      self.loss_scale = tf.Variable(
          INITIAL_LOSS_SCALE if config.loss_scaling else 1.0, trainable=False,
          aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
      self.good_steps = tf.Variable(
          0, dtype=tf.int64, trainable=False,
          aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
    # Outside the strategy: this worker's own stop requests (interrupt.py),
    # set by the signal handler and read by the step loop every step. On
    # the host, so that the handler's assign never queues behind the
    # accelerator's work.
    with tf.device("CPU:0"):
      self._stop_requests = tf.Variable(
          tf.zeros([len(interrupt.SIGNALS)]), trainable=False,
          name="stop_requests")
    variables = dict(modeling.variable_map(self.model))
    if config.loss_scaling:
      variables["loss_scale"] = self.loss_scale
      variables["loss_scale_good_steps"] = self.good_steps
    variables.update(self.optimizer.slot_variables())
    variables.update(modeling.dropout_state_variables(self.model))
    variables["global_step"] = self.global_step
    self.checkpoint = checkpointing.TrainingCheckpoint(
        config.output_dir, variables, config.keep_checkpoint_max)
    # AutoGraph off below the step loop (no tensor-dependent Python control
    # flow there): converting the model's and the optimizer's code costs
    # seconds of every run's start and changes no op.
    self._compute = tf.function(self._loss_and_grads,
                                jit_compile=config.jit_compile,
                                autograph=False)
    self._summary_writer = None

  @property
  def step(self):
    return int(self.global_step.numpy())

  def initialize(self, init_checkpoint=None, new_variables=()):
    """Resumes from output_dir's newest intact checkpoint, else loads
    init_checkpoint.

    Args:
      init_checkpoint: str or None.
      new_variables: original names init_checkpoint may lack (a task layer
        added for fine-tuning); any other missing variable is an error.

    Returns:
      int, the global step training starts from.

    Raises:
      modeling.CheckpointError: see modeling.load_checkpoint; or output_dir
        holds checkpoints but none can be read (never a silent restart).
    """
    latest = self.checkpoint.restore_latest()
    if latest:
      logging.info("Resuming from %s at step %d", latest, self.step)
    elif init_checkpoint:
      result = modeling.load_checkpoint(self.model, init_checkpoint,
                                        allow_partial=bool(new_variables))
      unexpected = sorted(set(result.missing) - set(new_variables))
      if unexpected:
        raise modeling.CheckpointError(
            "Checkpoint %s lacks %d variable(s):\n  %s" %
            (init_checkpoint, len(unexpected), "\n  ".join(unexpected)))
    return self.step

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

  def train_step(self, batch):
    """One update from a per-replica batch; run it under strategy.run.

    Returns:
      float32 scalar, this replica's loss before the update.
    """
    accumulation = self.config.gradient_accumulation_steps
    if accumulation == 1:
      loss, grads = self._compute(batch)
    else:
      micro_batches = [dict(zip(batch, parts)) for parts in zip(*[
          tf.split(v, accumulation) for v in batch.values()])]
      loss, grads = self._compute(micro_batches[0])
      for micro in micro_batches[1:]:
        micro_loss, micro_grads = self._compute(micro)
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

  def _train_step_and_requests(self, batch, requests):
    """train_step, whose loss carries this worker's stop requests along.

    Args:
      batch: per-replica batch.
      requests: float32 [len(interrupt.SIGNALS)], interrupt.one_hot of the
        signal this worker got, or zeros.

    Returns:
      float32 [1 + len(interrupt.SIGNALS)]: the loss, then requests.
    """
    return tf.concat([[self.train_step(batch)], requests], 0)

  def _request_stop(self, signum):
    """Asks the step loop to stop (train_steps, _train_steps_fn); a signal
    handler's callback."""
    self._stop_requests.assign(interrupt.one_hot(signum))

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

  def train(self, dataset_fn, global_batch_size, max_seq_length=None):
    """Trains from the current step to config.num_train_steps, saving as it
    goes.

    Args:
      dataset_fn: function (tf.distribute.InputContext, step) -> dataset of
        per-replica batches, resumed after `step` updates.
      global_batch_size: int, examples per update over all replicas.
      max_seq_length: int or None, the batches' (longest) sequence
        length, for the out-of-memory message.

    Raises:
      TrainingError: the loss became NaN or infinite (nothing is saved).
      OutOfMemoryError: a step ran out of device memory; its message says
        which flags cut memory (nothing is saved; the checkpoints already
        in output_dir stay).
      errors.Interrupted: SIGINT or SIGTERM arrived, on this worker or on
        another one; every worker stopped after the same step, which the
        chief saved (interrupt.py).
    """
    start_step = self.step
    if start_step >= self.config.num_train_steps:
      logging.info("Already at step %d of %d; nothing to train.", start_step,
                   self.config.num_train_steps)
      return
    iterator = self._distributed_iterator(dataset_fn, start_step)
    self._stop_requests.assign(tf.zeros_like(self._stop_requests))
    train_steps = self._train_steps_fn()
    with interrupt.StopRequests(self._request_stop,
                                STOP_SECONDS_UNTIMED) as stop:
      step, slowest_step = start_step, 0.0
      while step < self.config.num_train_steps:
        means, done, elapsed = self._run_steps(
            stop, train_steps, iterator, step, global_batch_size,
            max_seq_length)
        # The first call's time holds the tracing: only later ones say
        # how long a step takes.
        if step > start_step:
          slowest_step = max(slowest_step, elapsed / max(done, 1))
          stop.stop_timeout = STOP_SECONDS + STOP_STEPS * slowest_step
        step, signum = self._check_log_and_save(means, done, elapsed,
                                                global_batch_size)
        if signum:
          raise self._interrupted(signum, stop.signum)
      self._agree_on_late_requests(stop, step)

  def _distributed_iterator(self, dataset_fn, start_step):
    """An iterator over dataset_fn's batches on every replica.

    Args:
      dataset_fn: as train's.
      start_step: int, the updates done before, which the dataset skips.

    Returns:
      tf.distribute.DistributedIterator of per-replica batches.
    """
    dataset = self.strategy.distribute_datasets_from_function(
        lambda context: dataset_fn(context, start_step))
    return iter(dataset)

  def _train_steps_fn(self):
    """The step loop: one graph call of up to `steps` steps, which ends a
    step after the workers agree on a stop request.

    Returns:
      tf.function (iterator, int32 scalar steps) -> (means, done): means,
      float32 [1 + len(interrupt.SIGNALS)], the last step's loss and stop
      request flags, each a mean over all replicas; done, int32 scalar, the
      steps it ran.
    """
    mean = tf.distribute.ReduceOp.MEAN

    # Each step reads this worker's stop requests as it starts, and they
    # ride on the loss's mean over replicas, the collective every step runs
    # anyway: under MultiWorkerMirroredStrategy each worker's one-hot flags
    # are averaged with the others', so all see a flag > 0 after the same
    # step and stop there together, at no extra round trip (no measurable
    # cost per step). Chosen over TensorFlow's PreemptionCheckpointHandler,
    # which agrees through the coordination service but only between its
    # run() calls, i.e. graph calls: with --iterations_per_loop steps per
    # call it would act no sooner than this loop did before, and one step
    # per call costs a call's overhead every step. It also saves through a
    # CheckpointManager of object-based checkpoints, where ours are the
    # original's name-based model.ckpt-N, and watches SIGTERM only.
    # An explicit tf.while_loop, AutoGraph off: converting the loop cost
    # about 0.3 s of every run's start (the step below it is not converted
    # either way).
    @tf.function(autograph=False)
    def train_steps(iterator, steps):

      def more(done, means, agreed):
        del means  # The step's own flags act one step later (below).
        return tf.logical_and(done < steps, tf.logical_not(agreed))

      def step(done, means, agreed):
        # The previous step's agreement, not this one's: the loop's
        # condition is evaluated on the host, which would otherwise wait
        # for this step's loss before it dispatched the next step (on a
        # GPU or TPU, a gap in the accelerator's work every step). So a
        # request read by step k stops the loop after step k + 1; the host
        # may have dispatched (and read for) a step or two ahead of the
        # accelerator. A flag once set stays set, so the last step's means
        # say why the loop stopped.
        agreed = tf.reduce_max(means[1:]) > 0
        per_replica = self.strategy.run(
            self._train_step_and_requests,
            args=(next(iterator), self._stop_requests.read_value()))
        return (done + 1, self.strategy.reduce(mean, per_replica, axis=None),
                agreed)

      # means: [loss, one flag per interrupt.SIGNALS], means over all
      # replicas; agreed: whether the means before the last step held a
      # flag.
      done, means, _ = tf.while_loop(
          more, step, (tf.constant(0), tf.zeros([1 + len(interrupt.SIGNALS)]),
                       tf.constant(False)))
      return means, done

    return train_steps

  def _run_steps(self, stop, train_steps, iterator, step, global_batch_size,
                 max_seq_length):
    """One call of the step loop, timed: up to config.iterations_per_loop
    steps, no further than the next checkpoint or config.num_train_steps.

    Args:
      stop: interrupt.StopRequests, which makes the call.
      train_steps: the step loop (_train_steps_fn).
      iterator: its batches (_distributed_iterator).
      step: int, the steps done before the call.
      global_batch_size: int, as train's.
      max_seq_length: int or None, as train's.

    Returns:
      (means, done, elapsed): numpy float32 [1 + len(interrupt.SIGNALS)],
      train_steps' means; int, the steps done; float, the call's seconds.

    Raises:
      OutOfMemoryError: see train.
      TrainingError or errors.Interrupted: the call outlived its bound
        (_unstoppable).
    """
    to_save = (self.config.save_checkpoints_steps -
               step % self.config.save_checkpoints_steps)
    steps = min(self.config.iterations_per_loop, to_save,
                self.config.num_train_steps - step)
    started = time.time()
    try:
      means, done = stop.run(train_steps, iterator, tf.constant(steps))
    except tf.errors.ResourceExhaustedError as e:
      raise OutOfMemoryError(self._out_of_memory(
          e, step, global_batch_size, max_seq_length)) from None
    except interrupt.StopTimeout as e:
      raise self._unstoppable(e, step) from None
    elapsed = time.time() - started
    return means.numpy(), int(done), elapsed

  def _check_log_and_save(self, means, done, elapsed, global_batch_size):
    """After a call of the step loop: checks its loss, logs it and writes
    its summaries, and saves at a checkpoint step, the last step or a stop.

    Args:
      means: numpy float32 [1 + len(interrupt.SIGNALS)], the call's means
        (_run_steps).
      done: int, the steps it ran.
      elapsed: float, its seconds.
      global_batch_size: int, as train's.

    Returns:
      (step, signum): int, global_step now; the signal every worker agreed
      to stop for (interrupt.agreed_signal), or None.

    Raises:
      TrainingError: the loss is NaN or infinite.
    """
    loss = float(means[0])
    signum = interrupt.agreed_signal(means[1:])
    step = self.step
    if not np.isfinite(loss):
      raise TrainingError(
          "Loss is %s at step %d: training stopped, nothing saved since "
          "step %d. Try a lower --learning_rate." %
          (loss, step, checkpointing.step_of(self.checkpoint.latest()) or 0))
    learning_rate = float(optimization.learning_rate_at(
        step - 1, self.config.learning_rate, self.config.num_train_steps,
        self.config.num_warmup_steps))
    examples_per_second = done * global_batch_size / elapsed
    logging.info("step %d/%d loss %.4f lr %.3g %.1f examples/s", step,
                 self.config.num_train_steps, loss, learning_rate,
                 examples_per_second)
    self._summaries(step, loss=loss, learning_rate=learning_rate,
                    examples_per_second=examples_per_second)
    if step % self.config.save_checkpoints_steps == 0 or (
        step == self.config.num_train_steps) or signum:
      self.save()
    return step, signum

  def _agree_on_late_requests(self, stop, step):
    """After the step loop's last call: stops if a worker asked to since
    its last step read the requests.

    Args:
      stop: interrupt.StopRequests, which makes the call.
      step: int, the last step done.

    Raises:
      errors.Interrupted: the workers agree on a stop request.
      TrainingError or errors.Interrupted: the agreement outlived its bound
        (_unstoppable).
    """
    mean = tf.distribute.ReduceOp.MEAN

    # A request made after the last step read it (during that step or the
    # last save), agreed on the same way.
    @tf.function(autograph=False)
    def agreed_requests():
      return self.strategy.reduce(mean, self.strategy.run(
          tf.identity, args=(self._stop_requests.read_value(),)), axis=None)

    try:
      signum = interrupt.agreed_signal(stop.run(
          agreed_requests, timeout=stop.stop_timeout).numpy())
    except interrupt.StopTimeout as e:
      raise self._unstoppable(e, step) from None
    if signum:
      raise self._interrupted(signum, stop.signum)

  def _unstoppable(self, timeout, step):
    """The error for a graph call that outlived its bound: errors.Interrupted
    with the signal's exit code after a stop request (so that a scheduler
    reruns the job), else TrainingError.

    Args:
      timeout: interrupt.StopTimeout.
      step: int, the last step known done (global_step is not read: the
        call that did not return may still hold it).
    """
    latest = checkpointing.step_of(self.checkpoint.latest())
    saved = ("Nothing saved since model.ckpt-%d" % latest if latest else
             "No checkpoint saved")
    if timeout.signum is None:
      return TrainingError(
          "Training after step %d of %d could not finish: %s Are all "
          "workers still running? %s." % (step, self.config.num_train_steps,
                                          timeout, saved))
    return errors.Interrupted(
        "%s after step %d of %d, but training did not stop: %s %s. Run the "
        "same command again to resume." % (
            signal.Signals(timeout.signum).name, step,
            self.config.num_train_steps, timeout, saved), timeout.signum)

  def _out_of_memory(self, error, step, global_batch_size, max_seq_length):
    """The one-line message for a step that ran out of memory: what
    failed, and the flags not yet used that cut a step's memory.

    Args:
      error: the tf.errors.ResourceExhaustedError.
      step: int, the last step done before the graph call that failed
        (global_step itself may have moved in the failed call).
      global_batch_size: int.
      max_seq_length: int or None.

    Returns:
      str.
    """
    replicas = self.strategy.num_replicas_in_sync
    accumulation = self.config.gradient_accumulation_steps
    micro_batch = global_batch_size // replicas // accumulation
    cuts = []
    if not getattr(getattr(self.model, "bert", None),
                   "gradient_checkpointing", True):
      cuts.append("--gradient_checkpointing (recompute activations)")
    if micro_batch > 1:
      cuts.append("--gradient_accumulation_steps=%d (the same update from "
                  "smaller micro-batches)" % (accumulation * 2))
    if precision.computes_in_float32(self.options):
      cuts.append("--precision=bfloat16")
    cuts.append("a smaller --train_batch_size or --max_seq_length")
    latest = checkpointing.step_of(self.checkpoint.latest())
    return (
        "Out of memory training after step %d, at batch size %d (%d "
        "examples per replica and micro-batch)%s: %s. Cut memory with %s. "
        "%s" % (
            step, global_batch_size, micro_batch,
            "" if max_seq_length is None else
            " and sequence length %d" % max_seq_length,
            _first_oom_line(error.message), ", or ".join(cuts),
            "Nothing saved since model.ckpt-%d, which is kept." % latest
            if latest else "No checkpoint was saved."))

  def _interrupted(self, signum, own_signum):
    """errors.Interrupted for a stop at the current (saved) step.

    Args:
      signum: the signal all workers stopped for (interrupt.agreed_signal).
      own_signum: the signal this worker got, or None.

    Returns:
      errors.Interrupted, whose exit code is signum's.
    """
    return errors.Interrupted(
        "%s%s at step %d of %d; %s. Run the same command again to resume." %
        (signal.Signals(signum).name,
         "" if own_signum == signum else " to another worker", self.step,
         self.config.num_train_steps,
         "saved model.ckpt-%d" % self.step if self.chief else
         "the chief saves the checkpoint"), signum)

  def save(self):
    if self.chief:
      self.checkpoint.save(self.step)

  def evaluate(self, dataset_fn, metrics_fn, max_steps):
    """Runs metrics over up to max_steps batches.

    Args:
      dataset_fn: function (tf.distribute.InputContext) -> dataset of
        per-replica batches.
      metrics_fn: function (model, batch) -> dict name -> (weighted sum,
        weight), per replica.
      max_steps: int.

    Returns:
      dict name -> float, each sum over weight across all batches.
    """
    dataset = self.strategy.distribute_datasets_from_function(dataset_fn)

    @tf.function(autograph=False)
    def eval_step(batch):
      per_replica = self.strategy.run(
          lambda b: metrics_fn(self.model, b), args=(batch,))
      return self.strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica,
                                  axis=None)

    totals = {}
    for index, batch in enumerate(dataset):
      if index >= max_steps:
        break
      for name, (value, weight) in eval_step(batch).items():
        total = totals.setdefault(name, [0.0, 0.0])
        total[0] += float(value)
        total[1] += float(weight)
    return {name: value / weight if weight else 0.0
            for name, (value, weight) in totals.items()}

  def _summaries(self, step, **values):
    if not self.chief:
      return
    if self._summary_writer is None:
      self._summary_writer = tf.summary.create_file_writer(
          self.config.output_dir)
    with self._summary_writer.as_default():
      for name, value in values.items():
        tf.summary.scalar(name, value, step=step)
    self._summary_writer.flush()
