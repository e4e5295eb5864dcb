"""The SWAG task: the four-choice model over task.LabelTask."""

import modeling
from runner_lib.core.training import task
from runner_lib.swag import data
from runner_lib.swag import features


@task.register("swag")
class SwagTask(task.LabelTask):
  """Fine-tuning on SWAG: which of four endings follows the context; the
  loss, predict() outputs and eval_results (accuracy, loss) of
  task.LabelTask, over each example's NUM_CHOICES logits."""

  HEADS = (modeling.MultipleChoiceHead,)
  # Reads each choice's [CLS] position only.
  SKIP_PADDING = True

  def build_model(self, options=None):
    """BertMultipleChoice over NUM_CHOICES choices."""
    return modeling.BertMultipleChoice(self.config, data.NUM_CHOICES,
                                       options=options)

  def name_to_features(self, is_training):
    """The same records for training, evaluation and prediction."""
    del is_training
    return features.name_to_features(self.max_seq_length)
