"""The train / eval loop every runner shares, on any tf.distribute
strategy; what each step computes is step.py's."""

import signal
import time

from absl import logging
import numpy as np
import tensorflow as tf

import modeling
from runner_lib.core import errors
from runner_lib.core.training import checkpointing
from runner_lib.core.training import distribute
from runner_lib.core.training import interrupt
from runner_lib.core.training import optimization
from runner_lib.core.training import predict
from runner_lib.core.training import step as step_lib

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


class Trainer(object):
  """The step loop (step.TrainStep runs each step): trains to
  config.num_train_steps in graph calls of config.iterations_per_loop
  steps, saving checkpoints, logging and writing summaries as it goes, and
  stops in order on a signal, on any worker (interrupt.py).

  Attributes:
    config: step.TrainingConfig.
    strategy: tf.distribute.Strategy.
    chief: bool, whether this process writes checkpoints and summaries.
    train_step: step.TrainStep, to call under strategy.run on a per-replica
      batch; its model, names, trainable, global_step and loss_scale are
      the Trainer's too.
    checkpoint: checkpointing.TrainingCheckpoint on config.output_dir.
  """

  def __init__(self, strategy, model_fn, loss_fn, config):
    """Args and errors: step.TrainStep's."""
    self.strategy = strategy
    self.config = config
    self.chief = distribute.is_chief(strategy)
    self.train_step = step_lib.TrainStep(strategy, model_fn, loss_fn, config)
    self.model = self.train_step.model
    self.names = self.train_step.names
    self.trainable = self.train_step.trainable
    self.global_step = self.train_step.global_step
    self.loss_scale = self.train_step.loss_scale
    # Outside the strategy: this worker's own stop requests (interrupt.py),
    # set by the signal handler and read by the step loop every step. On
    # the host, so that the handler's assign never queues behind the
    # accelerator's work.
    with tf.device("CPU:0"):
      self._stop_requests = tf.Variable(
          tf.zeros([len(interrupt.SIGNALS)]), trainable=False,
          name="stop_requests")
    self.checkpoint = checkpointing.TrainingCheckpoint(
        config.output_dir, self.train_step.variables(),
        config.keep_checkpoint_max)
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
    micro_batch = (global_batch_size // self.strategy.num_replicas_in_sync //
                   self.config.gradient_accumulation_steps)
    latest = checkpointing.step_of(self.checkpoint.latest())
    return (
        "Out of memory training after step %d, at batch size %d (%d "
        "examples per replica and micro-batch)%s: %s. Cut memory with %s. "
        "%s" % (
            step, global_batch_size, micro_batch,
            "" if max_seq_length is None else
            " and sequence length %d" % max_seq_length,
            step_lib.first_oom_line(error.message),
            ", or ".join(self.train_step.memory_cuts(micro_batch)),
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
    """predict.evaluate_metrics on this Trainer's model and strategy."""
    return predict.evaluate_metrics(self.strategy, self.model, dataset_fn,
                                    metrics_fn, max_steps)

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
