"""The Task interface and registry, the checkpoint map keyed by head class,
and the Trainer's refusal of variables the map does not cover."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

import modeling
from runner_lib.classifier import task as classifier_task
from runner_lib.core import errors
from runner_lib.core import training
from runner_lib.core.training import task as task_lib
from runner_lib.ner import task as ner_task
from runner_lib.pretraining import task as pretraining_task
from runner_lib.squad import task as squad_task
from runner_lib.swag import task as swag_task
from tests.test_modeling import tiny_config

SEQ = 12

# How each registered task is built for these tests, and the variables it
# adds to a pre-trained BERT, by the names the original runners gave them.
TASKS = {
    "pretraining": (lambda config: pretraining_task.PretrainingTask(
        config, SEQ, 3), ()),
    "classifier": (lambda config: classifier_task.ClassificationTask(
        config, SEQ, ["a", "b", "c"]), ("output_weights", "output_bias")),
    "squad": (lambda config: squad_task.SquadTask(config, SEQ),
              ("cls/squad/output_weights", "cls/squad/output_bias")),
    "swag": (lambda config: swag_task.SwagTask(config, SEQ),
             ("cls/swag/output_weights", "cls/swag/output_bias")),
    "ner": (lambda config: ner_task.NerTask(config, SEQ, ["O", "B-X", "I-X"]),
            ("cls/ner/output_weights", "cls/ner/output_bias")),
    "ner_features": (
        lambda config: ner_task.FeatureBasedNerTask(
            config, SEQ, ["O", "B-X", "I-X"], (-1, "embeddings"),
            weighted_sum=True, lstm_units=8),
        ("cls/ner_features/layer_weights",) + tuple(
            "cls/ner_features/lstm_%d/%s/%s" % (layer, direction, weight)
            for layer in (0, 1) for direction in ("forward", "backward")
            for weight in ("kernel", "recurrent_kernel", "bias")) +
        ("cls/ner_features/output_weights", "cls/ner_features/output_bias")),
}


def test_every_task_package_registers_its_task():
  assert task_lib.registered() == sorted(TASKS)
  assert task_lib.get_task_class("squad") is squad_task.SquadTask
  with pytest.raises(errors.InputError,
                     match="Unknown task 'glue'. Known tasks: %s." %
                     ", ".join(sorted(TASKS))):
    task_lib.get_task_class("glue")


def test_a_name_is_registered_once():
  with pytest.raises(ValueError, match="'squad' is taken by SquadTask"):
    task_lib.register("squad")(classifier_task.ClassificationTask)


def test_task_is_abstract():

  class NoLoss(task_lib.Task):

    def build_model(self):
      return None

    def name_to_features(self, is_training):
      return {}

  with pytest.raises(TypeError, match="loss"):
    NoLoss(tiny_config(), SEQ)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_new_variables_are_what_a_pretrained_checkpoint_lacks(name,
                                                              tmp_path):
  make, expected_new = TASKS[name]
  config = tiny_config()
  task = make(config)
  assert isinstance(task, task_lib.get_task_class(name))
  assert task.new_variables == expected_new
  model = task.build_model()
  assert modeling.unmapped_variables(model) == []
  # A pre-training checkpoint, as Google released them, holds everything
  # else.
  prefix = modeling.save_checkpoint(modeling.BertPretrainer(config),
                                    str(tmp_path / "bert_model.ckpt"))
  result = modeling.load_checkpoint(model, prefix, allow_partial=True)
  assert result.missing == sorted(expected_new)
  for is_training in (True, False):
    schema = task.name_to_features(is_training)
    for key in ("input_ids", "input_mask", "segment_ids"):
      # [SEQ], or [choices, SEQ] for multiple choice.
      assert schema[key].shape[-1] == SEQ


class SpanModel(tf_keras.Model):
  """A BertModel with a SQuAD head under another attribute name."""

  def __init__(self, config, heads=1):
    super().__init__()
    self.bert = modeling.BertModel(config)
    self.spans = [modeling.SquadHead(config.hidden_size, name="span%d" % i)
                  for i in range(heads)]
    for head in self.spans:
      head(tf.zeros([1, 1, config.hidden_size]))


def test_heads_are_found_by_class_not_attribute():
  model = SpanModel(tiny_config())
  names = modeling.variable_map(model)
  assert names["cls/squad/output_weights"] is model.spans[0].output_weights
  assert names["cls/squad/output_bias"] is model.spans[0].output_bias
  assert list(names)[-2:] == ["cls/squad/output_weights",
                              "cls/squad/output_bias"]


def test_two_heads_of_one_class_are_refused():
  with pytest.raises(modeling.CheckpointError,
                     match="two SquadHead layers .*cls/squad/output_weights"):
    modeling.variable_map(SpanModel(tiny_config(), heads=2))


class ClassifierWithExtra(modeling.BertClassifier):
  """A task model whose extra layer has no checkpoint names."""

  def __init__(self, config):
    super().__init__(config, 2)
    self.extra = tf_keras.layers.Dense(3, name="extra")
    self.extra(tf.zeros([1, config.hidden_size]))


def test_trainer_refuses_variables_outside_the_checkpoint_map(tmp_path):
  config = tiny_config()
  assert modeling.unmapped_variables(ClassifierWithExtra(config)) == [
      "extra/kernel:0", "extra/bias:0"]
  with pytest.raises(modeling.CheckpointError) as info:
    training.Trainer(tf.distribute.get_strategy(),
                     lambda: ClassifierWithExtra(config),
                     lambda model, batch, training: 0.0,
                     training.TrainingConfig(
                         output_dir=str(tmp_path), learning_rate=1e-4,
                         num_train_steps=10, num_warmup_steps=1))
  message = str(info.value)
  assert "2 trainable variable(s) that no checkpoint name covers" in message
  assert "extra/kernel:0" in message and "extra/bias:0" in message
  assert "HEAD_VARIABLES" in message


def test_classifier_eval_results_by_hand():
  task = classifier_task.ClassificationTask(tiny_config(), SEQ, ["0", "1"],
                                            ("f1",))
  outputs = {"logits": np.array([[2.0, 1.0], [0.0, 3.0], [1.0, 5.0]]),
             "label_ids": np.array([0, 0, 1]),
             "per_example_loss": np.array([0.5, 1.0, 1.5])}
  results = task.eval_results(outputs)
  # Predictions 0, 1, 1 against labels 0, 0, 1: one false positive.
  assert results == {"eval_loss": 1.0, "loss": 1.0,
                     "eval_accuracy": pytest.approx(2 / 3),
                     "f1": pytest.approx(2 / 3)}


def test_feature_based_trainer_trains_only_the_tagger(tmp_path):
  task = ner_task.FeatureBasedNerTask(tiny_config(), SEQ, ["O", "B-X", "I-X"],
                                      (-1, -2), lstm_units=8)
  trainer = training.Trainer(
      tf.distribute.get_strategy(), task.build_model, task.loss,
      training.TrainingConfig(output_dir=str(tmp_path), learning_rate=1e-3,
                              num_train_steps=10, num_warmup_steps=0))
  # BERT is frozen (the model's trainable variables leave it out, though
  # each of its tf.Variables still says trainable=True).
  assert trainer.names and all(n.startswith("cls/ner_features/")
                               for n in trainer.names)
  assert len(trainer.names) == 14  # no layer_weights when concatenating
  rng = np.random.RandomState(0)
  batch = {"input_ids": tf.constant(rng.randint(5, 99, [2, SEQ]), tf.int32),
           "input_mask": tf.ones([2, SEQ], tf.int32),
           "segment_ids": tf.zeros([2, SEQ], tf.int32),
           "label_ids": tf.constant(rng.randint(0, 3, [2, SEQ]), tf.int32),
           "label_mask": tf.ones([2, SEQ], tf.int32)}
  bert_before = [v.numpy() for v in trainer.model.bert.weights]
  tagger_before = trainer.trainable[0].numpy()
  trainer.train_step(batch)
  for before, variable in zip(bert_before, trainer.model.bert.weights):
    np.testing.assert_array_equal(before, variable.numpy())
  assert np.abs(trainer.trainable[0].numpy() - tagger_before).max() > 0


def test_ner_loss_is_the_mean_over_labelled_pieces():
  task = ner_task.NerTask(tiny_config(), 3, ["O", "B-X", "I-X"])
  logits = tf.constant([[[0.0, 0.0, 0.0], [0.0, np.log(2.0), 0.0],
                         [9.0, 0.0, 0.0]]])
  batch = {"label_ids": tf.constant([[0, 1, 2]]),
           "label_mask": tf.constant([[1, 1, 0]])}
  # Piece 0: -log(1/3); piece 1: -log(2/4); piece 2 unlabelled.
  want = (np.log(3.0) + np.log(2.0)) / 2
  got = task.loss(lambda inputs, training: logits, batch, True)
  np.testing.assert_allclose(float(got), want, rtol=1e-6)
