"""The model run under a tf.distribute strategy: the Task interface every
task implements (task.py), the Trainer (trainer.py, the step loop) and the
step it runs (step.py), the optimizer, checkpoints, signals, precision,
losses, metrics and prediction.

`from runner_lib.core import training` gives the Trainer's names, as
`training.Trainer` and `training.TrainingConfig`.
"""

from runner_lib.core.training.distribute import is_chief
from runner_lib.core.training.step import CLIP_NORM
from runner_lib.core.training.step import clip_gradients
from runner_lib.core.training.step import TrainingConfig
from runner_lib.core.training.trainer import Trainer
from runner_lib.core.training.trainer import TrainingError
