"""What every task shares; imports no task package.

Four rooms, each importing only the modules here and the rooms before it:
  errors.py, gfile.py  user-facing errors; paths local or remote
  files/     writing outputs whole (fileio), one run per output folder
             (outdir_lock)
  inputs/    text and TFRecord input: readers, packing, features, the
             input pipeline
  training/  the model run under a strategy: the Task interface every task
             implements, the Trainer and its step, optimizer, checkpoints,
             signals, precision, losses, metrics, prediction
  cli/       the runners' command line: flags, the shared runner steps,
             progress lines
"""
