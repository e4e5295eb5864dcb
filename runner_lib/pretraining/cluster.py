"""Shards made on a Dask cluster: one started here (local) or one's
scheduler reached by address (connect; `dask scheduler`, `dask worker`).

Each shard is one task (sharding.make_shard) that writes its own file; the
client sends the settings once, then only watches. A worker that dies takes
its tasks with it and the scheduler runs them again elsewhere (a task's
output is the same wherever it runs). The address may be tls://: Dask's own
TLS settings (its configuration or DASK_DISTRIBUTED__COMM__TLS__* variables)
give the certificates.
"""

import asyncio
import contextlib
import logging as std_logging
import re
import signal
import threading
import time
import uuid

from absl import logging
import dask
import distributed
import distributed.comm

from runner_lib.core import errors
from runner_lib.pretraining import sharding

# How long the client tries to reach the scheduler.
CONNECT_SECONDS = 10

# How long the run waits for a first worker to join.
WORKER_SECONDS = 60

# After a failure or Ctrl-C: how long the client waits for the shards in
# progress to end (each is seconds of work), so that none is left half made.
DRAIN_SECONDS = 120

# The project's packages a worker must be able to import.
_PACKAGES = ("runner_lib", "tokenization")


# The settings of each run under way, in a worker process (by _Settings).
_settings_of_run = {}


class _Settings(distributed.WorkerPlugin):
  """A Dask worker plugin that holds a run's settings on every worker."""

  def __init__(self, run_id, settings):
    self.run_id = run_id
    self.settings = settings

  def setup(self, worker):
    del worker  # the settings are the same for every worker
    _settings_of_run[self.run_id] = self.settings

  def teardown(self, worker):
    del worker
    _settings_of_run.pop(self.run_id, None)


def _make_shard(shard, run_id):
  """sharding.make_shard with the run's settings: runs on a worker."""
  return sharding.make_shard(shard, _settings_of_run[run_id])


class _IgnoreInterrupts(distributed.WorkerPlugin):
  """Ctrl-C at a terminal reaches the local workers too (one process
  group): they leave it to the client, which stops the run in order."""

  def setup(self, worker):
    del worker
    if threading.current_thread() is threading.main_thread():
      signal.signal(signal.SIGINT, signal.SIG_IGN)


# How long a local worker may take to start (a second or two here).
START_SECONDS = 60

# Dask's own periodic work made rare (the profiler off, the event loop's
# tick and the monitors slower): each of its threads takes the GIL from the
# pure-Python task (docs/pre-training.md gives a cluster the same).
QUIET = {"distributed.worker.profile.enabled": False,
         "distributed.admin.tick.interval": "1s",
         "distributed.admin.system-monitor.interval": "5s",
         "distributed.worker.memory.monitor-interval": "1s"}


@contextlib.contextmanager
def local(num_workers):
  """A distributed.Client of a new cluster of num_workers processes here.

  The scheduler listens on loopback with TLS from throwaway certificates
  (Dask's Security.temporary): a scheduler runs whatever code its clients
  send, and anyone on a shared machine can reach a loopback port. A worker
  that dies is started again by its nanny, and its shards made again.

  Yields:
    distributed.Client.
  """
  # The scheduler and the nannies live in this process, where absl's
  # handler would print their every start, connection and close (INFO);
  # a worker's death and restart stay (WARNING).
  dask_logger = std_logging.getLogger("distributed")
  level = dask_logger.level
  dask_logger.setLevel(std_logging.WARNING)
  try:
    # The nannies hand the configuration at their start to their workers.
    # The workers' own logs stay silent: a task's error reaches the client
    # as its exception and a worker's death is its nanny's (here); what a
    # worker logged beyond that was shutdown races (a heartbeat to the
    # scheduler as it closes, at ERROR with a traceback). death_timeout
    # bounds a worker's start (unbounded by default).
    with dask.config.set(QUIET), distributed.LocalCluster(
        n_workers=num_workers, threads_per_worker=1, processes=True,
        dashboard_address=None, security=True,
        silence_logs=std_logging.CRITICAL,
        death_timeout=START_SECONDS) as local_cluster, distributed.Client(
            local_cluster, set_as_default=False) as client:
      client.register_plugin(_IgnoreInterrupts(), name="ignore-interrupts")
      yield client
  finally:
    dask_logger.setLevel(level)


async def _reach(address, security):
  comm = await distributed.comm.connect(
      address, timeout=CONNECT_SECONDS,
      **security.get_connection_args("client"))
  await comm.close()


def connect(address):
  """A distributed.Client of the scheduler at address, with a worker.

  Raises:
    errors.InputError: a tls:// address without Dask's TLS settings, the
      scheduler cannot be reached (or refuses this client's certificate),
      or no worker joins it within WORKER_SECONDS.
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
    # A bare connection first: a Client that fails to connect leaves an
    # object whose clean-up waits and prints at exit.
    asyncio.run(_reach(address, security))
    client = distributed.Client(address, timeout=CONNECT_SECONDS,
                                set_as_default=False, security=security)
  except (OSError, TimeoutError, ValueError, TypeError) as e:
    reason = " ".join(str(e).split())
    raise errors.InputError(
        "--dask_scheduler=%s: cannot connect within %d s (%s)." %
        (address, CONNECT_SECONDS, reason[:300])) from None
  try:
    client.wait_for_workers(1, timeout=WORKER_SECONDS)
  except (OSError, TimeoutError):
    client.close()
    raise errors.InputError(
        "--dask_scheduler=%s: no worker joined it within %d s (start one "
        "with `dask worker %s`)." % (address, WORKER_SECONDS,
                                     address)) from None
  return client


def _import_failure(error):
  """The one-line reason when error is a worker or the scheduler failing to
  import this project (Dask relays some errors as their text only)."""
  text = "%s: %s" % (type(error).__name__, error)
  if not re.search(r"No module named '(%s)" % "|".join(_PACKAGES), text):
    if "deserialization of the task graph" not in text:
      return None
  return ("the Dask scheduler or a worker cannot import this project (%s): "
          "start each with the project's folder on PYTHONPATH "
          "(PYTHONPATH=/path/to/bert dask scheduler, and dask worker) and "
          "the packages of its requirements.txt." %
          " ".join(text.split())[:200])


def run(client, shards, settings):
  """Makes the shards as tasks on the cluster.

  Yields:
    sharding.ShardResult, as the shards complete.

  Raises:
    errors.InputError: a shard's input is bad (the file and line named), or
      the scheduler or workers cannot import the project.
    KeyboardInterrupt: the tasks not yet started were cancelled and those
      running have ended (within DRAIN_SECONDS).
  """
  pending = {}  # key -> Future of the shards not yet yielded
  run_id = "create_pretraining_data-%s" % uuid.uuid4().hex
  try:
    # The settings (the vocab) once per worker, joining ones included, as
    # a plugin: tasks without inputs are queued on the scheduler, so those
    # not started can be cancelled.
    client.register_plugin(_Settings(run_id, settings), name=run_id)
    pending = {f.key: f for f in client.map(_make_shard, shards,
                                            run_id=run_id, pure=False)}
    # The results come through the client's event loop (with_results; a
    # task's error is raised here): the main thread only waits on a
    # condition, where Ctrl-C lands cleanly. Landing inside Client.sync
    # (future.result()) left distributed logging a traceback (a NameError
    # in its cancel callback, distributed 2026.8).
    for future, result in distributed.as_completed(
        list(pending.values()), loop=client.loop, with_results=True):
      # Released once yielded: a worker lost later would otherwise take
      # every shard it made with it, and the scheduler make them again.
      del pending[future.key]
      del future
      yield result
  except Exception as e:  # pylint: disable=broad-except
    _stop(client, list(pending.values()))
    reason = _import_failure(e)
    if reason:
      raise errors.InputError(reason) from None
    raise
  except BaseException:
    _stop(client, list(pending.values()))
    raise
  finally:
    try:
      client.unregister_worker_plugin(run_id)
    except (OSError, TimeoutError, ValueError, KeyError):
      pass  # the cluster is gone, or the plugin never got there


def _stop(client, futures):
  """Cancels the tasks not started, waits for those running to end."""
  keys = {f.key for f in futures}
  running = set()
  try:
    for worker_keys in client.processing().values():
      running.update(k for k in worker_keys if k in keys)
  except (OSError, TimeoutError):
    pass  # the scheduler is gone: nothing runs for us any more
  client.cancel([f for f in futures if f.key not in running])
  deadline = time.monotonic() + DRAIN_SECONDS
  waiting = [f for f in futures if f.key in running]
  if waiting:
    logging.info("Waiting for %d shards in progress to end.", len(waiting))
  for future in waiting:
    while not future.done() and time.monotonic() < deadline:
      time.sleep(0.1)
  client.cancel(futures)

