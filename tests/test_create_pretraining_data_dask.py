"""create_pretraining_data.py on a Dask cluster: a scheduler and workers as
separate processes talking TCP on this machine, as on many machines, or
the cluster --num_workers starts here. The records are the same from the
local workers, one Dask worker, two, and two of which one is killed
mid-run; faults end in one line."""

import filecmp
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import psutil
import pytest

from tests import conftest
from tests.conftest import REPO_ROOT

distributed = pytest.importorskip(
    "distributed", reason="Dask's distributed package is absent "
    "(pip install -r requirements.txt)")

# Several shards of real text, in little time: the shard size is a flag.
CORPUS_BYTES = 1_600_000
SHARD_BYTES = 100_000
FLAGS = ["--max_seq_length=128", "--max_predictions_per_seq=20",
         "--dupe_factor=1", "--random_seed=7",
         "--shard_bytes=%d" % SHARD_BYTES]


def free_port():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


class Cluster(object):
  """`dask scheduler` and `dask worker`s on loopback, ended on close()."""

  def __init__(self, tmp_path, num_workers, project_on_path=True, tls=None):
    """tls: None, or the environment of Dask's TLS settings (tls://)."""
    protocol = "tls" if tls else "tcp"
    self.address = "%s://127.0.0.1:%d" % (protocol, free_port())
    env = conftest.script_env(PYTHONPATH=REPO_ROOT, **(tls or {}))
    worker_env = dict(env)
    if not project_on_path:
      del worker_env["PYTHONPATH"]
    dask = os.path.join(os.path.dirname(sys.executable), "dask")
    self.processes = []
    self._start([dask, "scheduler", "--protocol", protocol, "--host",
                 "127.0.0.1", "--port", self.address.rsplit(":", 1)[1],
                 "--no-dashboard"], env, tmp_path / "scheduler.log")
    for i in range(num_workers):
      self._start([dask, "worker", self.address, "--nthreads", "1",
                   "--no-dashboard", "--name", "w%d" % i], worker_env,
                  tmp_path / ("worker%d.log" % i))
    security = None
    if tls:
      security = distributed.Security(
          tls_ca_file=tls["DASK_DISTRIBUTED__COMM__TLS__CA_FILE"],
          tls_client_cert=tls["DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT"],
          tls_client_key=tls["DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY"],
          require_encryption=True)
    self.client = distributed.Client(self.address, timeout=60,
                                     set_as_default=False, security=security)
    self.client.wait_for_workers(num_workers, timeout=60)

  def _start(self, command, env, log):
    # Outside the repo: a worker without PYTHONPATH must not find it.
    with open(log, "w") as f:
      self.processes.append(subprocess.Popen(
          command, env=env, cwd=str(log.parent), stdout=f,
          stderr=subprocess.STDOUT, start_new_session=True))

  def worker_pids(self):
    """The pids of the worker processes (not their nannies)."""
    return sorted(self.client.run(os.getpid).values())

  def close(self):
    """Kills each process with its children (a nanny's worker)."""
    self.client.close(timeout=10)
    for process in self.processes:
      os.killpg(process.pid, signal.SIGKILL)
    for process in self.processes:
      process.wait(timeout=20)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
  """A scheduler and two workers, for the tests of this module."""
  started = Cluster(tmp_path_factory.mktemp("cluster"), 2)
  yield started
  started.close()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  """(corpus, vocab): the real Gutenberg text of ../shared/data, its
  documents up to CORPUS_BYTES."""
  source = os.path.join(conftest.SHARED_DATA, "corpus",
                        "gutenberg_pretrain.txt")
  if not os.path.exists(source):
    pytest.skip("../shared/data is absent (real data sets live there)")
  with open(source, "rb") as f:
    data = f.read()
  corpus_file = tmp_path_factory.mktemp("corpus") / "gutenberg.txt"
  corpus_file.write_bytes(data[:data.index(b"\n\n", CORPUS_BYTES) + 2])
  return str(corpus_file), os.path.join(conftest.SHARED_DATA, "vocab",
                                        "uncased_vocab.txt")


def command(corpus, output, *extra):
  return [sys.executable, os.path.join(REPO_ROOT,
                                       "create_pretraining_data.py"),
          "--input_file=%s" % corpus[0], "--output_file=%s" % output,
          "--vocab_file=%s" % corpus[1]] + FLAGS + list(extra)


def run(corpus, output, *extra, timeout=300, env=None):
  return subprocess.run(command(corpus, output, *extra), cwd=REPO_ROOT,
                        capture_output=True, text=True, timeout=timeout,
                        env=conftest.script_env(**(env or {})))


def shards_of(output):
  return sorted(glob.glob(output + "-*-of-*"))


def same_files(a, b):
  """Whether two runs wrote the same shard files, byte for byte."""
  names_a = [os.path.basename(p)[len(os.path.basename(a)):]
             for p in shards_of(a)]
  names_b = [os.path.basename(p)[len(os.path.basename(b)):]
             for p in shards_of(b)]
  return names_a == names_b and all(
      filecmp.cmp(p, q, shallow=False)
      for p, q in zip(shards_of(a), shards_of(b)))


def wait_for(condition, seconds, what):
  deadline = time.monotonic() + seconds
  while not condition():
    assert time.monotonic() < deadline, "no %s within %d s" % (what, seconds)
    time.sleep(0.05)


@pytest.mark.slow
def test_the_same_records_from_any_workers_even_one_killed(
    cluster, corpus, tmp_path):
  local = str(tmp_path / "local" / "examples")
  result = run(corpus, local, "--num_workers=2")
  assert result.returncode == 0, result.stderr[-3000:]
  num_shards = len(shards_of(local))
  assert num_shards == -(-os.path.getsize(corpus[0]) // SHARD_BYTES) >= 10
  manifest = json.loads(open(local + ".manifest.json").read())
  assert manifest["complete"] and manifest["num_shards"] == num_shards
  assert manifest["records"] == sum(s["records"] for s in manifest["shards"])
  assert manifest["records"] > 2000

  # Relative paths (the workers run in another folder): this folder's.
  two = str(tmp_path / "two" / "examples")
  result = run((os.path.relpath(corpus[0], REPO_ROOT), corpus[1]),
               os.path.relpath(two, REPO_ROOT),
               "--dask_scheduler=%s" % cluster.address)
  assert result.returncode == 0, result.stderr[-3000:]
  assert same_files(local, two)
  assert (open(two + ".manifest.json").read() ==
          open(local + ".manifest.json").read())

  # A worker killed with SIGKILL while the run is under way: its shard is
  # made again on the other worker (the nanny starts a new one).
  killed = str(tmp_path / "killed" / "examples")
  pids = cluster.worker_pids()
  process = subprocess.Popen(
      command(corpus, killed, "--dask_scheduler=%s" % cluster.address),
      cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
      text=True, env=conftest.script_env())
  wait_for(lambda: len(shards_of(killed)) >= 2, 120, "shard")
  written_then = len(shards_of(killed))
  os.kill(pids[0], signal.SIGKILL)
  _, stderr = process.communicate(timeout=300)
  assert process.returncode == 0, stderr[-3000:]
  assert written_then < num_shards - 2  # it was killed mid-run
  assert same_files(local, killed)
  assert not glob.glob(killed + "*.tmp-*")
  wait_for(lambda: len(cluster.client.run(os.getpid)) == 2, 60,
           "restarted worker")

  # One worker: a cluster of its own.
  single = Cluster(tmp_path, 1)
  try:
    one = str(tmp_path / "one" / "examples")
    result = run(corpus, one, "--dask_scheduler=%s" % single.address)
  finally:
    single.close()
  assert result.returncode == 0, result.stderr[-3000:]
  assert same_files(local, one)


@pytest.mark.slow
def test_ctrl_c_leaves_whole_shards_and_a_rerun_finishes(cluster, corpus,
                                                         tmp_path):
  output = str(tmp_path / "examples")
  # Five masks of each document: shards slow enough to stop mid-run.
  slower = "--dupe_factor=5"
  # SIGINT as at a terminal: a process started in the background (as the
  # suite may be) inherits it ignored, and Python then keeps it so.
  process = subprocess.Popen(
      command(corpus, output, "--dask_scheduler=%s" % cluster.address,
              slower),
      cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
      text=True, env=conftest.script_env(),
      preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
  wait_for(lambda: shards_of(output), 120, "shard")
  process.send_signal(signal.SIGINT)
  _, stderr = process.communicate(timeout=200)
  assert process.returncode == 130, stderr[-3000:]
  assert "Interrupted" in stderr.strip().splitlines()[-1]
  assert "Traceback" not in stderr
  stopped_with = len(shards_of(output))
  assert 1 <= stopped_with < 12
  assert not glob.glob(output + "*.tmp-*")
  manifest = json.loads(open(output + ".manifest.json").read())
  assert not manifest["complete"]
  # The same command again makes the other shards only, as a whole run.
  result = run(corpus, output, "--dask_scheduler=%s" % cluster.address,
               slower)
  assert result.returncode == 0, result.stderr[-3000:]
  assert "%d of " % stopped_with in result.stderr
  reference = str(tmp_path / "reference" / "examples")
  result = run(corpus, reference, "--num_workers=2", slower)
  assert result.returncode == 0, result.stderr[-3000:]
  assert same_files(reference, output)
  assert json.loads(open(output + ".manifest.json").read())["complete"]


def spawned_workers(pid):
  """psutil.Process of the worker processes a local cluster spawned."""
  return [p for p in psutil.Process(pid).children()
          if "spawn_main" in " ".join(p.cmdline())]


@pytest.mark.slow
def test_a_local_cluster_loses_nothing_to_a_killed_worker_or_ctrl_c(
    corpus, tmp_path):
  slower = "--dupe_factor=5"  # shards slow enough to act mid-run
  reference = str(tmp_path / "reference" / "examples")
  result = run(corpus, reference, "--num_workers=2", slower)
  assert result.returncode == 0, result.stderr[-3000:]
  num_shards = len(shards_of(reference))

  def start(output):
    # Its own process group, as a command at a terminal, with SIGINT as
    # there (a background suite would hand it down ignored).
    return subprocess.Popen(
        command(corpus, output, "--num_workers=2", slower), cwd=REPO_ROOT,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=conftest.script_env(), start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

  # A local worker killed with SIGKILL mid-run: started again, its shard
  # made again, the run whole (the local workers' processes of old failed
  # the run here).
  killed = str(tmp_path / "killed" / "examples")
  process = start(killed)
  wait_for(lambda: len(shards_of(killed)) >= 2, 120, "shard")
  written_then = len(shards_of(killed))
  spawned_workers(process.pid)[0].kill()
  _, stderr = process.communicate(timeout=300)
  assert process.returncode == 0, stderr[-3000:]
  assert written_then < num_shards - 2  # it was killed mid-run
  assert same_files(reference, killed)
  assert not glob.glob(killed + "*.tmp-*")

  # Ctrl-C at a terminal reaches the whole process group, the workers
  # too: the client stops the run in order, in one line.
  stopped = str(tmp_path / "stopped" / "examples")
  process = start(stopped)
  wait_for(lambda: shards_of(stopped), 120, "shard")
  os.killpg(process.pid, signal.SIGINT)
  _, stderr = process.communicate(timeout=200)
  assert process.returncode == 130, stderr[-3000:]
  assert "Interrupted" in stderr.strip().splitlines()[-1], stderr[-3000:]
  assert "Traceback" not in stderr, stderr[-3000:]
  assert 1 <= len(shards_of(stopped)) < num_shards
  assert not glob.glob(stopped + "*.tmp-*")
  result = run(corpus, stopped, "--num_workers=2", slower)
  assert result.returncode == 0, result.stderr[-3000:]
  assert same_files(reference, stopped)


def last_line(result):
  lines = result.stderr.strip().splitlines()
  assert result.returncode == 1, result.stderr[-3000:]
  assert "Traceback" not in result.stderr, result.stderr[-3000:]
  return lines[-1]


@pytest.mark.slow
def test_faults_are_one_line(cluster, corpus, tmp_path):
  # A rerun into a run with other settings: refused, the files untouched.
  output = str(tmp_path / "examples")
  result = run(corpus, output, "--num_workers=2")
  assert result.returncode == 0, result.stderr[-3000:]
  before = {p: os.path.getmtime(p) for p in shards_of(output)}
  line = last_line(run(corpus, output, "--num_workers=2",
                       "--dupe_factor=2"))
  assert "other settings (--dupe_factor: 1 there, 2 here)" in line
  assert {p: os.path.getmtime(p) for p in shards_of(output)} == before
  # The same settings: nothing to do.
  result = run(corpus, output, "--dask_scheduler=%s" % cluster.address)
  assert result.returncode == 0, result.stderr[-3000:]
  assert {p: os.path.getmtime(p) for p in shards_of(output)} == before

  # A line that is not UTF-8, deep in the corpus: named, nothing left.
  with open(corpus[0], "rb") as f:
    data = f.read()
  cut = data.index(b"\n", len(data) * 2 // 3) + 1
  bad = tmp_path / "bad.txt"
  bad.write_bytes(data[:cut] + b"caf\xe9\n" + data[cut:])
  line_number = data[:cut].count(b"\n") + 1
  bad_output = str(tmp_path / "bad" / "examples")
  line = last_line(run((str(bad), corpus[1]), bad_output,
                       "--dask_scheduler=%s" % cluster.address))
  assert "%s, line %d is not UTF-8" % (bad, line_number) in line
  assert not os.path.exists(bad_output + ".manifest.json")
  assert not glob.glob(bad_output + "-*")

  # No scheduler there: one line naming the address, within 30 s.
  address = "tcp://127.0.0.1:%d" % free_port()
  started = time.monotonic()
  line = last_line(run(corpus, str(tmp_path / "none"),
                       "--dask_scheduler=%s" % address))
  assert time.monotonic() - started < 30
  assert "--dask_scheduler=%s: cannot connect within" % address in line


@pytest.mark.slow
def test_workers_without_the_project_are_one_line(corpus, tmp_path):
  bare = Cluster(tmp_path, 1, project_on_path=False)
  try:
    output = str(tmp_path / "examples")
    line = last_line(run(corpus, output,
                         "--dask_scheduler=%s" % bare.address))
  finally:
    bare.close()
  assert "a Dask worker cannot import this project" in line or (
      "or a worker cannot import this project" in line), line
  assert "No module named 'runner_lib'" in line
  assert not glob.glob(output + "*")


def make_certificates(folder, name):
  """(CA file, cert file, key file): a throwaway CA and one certificate
  it signed for 127.0.0.1, by the openssl command."""
  openssl = shutil.which("openssl")
  if not openssl:
    pytest.skip("the openssl command is absent (it makes the test's CA)")
  folder.mkdir()

  def call(*args):
    subprocess.run([openssl] + list(args), cwd=str(folder), check=True,
                   capture_output=True, timeout=60)

  call("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
       "-subj", "/CN=%s test CA" % name, "-keyout", "ca.key", "-out",
       "ca.pem")
  call("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
       "-keyout", "node.key", "-out", "node.csr")
  (folder / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
  call("x509", "-req", "-in", "node.csr", "-CA", "ca.pem", "-CAkey",
       "ca.key", "-CAcreateserial", "-days", "2", "-extfile", "san.ext",
       "-out", "node.pem")
  return (str(folder / "ca.pem"), str(folder / "node.pem"),
          str(folder / "node.key"))


def tls_environment(ca, cert, key):
  """Dask's TLS settings as environment variables, one certificate for the
  scheduler, the workers and the client."""
  env = {"DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION": "True",
         "DASK_DISTRIBUTED__COMM__TLS__CA_FILE": ca}
  for role in ("SCHEDULER", "WORKER", "CLIENT"):
    env["DASK_DISTRIBUTED__COMM__TLS__%s__CERT" % role] = cert
    env["DASK_DISTRIBUTED__COMM__TLS__%s__KEY" % role] = key
  return env


@pytest.mark.slow
def test_tls_cluster_runs_and_refuses_clients_without_its_certificate(
    corpus, tmp_path):
  trusted = tls_environment(*make_certificates(tmp_path / "ca", "cluster"))
  stranger = tls_environment(*make_certificates(tmp_path / "other",
                                                "stranger"))
  secure = Cluster(tmp_path, 1, tls=trusted)
  try:
    output = str(tmp_path / "examples")
    result = run(corpus, output, "--dask_scheduler=%s" % secure.address,
                 env=trusted)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(open(output + ".manifest.json").read())["complete"]
    # No TLS settings: refused at once, saying what to set; a certificate
    # from another CA: the scheduler refuses it. One line each.
    for env, want in (({}, "is a TLS scheduler, and Dask has no TLS "
                           "settings for this client: set "
                           "DASK_DISTRIBUTED__COMM__TLS__CA_FILE"),
                      (stranger, "cannot connect")):
      started = time.monotonic()
      line = last_line(run(corpus, str(tmp_path / "refused"),
                           "--dask_scheduler=%s" % secure.address, env=env))
      assert time.monotonic() - started < 30
      assert "--dask_scheduler=%s" % secure.address in line
      assert want in line
      assert not glob.glob(str(tmp_path / "refused*"))
  finally:
    secure.close()
