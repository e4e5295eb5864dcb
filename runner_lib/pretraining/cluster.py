"""Shards made on a Dask cluster: one started here (local) or one's
scheduler reached by address (connect; `dask scheduler`, `dask worker`).

Each shard is one task (sharding.make_shard) that writes its own file. A
worker that dies takes its tasks with it and the scheduler runs them again
elsewhere (a task's output is the same wherever it runs). The address may
be tls://: Dask's own TLS settings (its configuration or
DASK_DISTRIBUTED__COMM__TLS__* variables) give the certificates.
"""

import contextlib
import logging as std_logging
import os
import signal
import threading

from absl import logging
import dask
import distributed
import yaml

from runner_lib.core import errors
from runner_lib.pretraining import sharding

# How long the client tries to reach the scheduler, and waits for a worker.
CONNECT_SECONDS = 10
WORKER_SECONDS = 60
# After a failure or Ctrl-C: how long the client waits for the shards in
# progress to end (each is seconds of work), so that none is left half made.
DRAIN_SECONDS = 120
# How long a local worker may take to start (a second or two here).
START_SECONDS = 60

# What the scheduler (it unpickles the tasks) and the workers must import.
_IMPORTS = "import runner_lib.pretraining.sharding"

# Dask's periodic work made rare; a cluster of one's own is started with it
# too (DASK_CONFIG; docs/pre-training.md).
CONFIG_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           "dask.yaml")


class _IgnoreInterrupts(distributed.WorkerPlugin):
  """Ctrl-C at a terminal reaches the local workers too (one process
  group): they leave it to the client, which stops the run in order."""

  def setup(self, worker):
    del worker
    if threading.current_thread() is threading.main_thread():
      signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextlib.contextmanager
def local(num_workers):
  """A distributed.Client of a new cluster of num_workers processes here.

  The scheduler listens on loopback with TLS from throwaway certificates
  (Dask's Security.temporary): a scheduler runs whatever code its clients
  send, and anyone on a shared machine can reach a loopback port. A worker
  that dies is started again by its nanny, and its shards made again.
  """
  # The scheduler and the nannies live in this process, where absl's
  # handler would print their every start and close (INFO); a worker's
  # death and restart stay (WARNING).
  dask_logger = std_logging.getLogger("distributed")
  level = dask_logger.level
  dask_logger.setLevel(std_logging.WARNING)
  try:
    with open(CONFIG_FILE) as f:  # set() replaces whole top-level subtrees
      quiet = dask.config.merge(dask.config.config, yaml.safe_load(f))
    # The nannies hand the configuration to their workers, whose own logs
    # stay silent: a task's error reaches the client as its exception, a
    # worker's death is its nanny's (here), and what else they logged was
    # shutdown races. death_timeout bounds a worker's start.
    with dask.config.set(quiet), distributed.LocalCluster(
        n_workers=num_workers, threads_per_worker=1, processes=True,
        dashboard_address=None, security=True,
        silence_logs=std_logging.CRITICAL,
        death_timeout=START_SECONDS) as local_cluster, distributed.Client(
            local_cluster, set_as_default=False) as client:
      client.register_plugin(_IgnoreInterrupts(), name="ignore-interrupts")
      yield client
  finally:
    dask_logger.setLevel(level)


def connect(address):
  """A distributed.Client of the scheduler at address, with a worker; the
  scheduler and the workers import this project.

  Raises:
    errors.InputError: a tls:// address without Dask's TLS settings, no
      connection (or this client's certificate refused), no worker within
      WORKER_SECONDS, or the project not importable there.
  """
  security = distributed.Security()  # Dask's configuration (TLS)
  if address.startswith("tls://") and not (
      security.tls_ca_file and security.tls_client_cert):
    raise errors.InputError(
        "--dask_scheduler=%s is a TLS scheduler, and Dask has no TLS "
        "settings for this client: set DASK_DISTRIBUTED__COMM__TLS__CA_FILE, "
        "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT and "
        "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY (or Dask's configuration; "
        "docs/pre-training.md, Many machines)." % address)
  try:
    client = distributed.Client(address, timeout=CONNECT_SECONDS,
                                set_as_default=False, security=security)
  except (OSError, TimeoutError, ValueError, TypeError) as e:
    raise errors.InputError(
        "--dask_scheduler=%s: cannot connect within %d s (%s)." % (
            address, CONNECT_SECONDS, " ".join(str(e).split())[:300])) from None
  try:
    client.wait_for_workers(1, timeout=WORKER_SECONDS)
  except (OSError, TimeoutError):
    client.close()
    raise errors.InputError(
        "--dask_scheduler=%s: no worker joined it within %d s (start one "
        "with `dask worker %s`)." % (address, WORKER_SECONDS,
                                     address)) from None
  # exec, a builtin, unpickles without the project; an ImportError comes
  # back as itself.
  for who, call in (("the Dask scheduler", client.run_on_scheduler),
                    ("a Dask worker", client.run)):
    try:
      call(exec, _IMPORTS)
    except ImportError as e:
      client.close()
      raise errors.InputError(
          "--dask_scheduler=%s: %s cannot import this project (%s: %s): "
          "start each with the project's folder on PYTHONPATH (PYTHONPATH="
          "/path/to/bert dask scheduler, and dask worker) and the packages "
          "of its requirements.txt." % (address, who, type(e).__name__,
                                        e)) from None
  return client


def run(client, shards, settings):
  """Makes the shards as tasks on the cluster.

  Yields:
    sharding.ShardResult, as the shards complete.

  Raises:
    errors.InputError: a shard's input is bad (the file and line named).
    KeyboardInterrupt: the tasks not started were cancelled and those
      running have ended (within DRAIN_SECONDS).
  """
  pending = {}  # key -> Future of the shards not yet yielded
  try:
    # The settings (the vocab) as one task's result, fetched once by each
    # worker and made again if every worker holding it dies (scattered data
    # would be lost); the shards stay queued on the scheduler, cancellable.
    settings_future = client.submit(_identity, settings, pure=False)
    pending = {f.key: f for f in client.map(
        sharding.make_shard, shards, settings=settings_future, pure=False)}
    # Results through the client's event loop (a task's error is raised
    # here): the main thread waits on a condition, where Ctrl-C lands
    # cleanly (inside Client.sync, distributed 2026.8 logged a traceback).
    for future, result in distributed.as_completed(
        list(pending.values()), loop=client.loop, with_results=True):
      # Released once yielded: a worker lost later would otherwise take
      # every shard it made with it, and the scheduler make them again.
      del pending[future.key]
      del future
      yield result
  except BaseException:
    _stop(client, list(pending.values()))
    raise


def _identity(value):
  return value


def _stop(client, futures):
  """Cancels the tasks not started, waits for those running to end."""
  try:
    running = {key for keys in client.processing().values() for key in keys}
  except (OSError, TimeoutError):
    return  # the scheduler is gone: nothing runs for us any more
  client.cancel([f for f in futures if f.key not in running])
  waiting = [f for f in futures if f.key in running]
  if waiting:
    logging.info("Waiting for %d shards in progress to end.", len(waiting))
    try:
      with client.as_current():  # wait()'s client (not the default one)
        distributed.wait(waiting, timeout=DRAIN_SECONDS)
    except (OSError, TimeoutError):
      pass  # cancelled below; a shard's file is whole or absent
  client.cancel(futures)
