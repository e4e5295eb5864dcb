"""The Task interface every runner trains and predicts through, and the
registry of tasks by name.

A task says what is specific to it; the core (input pipeline, Trainer,
prediction) does the rest. Adding a task takes a data module (files to
records), a Task subclass registered here, a head layer in
modeling/heads.py and its entry in modeling/checkpoint.py's HEAD_VARIABLES;
nothing in the core changes.
"""

import abc
import dataclasses

import tensorflow as tf

import modeling
from modeling import options as options_lib
from runner_lib.core import errors
from runner_lib.core.training import losses
from runner_lib.core.training import metrics
from runner_lib.core.training import precision

_TASKS = {}


class Task(abc.ABC):
  """One training objective on BERT: its model, records, loss and outputs.

  Methods that take a model and a batch run per replica inside a
  tf.function; a batch is a dict of Tensors parsed with
  name_to_features(...), int64 features cast to int32.

  Class attributes:
    HEADS: tuple of head layer classes (modeling.heads) this task adds to a
      pre-trained BERT. Their variables are the ones a pre-training
      checkpoint may lack (see new_variables).
    SKIP_PADDING: bool; True where no loss or output reads the encoder at
      a padding position, so that with trimmed batches the runner lets
      the encoder compute on real tokens only (BertModel.skip_padding).
      False (the default) keeps the original's values there.
  """

  HEADS = ()
  SKIP_PADDING = False

  def __init__(self, config, max_seq_length):
    """Args: config: modeling.BertConfig; max_seq_length: int, the length
    of every sequence in the records."""
    self.config = config
    self.max_seq_length = max_seq_length

  @abc.abstractmethod
  def build_model(self, options=None):
    """Returns a Keras model holding a BertModel as `.bert` and this task's
    heads, all weights created (modeling.variable_map must cover them),
    computing as options (a modeling.ComputeOptions; None: the default)
    says."""

  def model_builder(self, skip_padding, gradient_checkpointing=False,
                    options=None):
    """build_model, the encoder computing on real tokens only
    (BertModel.skip_padding) where skip_padding and SKIP_PADDING.

    Args:
      skip_padding: bool, whether the run allows it (trimmed batches, no
        XLA).
      gradient_checkpointing: bool, the encoder recomputes its layers'
        activations for the backward pass
        (BertModel.gradient_checkpointing).
      options: a modeling.ComputeOptions, or None for the default.

    Returns:
      A function of no arguments returning the model, built under the
      options' Keras dtype policy (a scope: the global one stays as it is).
    """
    options = dataclasses.replace(
        options_lib.resolve(options),
        skip_padding=skip_padding and self.SKIP_PADDING,
        gradient_checkpointing=gradient_checkpointing)

    def build_model():
      with precision.keras_policy(options.keras_policy):
        return self.build_model(options)
    return build_model

  @abc.abstractmethod
  def name_to_features(self, is_training):
    """The record schema: dict feature name -> tf.io.FixedLenFeature, for
    training records (is_training) or prediction records."""

  def sequence_features(self, is_training):
    """Features with one value per position (last axis max_seq_length):
    those a length-trimmed batch cuts (input_pipeline.trim_batch). By
    default every feature of that shape; () keeps batches full length.

    Returns:
      tuple of str.
    """
    return tuple(name for name, spec in sorted(
        self.name_to_features(is_training).items())
                 if spec.shape and spec.shape[-1] == self.max_seq_length)

  @abc.abstractmethod
  def loss(self, model, batch, training):
    """The training loss of a per-replica batch, float32 scalar (the mean
    the original computes on its per-core batch)."""

  def metrics(self, model, batch):
    """In-graph evaluation metrics of a per-replica batch.

    Returns:
      dict name -> (float32 weighted sum, float32 weight); the Trainer sums
      both over batches and replicas and reports sum / weight.
    """
    raise NotImplementedError("%s has no in-graph metrics." %
                              type(self).__name__)

  def predict(self, model, batch):
    """Per-example outputs of a per-replica prediction batch.

    Returns:
      dict name -> Tensor with the batch as leading axis.
    """
    raise NotImplementedError("%s has no predict outputs." %
                              type(self).__name__)

  def eval_results(self, outputs):
    """What eval_results.txt holds: the one evaluation hook, which every
    runner calls on what its evaluation of the dev set gave (the runner
    then writes it with runner.write_eval_results, global_step added).

    Args:
      outputs: the evaluation's outputs, as the task's runner makes them:
        predict()'s outputs over the dev set (numpy arrays, real examples
        only), metrics()'s means, or post-processed answers or tags (the
        subclass says).

    Returns:
      dict name -> float; None where there is nothing to score against
      (a test set).
    """
    raise NotImplementedError("%s has no evaluation." % type(self).__name__)

  @property
  def new_variables(self):
    """Original names of the head variables a pre-trained checkpoint may
    lack (they start from their initializers), as a tuple of str."""
    return tuple(name for head in self.HEADS
                 for name in modeling.head_variable_names(head))


class LabelTask(Task):
  """A task whose model gives each example logits [B, K] and whose records
  give it label_ids [B]: the original's loss is the mean cross-entropy,
  and evaluation reports accuracy and that loss."""

  def per_example_loss(self, logits, labels):
    """Cross-entropy of each example, float32 [B]."""
    return losses.cross_entropy(logits, labels)

  def loss(self, model, batch, training):
    """The mean of per_example_loss."""
    logits = model(batch, training=training)
    return tf.reduce_mean(self.per_example_loss(logits, batch["label_ids"]))

  def predict(self, model, batch):
    """Logits [B, K] (float32), the labels and each example's loss."""
    logits = tf.cast(model(batch, training=False), tf.float32)
    return {"logits": logits, "label_ids": batch["label_ids"],
            "per_example_loss": self.per_example_loss(logits,
                                                      batch["label_ids"])}

  def eval_results(self, outputs):
    """eval_results.txt values from predict()'s outputs over the dev set.

    Args:
      outputs: dict of numpy arrays, predict()'s keys, real examples only.

    Returns:
      dict: eval_accuracy, and eval_loss and loss (both the mean example
      loss, as the original's Estimator reports them).
    """
    loss = float(outputs["per_example_loss"].mean())
    return {"eval_accuracy": metrics.accuracy(
        outputs["label_ids"], outputs["logits"].argmax(-1)),
            "eval_loss": loss, "loss": loss}


def register(name):
  """Class decorator: makes a Task subclass known as `name`.

  Raises:
    ValueError: the name is taken by another class.
  """

  def add(task_class):
    if _TASKS.get(name, task_class) is not task_class:
      raise ValueError("Task name %r is taken by %s." %
                       (name, _TASKS[name].__name__))
    _TASKS[name] = task_class
    return task_class

  return add


def registered():
  """Names of the registered tasks (those whose packages are imported),
  sorted."""
  return sorted(_TASKS)


def get_task_class(name):
  """The Task subclass registered as `name`.

  Raises:
    errors.InputError: unknown name, listing the known ones.
  """
  if name not in _TASKS:
    raise errors.InputError("Unknown task %r. Known tasks: %s." %
                            (name, ", ".join(registered())))
  return _TASKS[name]
