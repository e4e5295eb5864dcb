"""The runners' library: a training core and one package per task.

  core/         what every task shares (errors, inputs, records, packing,
                strategy, prediction, optimizer, checkpoints, Trainer,
                flags, the Task interface, metrics)
  pretraining/  create_pretraining_data's instances and run_pretraining's
                task
  classifier/   GLUE / XNLI readers, features and the classification task
  squad/        SQuAD reading, windowed features, the span task, answers
                and the official scores

Imports point one way: runners -> task packages -> core -> modeling /
tokenization. The core imports no task package, and no task package
imports another.
"""
