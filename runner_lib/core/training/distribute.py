"""tf.distribute strategy from the original's TPU flags and --strategy."""

import json
import os

from absl import logging
import tensorflow as tf

from runner_lib.core import errors


def check_tpu_flags(use_tpu, tpu_name, tpu_zone, gcp_project, master):
  """Rejects TPU address flags given without --use_tpu.

  Raises:
    errors.InputError: naming the flag.
  """
  if use_tpu:
    if tpu_name and master and tpu_name != master:
      raise errors.InputError(
          "--tpu_name=%s and --master=%s name different TPUs; give one." %
          (tpu_name, master))
    return
  for name, value in (("tpu_name", tpu_name), ("tpu_zone", tpu_zone),
                      ("gcp_project", gcp_project), ("master", master)):
    if value:
      raise errors.InputError(
          "--%s=%s is only used with --use_tpu; add --use_tpu or drop it." %
          (name, value))


STRATEGIES = ("auto", "default", "mirrored", "multi_worker_mirrored")


def get_strategy(use_tpu=False, tpu_name=None, tpu_zone=None,
                 gcp_project=None, master=None, num_tpu_cores=None,
                 strategy="default"):
  """Builds the tf.distribute strategy the flags ask for.

  Args:
    use_tpu: bool; a TPUStrategy. Otherwise `strategy` decides.
    tpu_name: str, TPU name or grpc:// address.
    tpu_zone: str, GCE zone.
    gcp_project: str, GCP project.
    master: str, the original's name for the TPU address.
    num_tpu_cores: int or None; if given, must equal the replicas found.
    strategy: one of STRATEGIES: "default" (one CPU or GPU), "mirrored"
      (all local GPUs), "multi_worker_mirrored" (the cluster in TF_CONFIG),
      "auto" (multi-worker if TF_CONFIG names several tasks, mirrored with
      several GPUs, else default).

  Returns:
    A tf.distribute.Strategy.

  Raises:
    errors.InputError: flags that contradict each other or the TPU found.
  """
  check_tpu_flags(use_tpu, tpu_name, tpu_zone, gcp_project, master)
  if not use_tpu:
    return _cpu_gpu_strategy(strategy)
  address = tpu_name or master or ""
  try:
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
        tpu=address, zone=tpu_zone, project=gcp_project)
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
  # Off Google Cloud, a TPU name fails in the GCE metadata lookup
  # (urllib's URLError, an OSError) before any TensorFlow op runs; no TPU
  # found is a ValueError or RuntimeError, a TPU that does not answer an
  # OpError.
  except (ValueError, RuntimeError, OSError, tf.errors.OpError) as e:
    raise errors.InputError(
        "--use_tpu: cannot reach the TPU %s (%s: %s). Check --tpu_name, "
        "--tpu_zone and --gcp_project, or run without --use_tpu (and "
        "--tpu_name) to train on this machine's CPU or GPUs." %
        (repr(address) if address else "of this machine", type(e).__name__,
         _first_line(e))) from None
  strategy = tf.distribute.TPUStrategy(resolver)
  replicas = strategy.num_replicas_in_sync
  if num_tpu_cores is not None and num_tpu_cores != replicas:
    raise errors.InputError("--num_tpu_cores=%d but the TPU has %d cores." %
                            (num_tpu_cores, replicas))
  logging.info("Running on TPU %s with %d cores.", tpu_name or master,
               replicas)
  return strategy


def _first_line(e):
  """An exception's message up to its first line break (TensorFlow's carry
  a stack trace after it)."""
  return (str(e).strip().split("\n") or [""])[0]


def _cpu_gpu_strategy(name):
  if name not in STRATEGIES:
    raise errors.InputError("--strategy=%s: expected one of %s." %
                            (name, ", ".join(STRATEGIES)))
  if name == "auto":
    cluster = json.loads(os.environ.get("TF_CONFIG") or "{}").get("cluster",
                                                                  {})
    if sum(len(tasks) for tasks in cluster.values()) > 1:
      name = "multi_worker_mirrored"
    elif len(tf.config.list_physical_devices("GPU")) > 1:
      name = "mirrored"
    else:
      name = "default"
  if name == "multi_worker_mirrored":
    if not os.environ.get("TF_CONFIG"):
      raise errors.InputError("--strategy=multi_worker_mirrored needs the "
                              "cluster in the TF_CONFIG environment variable.")
    return tf.distribute.MultiWorkerMirroredStrategy()
  if name == "mirrored":
    return tf.distribute.MirroredStrategy()
  return tf.distribute.get_strategy()


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
