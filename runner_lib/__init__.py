"""The runners' library: a training core and one package per task.

  core/         what every task shares (errors, inputs, records, packing,
                strategy, prediction, optimizer, checkpoints, Trainer,
                flags, the Task interface, metrics)
  pretraining/  create_pretraining_data's instances and run_pretraining's
                task
  classifier/   GLUE / XNLI readers, features and the classification task
  squad/        SQuAD reading, windowed features, the span task, answers
                and the official scores (and their TensorFlow twins for
                serving)
  swag/         SWAG's reader, four-choice records, the multiple-choice
                task
  ner/          CoNLL-2003's reader, word-piece tagging records, the
                fine-tuned and feature-based taggers, conlleval's scores
  extraction/   extract_features.py's input lines and JSON-lines output
  serving/      export_saved_model.py's modules: raw strings in, each
                task's outputs out

Imports point one way: runners -> task packages -> core -> modeling /
tokenization. The core imports no task package, and no task package
imports another, except serving, which builds on the task packages it
serves (one home for each task's rules, e.g. SQuAD's windows).
"""
